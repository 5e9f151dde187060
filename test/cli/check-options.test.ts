/**
 * `run --verify`, `--doubt-rule` and `--direction-rules`: the step checks a job
 * asks for (docs/ROBUSTNESS.md) ride in the job config, so every peer, browser
 * tabs included, runs the same checks; the refusals name the flags before
 * anything starts. Verify and the doubt rule are on by default in elastic
 * jobs, and `--no-verify` / `--no-doubt-rule` turn them off there.
 */
import { describe, expect, it } from 'vitest';
import { jobSpecFor, runCommand } from '../../src/cli/commands/run.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { plainRunOptions, type RunOptions } from '../support/run-options.ts';

const parseRun = (args: string[]) => runCommand().exitOverride().parseAsync(args, { from: 'user' });
const base = plainRunOptions();
/** The step checks as run's flags give them (absent: neither form was given). */
type Checks = Pick<RunOptions['settings'], 'verify' | 'doubtRule' | 'directionRules'>;
const configOf = (checks?: Checks) =>
  trainConfigFromJob(jobSpecFor({ ...base, settings: { ...base.settings, ...checks } }).config);

describe('ringtrain run --verify / --doubt-rule / --direction-rules', () => {
  it('turns on exactly the checks asked for, in the job every peer reads', () => {
    const none = configOf({ verify: false, doubtRule: false, directionRules: false });
    expect(none.verify).toBe(false);
    expect(none.guard).toMatchObject({ doubt: false, direction: false });
    expect(configOf(undefined).guard).toMatchObject({ doubt: false, direction: false });

    const all = configOf({ verify: true, doubtRule: true, directionRules: true });
    expect(all.verify).toBe(true);
    expect(all.guard && 'doubt' in all.guard).toBe(false);
    expect(all.guard && 'direction' in all.guard).toBe(false);

    const doubtOnly = configOf({ verify: false, doubtRule: true, directionRules: false });
    expect(doubtOnly.guard).toMatchObject({ direction: false });
    expect(doubtOnly.guard && 'doubt' in doubtOnly.guard).toBe(false);
  });

  it('runs verify and the doubt rule in an elastic job unless it says --no-verify / --no-doubt-rule, and in a fixed one only when asked', async () => {
    const elastic = (checks?: Checks, more: Partial<RunOptions> = {}) =>
      trainConfigFromJob(
        jobSpecFor({ ...base, settings: { ...base.settings, elastic: true, ...checks }, ...more } as RunOptions).config,
      );
    const on = elastic(undefined);
    expect(on.verify, 'elastic, nothing said').toBe(true);
    expect(on.guard && 'doubt' in on.guard, 'elastic, nothing said').toBe(false);
    expect(elastic({ directionRules: false }).guard).toMatchObject({ direction: false });
    const off = elastic({ verify: false, doubtRule: false, directionRules: false });
    expect(off.verify, 'elastic, --no-verify').toBe(false);
    expect(off.guard, 'elastic, --no-doubt-rule').toMatchObject({ doubt: false });
    const fixed = configOf({ directionRules: false });
    expect(fixed.verify, 'fixed, nothing said').toBe(false);
    expect(fixed.guard, 'fixed, nothing said').toMatchObject({ doubt: false });
    // Where one does not combine with the job's other settings, an elastic job runs without it unless it asks (and is
    // then refused).
    expect(
      elastic(undefined, { shares: { balance: 'speed', globalBatch: 96 } } as Partial<RunOptions>).guard,
      'elastic, --balance speed',
    ).toMatchObject({ doubt: false });
    const fp16 = elastic(undefined, { fp16: true });
    expect(fp16.verify, 'elastic, --fp16').toBe(false);
    expect(fp16.guard && 'doubt' in fp16.guard, 'elastic, --fp16: the doubt rule combines').toBe(false);
    // What the flags parse to: given, negated, or left to the job's kind.
    const flags = async (args: string[]) => {
      let seen: Record<string, unknown> = {};
      const cmd = runCommand().exitOverride();
      cmd.hook('preAction', (c) => void (seen = c.opts()));
      await cmd.parseAsync(['--np', '0', ...args], { from: 'user' }).catch(() => undefined);
      return [seen.verify, seen.doubtRule];
    };
    expect(await flags([])).toEqual([undefined, undefined]);
    expect(await flags(['--verify', '--doubt-rule'])).toEqual([true, true]);
    expect(await flags(['--no-verify', '--no-doubt-rule'])).toEqual([false, false]);
  });

  it('refuses --verify with a lossy or non-sum reduction, and --doubt-rule with speed shares, naming both flags', async () => {
    const cases: [string[], RegExp][] = [
      [['--verify', '--fp16'], /--verify checks that the sum is exact; --fp16 sends rounded gradients: drop one/],
      [
        ['--verify', '--compression', 'int8'],
        /--verify checks that the sum is exact; --compression int8 sends rounded gradients/,
      ],
      [['--verify', '--aggregation', 'median'], /--verify checks a sum; --aggregation median is not a sum/],
      [
        ['--doubt-rule', '--balance', 'speed'],
        /--doubt-rule measures every peer's gradient against the others' at equal weight; --balance speed gives peers uneven shares: drop one/,
      ],
    ];
    for (const [flags, message] of cases) {
      const run = parseRun(['--np', '3', '--steps', '1', ...flags]);
      await expect(run, flags.join(' ')).rejects.toThrow(message);
      await expect(run).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    }
  });
});
