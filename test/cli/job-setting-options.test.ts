/**
 * The flags that write one job setting are made from the settings' table
 * (src/job/fields.ts): their help, choices and defaults are the table's, every
 * entry with a flag is in `run --help` (and in `train --help` where it is marked
 * for train), and `server --hp` lists every key the table has.
 */
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  addJobSettingOptions,
  FLAGGED_SETTINGS,
  givenJobSettings,
  hyperparameterKeysHelp,
  jobSettingOption,
  settingValue,
  TRAIN_SETTINGS,
} from '../../src/cli/options/job-setting-options.ts';
import { parseTrainOptions } from '../../src/cli/options/train-options.ts';
import { runCommand } from '../../src/cli/commands/run.ts';
import { trainCommand } from '../../src/cli/commands/train.ts';
import { FIELDS, JOB_SETTING_KEYS, type JobSettingKey } from '../../src/job/settings.ts';
import { settingRowsOf } from '../../src/job/describe.ts';

const parse = (argv: string[]) => {
  const cmd = addJobSettingOptions(new Command('x').exitOverride(), [
    'lrSchedule',
    'scaleLr',
    'warmupSteps',
    'overlap',
  ]);
  cmd.parse(argv, { from: 'user' });
  return cmd.opts();
};

describe('job setting flags from the schema', () => {
  it("takes each flag's help, choices and default from the setting's entry", () => {
    const schedule = jobSettingOption('lrSchedule');
    expect(schedule.flags).toBe(FIELDS.lrSchedule.flag);
    expect(schedule.description).toBe(FIELDS.lrSchedule.help);
    expect(schedule.argChoices).toEqual(['constant', 'cosine']);
    expect(parse([])).toEqual({ lrSchedule: 'constant', scaleLr: false, warmupSteps: '0', overlap: true });
    expect(parse(['--lr-schedule', 'cosine', '--scale-lr', '--warmup-steps', '7', '--no-overlap'])).toEqual({
      lrSchedule: 'cosine',
      scaleLr: true,
      warmupSteps: '7',
      overlap: false,
    });
    expect(() => parse(['--lr-schedule', 'linear'])).toThrow(/Allowed choices are constant, cosine/);
    expect(() => jobSettingOption('lr')).toThrow(/'lr' has no flag/);
  });

  it('reads the flags that were given as the job writes them, typed by their settings', () => {
    const keys = ['lrSchedule', 'scaleLr', 'warmupSteps', 'overlap'] as const;
    const cmd = addJobSettingOptions(new Command('x').exitOverride(), keys);
    cmd.parse(['--warmup-steps', '7', '--no-overlap'], { from: 'user' });
    expect(givenJobSettings(cmd, keys)).toEqual({ warmupSteps: 7, overlap: false });
  });

  it('makes a three-way switch with its --no- form, an older shorthand, and a flag named unlike its key', () => {
    const keys = ['verify', 'compression', 'backwardPassesPerStep', 'balance'] as const;
    const given = (argv: string[]) => {
      const cmd = addJobSettingOptions(new Command('x').exitOverride(), keys);
      cmd.parse(argv, { from: 'user' });
      return { opts: cmd.opts(), settings: givenJobSettings(cmd, keys) };
    };
    // Unsaid: no verify at all (the job's kind decides), the table's defaults for the rest, nothing written.
    expect(given([])).toEqual({
      opts: { compression: 'none', fp16: false, backwardPasses: '1', balance: 'equal' },
      settings: {},
    });
    expect(given(['--no-verify', '--backward-passes', '4']).settings).toEqual({
      verify: false,
      backwardPassesPerStep: 4,
    });
    expect(given(['--verify']).settings).toEqual({ verify: true });
    // --fp16 is --compression fp16 unless --compression is given; a value equal to the default writes nothing.
    expect(given(['--fp16']).opts).toMatchObject({ fp16: true, compression: 'fp16' });
    expect(given(['--fp16', '--compression', 'int8']).opts).toMatchObject({ fp16: true, compression: 'int8' });
    expect(given(['--compression', 'topk:0.1', '--balance', 'equal']).settings).toEqual({ compression: 'topk:0.1' });
    expect(() => given(['--compression', 'topk:2'])).toThrow(/top-k ratio .*; use 'none', 'fp16', 'int8' or 'topk:R'/);
  });

  it('puts every entry with a flag in run --help, and those marked for train in train --help, with their help', () => {
    const helpOf = (cmd: Command) => cmd.configureHelp({ helpWidth: 100_000 }).helpInformation();
    const lines = (help: string) => help.split('\n').map((l) => l.trim().replace(/\s{2,}/g, '  '));
    const has = (help: string, key: JobSettingKey) => {
      const f: { flag?: string; help: string; flagHelp?: string; offFlagHelp?: string } = FIELDS[key];
      const found = lines(help).some((l) => l.startsWith(`${f.flag}  ${f.flagHelp ?? f.help}`));
      const off = f.offFlagHelp === undefined || lines(help).some((l) => l.includes(f.offFlagHelp!));
      return found && off;
    };
    const run = helpOf(runCommand());
    const train = helpOf(trainCommand());
    expect(FLAGGED_SETTINGS.length).toBeGreaterThan(15);
    for (const key of FLAGGED_SETTINGS) expect(has(run, key), `run --help: ${key}`).toBe(true);
    expect(TRAIN_SETTINGS).toContain('lrSchedule');
    for (const key of TRAIN_SETTINGS) expect(has(train, key), `train --help: ${key}`).toBe(true);
    // A ring's settings are run's alone.
    expect(has(train, 'verify')).toBe(false);
    expect(run).toMatch(/--fp16 {2,}send gradients as float16/);
  });

  it("checks train's flags by their settings' schemas, reading them as the job does and naming the flag", () => {
    expect(settingValue('seed').parse('4294967295')).toBe(2 ** 32 - 1);
    expect(() => settingValue('seed').parse('4294967296')).toThrow(`--seed must be ${FIELDS.seed.allowed}`);
    expect(settingValue('momentum').parse('0')).toBe(0);
    expect(() => settingValue('momentum').parse('1')).toThrow(`--momentum must be ${FIELDS.momentum.allowed}`);
    const raw = { model: 'mlp', epochs: '2', batch: '8', optimizer: 'sgd', momentum: '0.5', seed: '3' };
    expect(parseTrainOptions({ ...raw, steps: '4', tokenizer: 'byte' })).toMatchObject({
      epochs: 2,
      momentum: 0.5,
      seed: 3,
      steps: 4,
      tokenizer: 'byte',
    });
    expect(() => parseTrainOptions({ ...raw, epochs: '1.5' })).toThrow(
      /^--epochs must be a whole number >= 1 \(got "1\.5"\)/,
    );
    expect(() => parseTrainOptions({ ...raw, evalLimit: '0' })).toThrow(/^--eval-limit must be a whole number/);
  });

  it('lists every key for --hp, and describes a given setting with its help and unit', () => {
    const help = hyperparameterKeysHelp();
    for (const key of JOB_SETTING_KEYS) expect(help).toMatch(new RegExp(`\\b${key}\\b`));
    expect(help).toMatch(/^model: /);
    expect(settingRowsOf({ globalBatch: 64, someday: 1 })).toEqual([
      { key: 'globalBatch', name: 'global batch', value: '64', help: FIELDS.globalBatch.help, unit: 'examples' },
      { key: 'someday', name: 'someday', value: '1' },
    ]);
  });
});
