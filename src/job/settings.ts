/**
 * Every setting a job's `hyperparameters` can carry, in one strict schema: its
 * type, its range and (in JOB_SETTING_DEFAULTS) what an absent one means. The
 * server checks a job against it when the job is added, and every peer reads
 * the job it joins through it, so a setting is spelled, bounded and defaulted
 * here and nowhere else.
 *
 * It lives in src/job, a leaf that the server, the page and the peers all
 * import (docs/ARCHITECTURE.md).
 *
 * Unknown keys are refused, at both ends. Nothing sends one legitimately: the
 * CLI's builders (`run`, `launch`, `server --job/--hp`) write only keys listed
 * here, and a key a peer does not know is a setting it cannot honour: an older
 * peer that ignored a newer job's setting would train unlike the rest of the
 * ring, which is worse than refusing with "update ringtrain". A misspelled key
 * (`--hp warmupStep=100`) would otherwise be dropped without a word, so the
 * refusal names the nearest known key. Messages say "job hyperparameter", the
 * name users know from the config's key and `--hp`.
 *
 * Parsing applies no defaults and transforms nothing: a job's settings are
 * listed (GET /api/jobs, the page) as they were given, and parse(x) is x.
 */
import { z } from 'zod';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { AGGREGATION_FORMS, parseAggregation, topkRatio } from './setting-text.ts';
import { configSettingName, settingConflict, type ConflictSettings, type Setting } from './conflicts.ts';

/** The longest text a setting may hold (the wire's limit on a string value). */
const MAX_TEXT = 256;

const finite = z.number().finite();
const int = z.number().int();
const text = z.string().max(MAX_TEXT);

/** Whether a text setting parses by `check` (which throws on a bad one). */
const parsesBy = (check: (s: string) => unknown) => (s: string) => {
  try {
    check(s);
    return true;
  } catch {
    return false;
  }
};

/** Text that `check` accepts; a refusal carries check's own words on what is wrong (a top-k ratio out of range...). */
const textParsedBy = (ok: (s: string) => boolean, check: (s: string) => unknown) =>
  text.superRefine((s, ctx) => {
    if (ok(s)) return;
    try {
      check(s);
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: (e as Error).message, params: { reason: (e as Error).message } });
    }
  });

function isJsonObjectText(s: string): boolean {
  try {
    const v: unknown = JSON.parse(s);
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

/** Each setting: its schema and, for messages, what it allows in words. */
const FIELDS = {
  // The optimizer.
  lr: { schema: finite.gt(0), allowed: 'a finite number > 0 (the learning rate)' },
  momentum: { schema: finite.min(0).lt(1), allowed: 'a number in [0, 1)' },
  weightDecay: { schema: finite.min(0), allowed: 'a finite number >= 0' },
  scaleLr: { schema: z.boolean(), allowed: 'true or false' },
  lrSchedule: { schema: z.enum(['constant', 'cosine']), allowed: "'constant' or 'cosine'" },
  warmupSteps: { schema: int.min(0), allowed: 'a whole number of steps >= 0' },
  warmupFrom: { schema: z.enum(['base', 'zero']), allowed: "'base' or 'zero'" },
  backwardPassesPerStep: { schema: int.min(1), allowed: 'a whole number >= 1' },
  // How long, and on what.
  seed: { schema: int.min(0).max(2 ** 32 - 1), allowed: 'a whole number from 0 to 2^32-1' },
  epochs: { schema: int.min(1), allowed: 'a whole number >= 1' },
  steps: { schema: int.min(1), allowed: 'a whole number of steps >= 1' },
  sampling: { schema: z.enum(['epochs', 'replacement']), allowed: "'epochs' or 'replacement'" },
  evalLimit: { schema: int.min(1), allowed: 'a whole number of examples >= 1' },
  globalBatch: { schema: int.min(1), allowed: 'a whole number >= 1 (examples per step for the whole ring)' },
  balance: { schema: z.enum(['equal', 'speed']), allowed: "'equal' or 'speed'" },
  // The wire and the ring.
  compression: {
    schema: textParsedBy(
      (c) => c === 'none' || c === 'fp16' || c === 'int8',
      (c) => {
        if (topkRatio(c) === null) throw new Error(`unknown compression '${c}'`);
      },
    ),
    allowed: "'none', 'fp16', 'int8' or 'topk:R' (0 < R <= 1)",
  },
  fusionThresholdBytes: { schema: int.min(0), allowed: 'a whole number of bytes >= 0' },
  // Whether a step reduces its gradient bucket by bucket as backward finishes them (src/distributed/reduce/overlap-plan.ts).
  overlap: { schema: z.boolean(), allowed: 'true or false' },
  timeoutMs: { schema: finite.gt(0), allowed: 'a number of milliseconds > 0' },
  ringOrder: { schema: z.enum(['rtt']), allowed: "'rtt'" },
  aggregation: { schema: textParsedBy(() => false, parseAggregation), allowed: AGGREGATION_FORMS },
  verify: { schema: z.boolean(), allowed: 'true or false' },
  directionRules: { schema: z.boolean(), allowed: 'true or false' },
  doubtRule: { schema: z.boolean(), allowed: 'true or false' },
  // Local SGD / DiLoCo.
  syncEvery: { schema: int.min(1), allowed: 'a whole number of steps >= 1' },
  outerLr: { schema: finite.gt(0), allowed: 'a finite number > 0' },
  outerMomentum: { schema: finite.min(0).lt(1), allowed: 'a number in [0, 1)' },
  // Membership and its clocks (the session).
  elastic: { schema: z.boolean(), allowed: 'true or false' },
  serverWaitMs: { schema: int.min(0), allowed: 'a whole number of milliseconds >= 0' },
  peerTimeoutMs: { schema: finite.gt(0), allowed: 'a number of milliseconds > 0' },
  connectTimeoutMs: { schema: finite.min(1000), allowed: 'a number of milliseconds >= 1000' },
  silentPeerMs: { schema: finite.min(1000), allowed: 'a number of milliseconds >= 1000' },
  // The model.
  modelOptions: { schema: text.refine(isJsonObjectText), allowed: 'a JSON object in a string' },
  modelName: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  modelLayoutHash: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  // A text data set (run --text).
  text: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  textSha256: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  context: { schema: int.min(2), allowed: 'a whole number >= 2' },
  // The text's tokenizer (src/data/tokenizer.ts TOKENIZER_NAMES; absent: its characters, or bytes).
  tokenizer: { schema: z.enum(['char', 'byte', 'gpt2']), allowed: "'char', 'byte' or 'gpt2'" },
  // A table of rows (run --data FILE.csv|.npy|.json): its name and hash, and where its labels are.
  table: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  tableSha256: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  labelColumn: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  labels: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  labelsSha256: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
  // launch --tabs: the arguments the page's recipe runs with.
  args: { schema: text, allowed: `text of at most ${MAX_TEXT} characters` },
} as const;

export type JobSettingKey = keyof typeof FIELDS;
export const JOB_SETTING_KEYS = Object.keys(FIELDS) as JobSettingKey[];

/** What an absent setting means, where the readers agree on one value. */
export const JOB_SETTING_DEFAULTS = {
  momentum: 0.9,
  weightDecay: 0,
  seed: 1,
  epochs: 1,
  compression: 'none',
  backwardPassesPerStep: 1,
  scaleLr: false,
  lrSchedule: 'constant',
  warmupSteps: 0,
  warmupFrom: 'base',
  sampling: 'epochs',
  balance: 'equal',
  elastic: false,
  directionRules: false,
  aggregation: 'mean',
  overlap: true,
} as const satisfies Partial<Record<JobSettingKey, unknown>>;

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
 * - `doubtRule` (src/distributed/doubt.ts) names a sign-flipped peer, which passes every other
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
export function stepCheckOn(s: JobSettings, check: StepCheck): boolean {
  const said = s[check];
  if (said !== undefined) return said;
  return (s.elastic ?? JOB_SETTING_DEFAULTS.elastic) && combines(s, check);
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
export function withOutsiderChecks(s: JobSettings): JobSettings {
  const out = { ...s };
  for (const check of ['verify', 'doubtRule'] as const)
    if (out[check] === undefined && combines(out, check)) out[check] = true;
  return out;
}

function combines(s: JobSettings, check: StepCheck): boolean {
  return settingConflict({ ...conflictSettingsOf(s), [check]: true }) === undefined;
}

const shape = Object.fromEntries(Object.entries(FIELDS).map(([k, f]) => [k, f.schema.optional()])) as {
  [K in JobSettingKey]: z.ZodOptional<(typeof FIELDS)[K]['schema']>;
};

/** The job settings' schema: every key optional, none other allowed, and the pairs that do not combine refused. */
export const jobSettingsSchema = z.strictObject(shape).superRefine((s, ctx) => {
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

/** A job's settings, checked. */
export type JobSettings = z.infer<typeof jobSettingsSchema>;

/**
 * A setting given as text (`server --hp key=value`) as the value its key takes:
 * 'true'/'false' and numbers become a boolean and a number only where the key
 * takes one, so a text setting that looks like a number (a model name, a hash)
 * stays text. An unknown key gets the old reading; the job's check refuses it.
 */
export function settingFromText(key: string, text: string): number | string | boolean {
  const n = Number(text);
  const candidates = [
    text === 'true' ? true : text === 'false' ? false : undefined,
    text.trim() !== '' && Number.isFinite(n) ? n : undefined,
    text,
  ].filter((v) => v !== undefined);
  if (!Object.hasOwn(FIELDS, key)) return candidates[0];
  const { schema } = FIELDS[key as JobSettingKey];
  return candidates.find((v) => schema.safeParse(v).success) ?? candidates[0];
}

/** Edits (insert, delete, replace) between a and b, case-insensitive. */
function editDistance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}

/** The known key nearest `key`, if one is close enough to be a slip (a third of its letters at most). */
export function nearestSettingKey(key: string): JobSettingKey | undefined {
  let best: JobSettingKey | undefined;
  let bestD = Infinity;
  for (const k of JOB_SETTING_KEYS) {
    const d = editDistance(key, k);
    if (d < bestD) [best, bestD] = [k, d];
  }
  return bestD <= Math.max(1, Math.floor(key.length / 3)) ? best : undefined;
}

/** Text from outside shown in a message: bounded, no control characters. */
function shown(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  const clean = s.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length > 80 ? `${clean.slice(0, 80)}…` : clean;
}

/**
 * A job's `hyperparameters`, checked against the schema. Throws an InvalidArgument
 * RingtrainError naming the setting, the value and what is allowed (detail.field,
 * detail.fields for a pair that does not combine, detail.value).
 */
export function parseJobSettings(raw: unknown): JobSettings {
  const parsed = jobSettingsSchema.safeParse(raw);
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
