/**
 * A job's settings, checked and parsed. The server checks a job's flat
 * `hyperparameters` against the schema made from fields.ts when the job is
 * added (`checkHyperparameters`: the keys as given, nothing added, so GET
 * /api/jobs and the page list them as they were written), and every peer
 * parses the job it joins once, into a typed, sectioned `JobSettings` with the
 * defaults applied (`parseJobSettings`), which each part of it reads from.
 *
 * Unknown keys are refused, at both ends. Nothing sends one legitimately: the
 * CLI's builders (`run`, `launch`, `server --job/--hp`) write only keys listed
 * in fields.ts, and a key a peer does not know is a setting it cannot honour: an older
 * peer that ignored a newer job's setting would train unlike the rest of the
 * ring, which is worse than refusing with "update ringtrain". A misspelled key
 * (`--hp warmupStep=100`) would otherwise be dropped without a word, so the
 * refusal names the nearest known key. Messages say "job hyperparameter", the
 * name users know from the config's key and `--hp`.
 */
import { z } from 'zod';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { parseAggregation } from './setting-text.ts';
import { FIELDS, JOB_SETTING_KEYS, SECTIONS, type JobSettingKey, type Section } from './fields.ts';
import { nearestSettingKey, shown } from './setting-names.ts';
import { configSettingName, settingConflict, type ConflictSettings, type Setting } from './conflicts.ts';

// What readers of a job's settings need, from one module.
export { FIELDS, JOB_SETTING_KEYS, SECTIONS, type JobSettingKey, type Section };
export { nearestSettingKey, settingFromText } from './setting-names.ts';

/** Whether a text setting parses by `check` (which throws on a bad one). */
const parsesBy = (check: (s: string) => unknown) => (s: string) => {
  try {
    check(s);
    return true;
  } catch {
    return false;
  }
};

/** The settings a conflict is judged on (src/job/conflicts.ts), as a job's keys carry them. */
function conflictSettingsOf(s: Partial<Record<JobSettingKey, unknown>>): ConflictSettings {
  // Runs on a valid shape only, but a rule that does not parse is its field's error, not a conflict.
  const text = typeof s.aggregation === 'string' ? s.aggregation : undefined;
  const aggregation = text === undefined || !parsesBy(parseAggregation)(text) ? undefined : parseAggregation(text);
  return {
    verify: s.verify as boolean | undefined,
    doubtRule: s.doubtRule as boolean | undefined,
    aggregation: aggregation?.rule === 'mean' ? undefined : aggregation,
    compression: s.compression as string | undefined,
    syncEvery: s.syncEvery as number | undefined,
    balance: s.balance as string | undefined,
  };
}

/**
 * Whether a job runs a step check that elastic jobs run by default: as the job says, or, when
 * it says nothing, on in an elastic job where it combines with the job's other settings.
 *
 * - `doubtRule` (src/distributed/robust/doubt.ts) names a sign-flipped peer, which passes every other
 *   default check and diverges the job;
 * - `verify` (the verified allreduce) names a peer that publishes honest checks and sends
 *   other numbers into the ring, which otherwise stops the job with nobody named.
 *
 * An elastic job admits peers as they come (browser tabs, volunteers, `npm start`'s extra
 * places) and goes on without one it ejects, so either attack costs it one peer instead of the
 * run. What they cost honest jobs, in time and in false alarms, is measured in
 * docs/ROBUSTNESS.md. A fixed job is one whose peers its owner starts; it stops at any naming,
 * so it keeps asking. Off where it does not combine: speed shares (a peer with three times the
 * examples reads as a doubtful outlier), lossy compression or a robust aggregation (verify
 * checks an exact sum).
 */
export function stepCheckOn(s: Hyperparameters, check: StepCheck): boolean {
  const said = s[check];
  if (said !== undefined) return said;
  return (s.elastic ?? FIELDS.elastic.default) && combines(s, check);
}

/** The step checks that jobs open to outsiders run unless they say otherwise (stepCheckOn, withOutsiderChecks). */
export type StepCheck = 'verify' | 'doubtRule';

/**
 * A job served by `ringtrain server` is joined by whoever holds its token (workers started
 * anywhere, browser tabs): its builder writes the step checks on, where the job says nothing and
 * they combine with its settings, elastic or not. A fixed job still stops at a naming, but then
 * with the peer named and a clean recovery checkpoint, where a flipped or lying peer would
 * otherwise diverge it with nobody named (docs/ROBUSTNESS.md).
 */
export function withOutsiderChecks(s: Hyperparameters): Hyperparameters {
  const out = { ...s };
  for (const check of ['verify', 'doubtRule'] as const)
    if (out[check] === undefined && combines(out, check)) out[check] = true;
  return out;
}

function combines(s: Hyperparameters, check: StepCheck): boolean {
  return settingConflict({ ...conflictSettingsOf(s), [check]: true }) === undefined;
}

const shape = Object.fromEntries(Object.entries(FIELDS).map(([k, f]) => [k, f.schema.optional()])) as {
  [K in JobSettingKey]: z.ZodOptional<(typeof FIELDS)[K]['schema']>;
};

/** The flat hyperparameters' schema: every key optional, none other allowed, and the pairs that do not combine refused. */
export const hyperparametersSchema = z.strictObject(shape).superRefine((s, ctx) => {
  const settings = conflictSettingsOf(s);
  const c = settingConflict(settings);
  if (c) {
    // Named as the job's config spells them (configSettingName names the library's fields).
    const name = (k: Setting) =>
      k === 'aggregation'
        ? `aggregation '${s.aggregation}'`
        : k === 'doubtRule'
          ? 'doubtRule: true'
          : configSettingName(settings)(k);
    ctx.addIssue({
      code: 'custom',
      path: [c.first],
      message: `${name(c.first)} ${c.firstDoes}; ${name(c.second)} ${c.secondDoes}: drop one.`,
      params: { fields: [c.first, c.second] },
    });
  }
  // Speed shares split a fixed global batch at every step.
  if (s.balance === 'speed' && (s.globalBatch === undefined || s.syncEvery !== undefined)) {
    ctx.addIssue({
      code: 'custom',
      path: ['balance'],
      message:
        "'balance: speed' shares a fixed global batch in synchronous training: give the job a 'globalBatch' and no 'syncEvery'",
      params: { fields: ['balance', s.globalBatch === undefined ? 'globalBatch' : 'syncEvery'] },
    });
  }
});

/** A job's `hyperparameters` as the wire and the records carry them (flat keys, none defaulted), checked. */
export type Hyperparameters = z.infer<typeof hyperparametersSchema>;

type Fields = typeof FIELDS;
/** A setting once parsed: its schema's value, or undefined where an absent one has no default. */
type Parsed<K extends JobSettingKey> =
  z.infer<Fields[K]['schema']> | ([Fields[K]['default']] extends [undefined] ? undefined : never);

/**
 * A job's settings, parsed: one sub-object per section (fields.ts), under the flat keys' names,
 * each default applied. The step checks `verify` and `doubtRule` hold what the job runs (stepCheckOn).
 */
export type JobSettings = {
  [S in Section]: { [K in JobSettingKey as Fields[K]['section'] extends S ? K : never]: Parsed<K> };
} & { checks: { verify: boolean; doubtRule: boolean } };

/**
 * A job's `hyperparameters`, checked against the schema, as given. Throws an InvalidArgument
 * RingtrainError naming the setting, the value and what is allowed (detail.field,
 * detail.fields for a pair that does not combine, detail.value).
 */
export function checkHyperparameters(raw: unknown): Hyperparameters {
  const parsed = hyperparametersSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0];
    const near = nearestSettingKey(key);
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `unknown job hyperparameter ${shown(key)}${near ? `; did you mean '${near}'?` : ''} (known: ${JOB_SETTING_KEYS.join(', ')}); a peer that does not know a setting cannot honour it: fix the job, or update ringtrain`,
      { field: key, fields: issue.keys, nearest: near },
    );
  }
  if (issue.path.length === 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `a job's hyperparameters must be an object of key: value, got ${shown(raw)}`,
      { value: raw },
    );
  }
  const field = String(issue.path[0]);
  const value = (raw as Record<string, unknown>)[field];
  if (issue.code === 'custom' && issue.params?.fields) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameters do not combine: ${issue.message}`, {
      field,
      fields: issue.params.fields,
    });
  }
  const allowed = FIELDS[field as JobSettingKey]?.allowed ?? issue.message;
  const reason = issue.code === 'custom' && typeof issue.params?.reason === 'string' ? `: ${issue.params.reason}` : '';
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `job hyperparameter '${field}' must be ${allowed}, got ${shown(value)}${reason}`,
    { field, value },
  );
}

/**
 * A job's settings, parsed once: checked as `checkHyperparameters` does (the same refusals),
 * then grouped by section with every absent setting's default (fields.ts) applied.
 */
export function parseJobSettings(raw: unknown): JobSettings {
  const h = checkHyperparameters(raw);
  const out = Object.fromEntries(SECTIONS.map((s) => [s, {} as Record<string, unknown>]));
  for (const key of JOB_SETTING_KEYS) {
    const f: { section: Section; default?: unknown } = FIELDS[key];
    out[f.section][key] = h[key] ?? f.default;
  }
  out.checks.verify = stepCheckOn(h, 'verify');
  out.checks.doubtRule = stepCheckOn(h, 'doubtRule');
  return out as JobSettings;
}
