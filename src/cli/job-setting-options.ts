/**
 * The command line's view of the job settings' table (src/job/fields.ts): the
 * `run` flags that write one job setting as it is, each made from its entry
 * (flag, help, allowed values, default), and the keys `server --hp` takes.
 * Flags that are a process's own (ports, paths) or that write a setting
 * under another shape (`--fp16`, `--backward-passes`) stay where they are.
 */
import { Option, type Command } from 'commander';
import { z } from 'zod';
import {
  FIELDS,
  JOB_SETTING_KEYS,
  SECTIONS,
  settingFromText,
  type Hyperparameters,
  type JobSettingKey,
} from '../job/settings.ts';

/** The job settings that `run` has a flag for: every entry of the table with a `flag`. */
export const FLAGGED_SETTINGS: readonly JobSettingKey[] = JOB_SETTING_KEYS.filter((k) => FIELDS[k].flag !== undefined);

/** The commander option of a job setting that has a `flag`. */
export function jobSettingOption(key: JobSettingKey): Option {
  const f: { flag?: string; help: string; schema: z.ZodType; default?: unknown } = FIELDS[key];
  if (!f.flag) throw new Error(`job setting '${key}' has no flag in src/job/fields.ts`);
  const option = new Option(f.flag, f.help);
  if (f.schema instanceof z.ZodEnum) option.choices(f.schema.options.map(String));
  // A `--no-x` flag defaults to on by itself; a switch is off unless given; a value keeps commander's text form.
  if (option.negate) return option;
  if (!option.required && !option.optional) return option.default(false);
  return f.default === undefined ? option : option.default(String(f.default));
}

/** Adds the flags of these job settings to `cmd`. */
export function addJobSettingOptions(cmd: Command, keys: readonly JobSettingKey[]): Command {
  for (const key of keys) cmd.addOption(jobSettingOption(key));
  return cmd;
}

/**
 * The job settings whose flags were given on the command line (not left at their defaults), under the
 * job's keys and typed as the job takes them: what a job built from these flags writes.
 */
export function givenJobSettings(cmd: Command, keys: readonly JobSettingKey[]): Hyperparameters {
  const out: Record<string, unknown> = {};
  for (const key of keys)
    if (cmd.getOptionValueSource(key) === 'cli') out[key] = settingFromText(key, String(cmd.getOptionValue(key)));
  return out as Hyperparameters;
}

/** The keys `--hp` takes, by section: `optimizer: lr, momentum, …; schedule: …`. */
export function hyperparameterKeysHelp(): string {
  return SECTIONS.map((s) => `${s}: ${JOB_SETTING_KEYS.filter((k) => FIELDS[k].section === s).join(', ')}`)
    .filter((line) => !line.endsWith(': '))
    .join('; ');
}
