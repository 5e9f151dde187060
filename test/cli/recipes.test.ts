import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { withRecipe } from '../../src/cli/options/recipes.ts';

/** A command with the options a recipe fills, parsed from `argv` as `train` parses its own. */
function parsed(argv: string[]): { cmd: Command; raw: Record<string, unknown> } {
  const cmd = new Command()
    .exitOverride()
    .option('--model <m>', 'model', 'mlp')
    .option('--optimizer <o>', 'optimizer', 'sgd')
    .option('--lr <x>')
    .option('--weight-decay <x>')
    .option('--batch <n>', 'batch', '64')
    .option('--steps <n>')
    .option('--lr-schedule <s>', 'schedule', 'constant');
  cmd.parse(argv, { from: 'user' });
  return { cmd, raw: cmd.opts() };
}

describe("a model's recipe", () => {
  it("fills the words workload's AdamW settings the user left unset", () => {
    const { cmd, raw } = parsed(['--model', 'transformer']);
    const out = withRecipe(cmd, raw).raw;
    expect(out).toMatchObject({ optimizer: 'adamw', lr: '0.003', weightDecay: '0.01', batch: '256' });
  });

  it("keeps the recipe's lr and weight decay away from another optimizer, which then takes its own", () => {
    const { cmd, raw } = parsed(['--model', 'transformer', '--optimizer', 'lion']);
    const out = withRecipe(cmd, raw).raw;
    expect(out.optimizer).toBe('lion');
    expect(out.lr).toBeUndefined();
    expect(out.weightDecay).toBeUndefined();
    expect(out.batch).toBe('256'); // the rest of the recipe still holds
  });

  it('never overrides what the user gave', () => {
    const { cmd, raw } = parsed(['--model', 'transformer', '--optimizer', 'lion', '--lr', '0.0003', '--batch', '8']);
    expect(withRecipe(cmd, raw).raw).toMatchObject({ lr: '0.0003', batch: '8' });
  });
});
