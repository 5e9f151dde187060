/**
 * The optimizer registry: each optimizer is one file here that calls `defineOptimizer` with what it is
 * (its name, its state buffers, its settings with their defaults and bounds, the shader that applies
 * it and the uniform that shader reads), and the rest of ringtrain reads this list: the engine's one
 * generic runner (src/engine/optimizer.ts) binds the buffers to the shader, the CLI's `--optimizer`
 * and its defaults, the peers' job check and the checkpoints' `optim/<state>` tensors.
 *
 * No GPU here: the server and the job's settings import the registry to check a job, and may not
 * import src/gpu. The shader is named, not loaded.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/** A setting's value: a number, or a pair (AdamW's betas). */
export type SettingValue = number | readonly [number, number];

export interface OptimizerSetting {
  /** The value when the caller gives none; a pair's default makes the setting a pair. */
  default: SettingValue;
  /** Inclusive bounds of the value (of each element of a pair). */
  min: number;
  max: number;
  /** What it does, for --help and the docs. */
  help: string;
}

/** Each setting's value, typed by its default: a pair where the default is one, a number otherwise. */
export type SettingsOf<S extends Readonly<Record<string, OptimizerSetting>>> = string extends keyof S
  ? ResolvedSettings
  : { readonly [K in keyof S]: S[K]['default'] extends readonly [number, number] ? readonly [number, number] : number };

type Settings = Readonly<Record<string, OptimizerSetting>>;

export interface OptimizerDefinition<S extends Settings = Settings> {
  /** `--optimizer NAME`, a job's optimizer, a checkpoint's `optimizer` metadata. */
  name: string;
  /** The class name users write (`optim.AdamW`), for messages. */
  className: string;
  /** One line on what it is, for --help. */
  summary: string;
  /**
   * `shaders/<shader>.wgsl`, entry point `main`: binding 0 the uniform, 1 the parameters, 2 the
   * gradients (read only), 3… the state buffers in `state`'s order, each bound over the same words;
   * the length comes from `arrayLength(&grad)`.
   */
  shader: string;
  /** The state buffers, each as long as the parameters: the checkpoint's `optim/<name>` tensors. */
  state: readonly string[];
  /** The settings by name; `lr` and `weightDecay` are required of every optimizer (schedules and flags set them). */
  settings: S;
  /** The f32 fields of the shader's uniform, in its struct's order, for these settings at step `step` (1-based). */
  uniform(settings: SettingsOf<S>, step: number): number[];
  /** The learning rate `ringtrain train` takes when --lr is absent (tuned on its workloads); default settings.lr's. */
  commandLineLr?: number;
}

/** Every setting of one optimizer with its value: what `optimizer.spec` holds beside the kind. */
export type ResolvedSettings = Record<string, SettingValue>;

const definitions = new Map<string, OptimizerDefinition>();

const NAME = /^[a-z][a-z0-9-]*$/;

/** Registers an optimizer (its file's one statement); a second definition under one name is refused. */
export function defineOptimizer<const S extends Settings>(typed: OptimizerDefinition<S>): OptimizerDefinition {
  // Stored untyped: the runner hands `uniform` the settings resolveSettings made from these same definitions.
  const definition = typed as unknown as OptimizerDefinition;
  const { name, settings } = definition;
  const bad = (what: string) =>
    new RingtrainError(ErrorCode.InvalidArgument, `defineOptimizer('${name}'): ${what}`, { optimizer: name });
  if (!NAME.test(name)) throw bad('the name must be lower-case letters, digits and dashes');
  if (definitions.has(name) && definitions.get(name) !== definition)
    throw bad('an optimizer of this name is already defined; give this one another name');
  for (const required of ['lr', 'weightDecay'])
    if (!settings[required]) throw bad(`every optimizer takes '${required}' (schedules and --${required} set it)`);
  for (const [key, s] of Object.entries(settings)) checkSettingValue(name, key, s.default, s);
  definitions.set(name, definition);
  return definition;
}

/** The definition registered under `name`, or undefined. */
export function optimizerNamed(name: string): OptimizerDefinition | undefined {
  return definitions.get(name);
}

/** The registered optimizers' names, in the order they were defined. */
export function optimizerNames(): string[] {
  return [...definitions.keys()];
}

/** The definition named, or an error that lists the known names (`what` names the asker). */
export function requireOptimizer(name: unknown, what: string): OptimizerDefinition {
  const found = typeof name === 'string' ? definitions.get(name) : undefined;
  if (!found)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: unknown optimizer ${JSON.stringify(name)}; use one of ${optimizerNames().join(', ')}`,
      { optimizer: name },
    );
  return found;
}

function checkSettingValue(optimizer: string, key: string, v: unknown, s: OptimizerSetting): void {
  const pair = Array.isArray(s.default);
  const values = pair ? (Array.isArray(v) && v.length === 2 ? v : [NaN]) : [v];
  const ok = values.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= s.min && x <= s.max);
  if (!ok)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `optimizer ${optimizer}: ${key} must be ${pair ? 'a pair of numbers, each' : 'a number'} in [${s.min}, ${s.max}], got ${JSON.stringify(v) ?? String(v)}`,
      { [key]: v },
    );
}

/**
 * Every setting of `definition` with its value: the caller's where given (checked against the
 * setting's bounds), its default otherwise. A key the optimizer does not read is refused, naming
 * the ones it does (`momentum` given to AdamW would otherwise do nothing, silently).
 */
export function resolveSettings(
  definition: OptimizerDefinition,
  given: Readonly<Record<string, unknown>>,
  what: string,
): ResolvedSettings {
  const known = Object.keys(definition.settings);
  const unknown = Object.keys(given).filter((k) => given[k] !== undefined && !known.includes(k));
  if (unknown.length > 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what} takes ${known.join(', ')}; it does not read ${unknown.join(', ')}`,
      { unknown },
    );
  const out: ResolvedSettings = {};
  for (const [key, s] of Object.entries(definition.settings)) {
    const v = given[key] ?? s.default;
    checkSettingValue(definition.name, key, v, s);
    out[key] = Array.isArray(v) ? ([v[0], v[1]] as const) : (v as number);
  }
  return out;
}

/** Only the keys of `given` that the optimizer reads (the CLI hands every optimizer its --momentum). */
export function settingsItReads(
  definition: OptimizerDefinition,
  given: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  return Object.fromEntries(Object.entries(given).filter(([k, v]) => v !== undefined && k in definition.settings));
}
