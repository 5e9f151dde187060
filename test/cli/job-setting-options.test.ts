/**
 * The flags that write one job setting as it is are made from the settings'
 * table (src/job/fields.ts): their help, choices and defaults are the table's,
 * and `server --hp` lists every key the table has.
 */
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  addJobSettingOptions,
  givenJobSettings,
  hyperparameterKeysHelp,
  jobSettingOption,
} from '../../src/cli/job-setting-options.ts';
import { FIELDS, JOB_SETTING_KEYS } from '../../src/job/settings.ts';
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
