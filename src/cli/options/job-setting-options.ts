/**
 * The command line's view of the job settings' table (src/job/fields.ts): the
 * flags that write one job setting, each made from its entry (flag, help,
 * allowed values, default, a `--no-` form, an older shorthand), and the keys
 * `server --hp` takes. `train` takes the entries marked `onTrain`, `run` every
 * one with a flag. Flags that are a process's own (ports, paths), or whose
 * default is not the table's (`--lr`: each optimizer's own), stay where they are.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { z } from 'zod';
import {
  FIELDS,
  JOB_SETTING_KEYS,
  SECTIONS,
  settingFromText,
  type Hyperparameters,
  type JobSettingKey,
} from '../../job/settings.ts';

/** The job settings that `run` has a flag for: every entry of the table with a `flag`. */
export const FLAGGED_SETTINGS: readonly JobSettingKey[] = JOB_SETTING_KEYS.filter((k) => FIELDS[k].flag !== undefined);
/** The job settings that `train` has a flag for too (`run` takes them as part of train's options). */
export const TRAIN_SETTINGS: readonly JobSettingKey[] = FLAGGED_SETTINGS.filter((k) => FIELDS[k].onTrain === true);
/** The job settings whose flag is `run`'s alone. */
export const RUN_SETTINGS: readonly JobSettingKey[] = FLAGGED_SETTINGS.filter((k) => !TRAIN_SETTINGS.includes(k));

// --compression's value is checked as commander reads it, as it always was: a kind this version does not know stops the
// parse. The other values are checked with the rest of their command's options, naming the flag.
const CHECKED_AS_READ: readonly JobSettingKey[] = ['compression'];

type FlagField = {
  flag?: string;
  help: string;
  flagHelp?: string;
  offFlagHelp?: string;
  shorthand?: { flag: string; value: string; help: string };
  allowed: string;
  schema: z.ZodType;
  default?: unknown;
};
const fieldOf = (key: JobSettingKey): FlagField => FIELDS[key];

/** The commander option of a job setting that has a `flag`. */
export function jobSettingOption(key: JobSettingKey): Option {
  const f = fieldOf(key);
  if (!f.flag) throw new Error(`job setting '${key}' has no flag in src/job/fields.ts`);
  const option = new Option(f.flag, f.flagHelp ?? f.help);
  if (f.schema instanceof z.ZodEnum) option.choices(f.schema.options.map(String));
  if (CHECKED_AS_READ.includes(key)) option.argParser((text) => checkedAsRead(f, text));
  // A `--no-x` flag defaults to on by itself; a three-way switch has no default (the job's kind decides); another
  // switch is off unless given; a value keeps commander's text form.
  if (option.negate || f.offFlagHelp !== undefined) return option;
  if (!option.required && !option.optional) return option.default(false);
  return f.default === undefined ? option : option.default(String(f.default));
}

/** A value the setting's schema refuses, refused as commander refuses a bad value (the text is kept as given). */
function checkedAsRead(f: FlagField, text: string): string {
  const parsed = f.schema.safeParse(text);
  if (parsed.success) return text;
  const reason = parsed.error.issues[0].message;
  throw new InvalidArgumentError(`${reason}; use ${f.allowed}`);
}

/**
 * The value of a job setting's flag (text, as commander gives it) checked by the setting's schema, read as the job
 * takes it: for a command's own zod schema of its options, so each bound is the table's and the refusal names the
 * flag and what it allows (`--seed must be a whole number from 0 to 2^32-1`).
 */
export function settingValue<K extends JobSettingKey>(key: K): z.ZodType<z.infer<(typeof FIELDS)[K]['schema']>> {
  const f = fieldOf(key);
  const flag = f.flag?.split(' ')[0] ?? key;
  return z.unknown().transform((v, ctx) => {
    const parsed = f.schema.safeParse(settingFromText(key, String(v)));
    if (parsed.success) return parsed.data as z.infer<(typeof FIELDS)[K]['schema']>;
    ctx.addIssue({ code: 'custom', message: `${flag} must be ${f.allowed}` });
    return z.NEVER;
  }) as unknown as z.ZodType<z.infer<(typeof FIELDS)[K]['schema']>>;
}

/** Every option a job setting's entry makes: its flag, its `--no-` form and its shorthand, where it has them. */
export function jobSettingOptions(key: JobSettingKey): Option[] {
  const f = fieldOf(key);
  const main = jobSettingOption(key);
  const off = f.offFlagHelp === undefined ? [] : [new Option(`--no-${main.long!.slice(2)}`, f.offFlagHelp)];
  const short = f.shorthand
    ? [
        new Option(f.shorthand.flag, f.shorthand.help)
          .default(false)
          .implies({ [main.attributeName()]: f.shorthand.value }),
      ]
    : [];
  return [main, ...off, ...short];
}

/** Adds the flags of these job settings to `cmd`. */
export function addJobSettingOptions(cmd: Command, keys: readonly JobSettingKey[]): Command {
  for (const key of keys) for (const option of jobSettingOptions(key)) cmd.addOption(option);
  return cmd;
}

/**
 * The job settings whose flags were typed on the command line with a value other than the setting's default, under
 * the job's keys and typed as the job takes them: what a job built from these flags writes (a default is what an
 * absent setting means already, so the job reads as before to peers of any version).
 */
export function givenJobSettings(cmd: Command, keys: readonly JobSettingKey[]): Hyperparameters {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const name = jobSettingOption(key).attributeName();
    if (cmd.getOptionValueSource(name) !== 'cli') continue;
    const value = settingFromText(key, String(cmd.getOptionValue(name)));
    if (value !== fieldOf(key).default) out[key] = value;
  }
  return out as Hyperparameters;
}

/** The keys `--hp` takes, by section: `optimizer: lr, momentum, …; schedule: …`. */
export function hyperparameterKeysHelp(): string {
  return SECTIONS.map((s) => `${s}: ${JOB_SETTING_KEYS.filter((k) => FIELDS[k].section === s).join(', ')}`)
    .filter((line) => !line.endsWith(': '))
    .join('; ');
}
