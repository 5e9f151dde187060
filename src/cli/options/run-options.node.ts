/**
 * `ringtrain run`'s own options, beyond those of `train`: their parsed form,
 * the model's recipe with its batch split over the peers, the elastic limits,
 * and the job the launcher's server hosts. Functions of the options alone, so
 * the option tests need no server and no worker.
 */
import { randomUUID } from 'node:crypto';
import { basename, resolve } from 'node:path';
import { DEFAULT_TEXT_CONTEXT } from '../../data/text.ts';
import type { Command } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { JobSpec } from '../../signaling/protocol.ts';
import type { Hyperparameters } from '../../job/settings.ts';
import { jobModelFields, type ModelChoice } from './model-option.ts';
import type { readTlsFiles } from './secrets.node.ts';
import type { iceFromFlags } from './ice-flags.node.ts';
import { type Recipe, withRecipe } from './recipes.ts';
import type { TrainOptions } from './train-options.ts';
import { wanHyperparameters, type WanOptions } from './wan-options.ts';
import { shareHyperparameters, type ShareOptions } from './share-options.ts';
import { aggregationHyperparameters, aggregationText } from './aggregation-option.ts';
import { refuseConflicts } from '../../job/conflicts.ts';
import type { Aggregation } from '../../collectives/robust/robust-aggregate.ts';

/** The job settings a run's job always carries (as it always has, so its record reads as before), with their values. */
type AlwaysWritten =
  'elastic' | 'scaleLr' | 'lrSchedule' | 'warmupSteps' | 'warmupFrom' | 'sampling' | 'backwardPassesPerStep';

/**
 * The job settings `run` writes beside train's options, the model and the data, under the job's keys: the flags made
 * from the settings' table (src/job/fields.ts) that were given a value other than the setting's default, the model's
 * recipe, and the settings every run's job carries. jobSpecFor writes them as they are.
 */
export type RunSettings = Hyperparameters & Required<Pick<Hyperparameters, AlwaysWritten>>;

export interface RunOptions extends TrainOptions {
  np: number;
  timeline?: string;
  port: number;
  host: string;
  servePage: boolean;
  extraPeers: number;
  /** --fp16, the older spelling of --compression fp16: refusals and the launch line name it as given. */
  fp16: boolean;
  /** The job's settings from run's flags and the recipe (--elastic, --verify, --no-overlap, --backward-passes, …). */
  settings: RunSettings;
  /** Elastic: the ring goes on while it has at least this many peers (Horovod's --min-np). */
  minNp?: number;
  /** Elastic: at most this many peers (Horovod's --max-np); default np + extra peers. */
  maxNp?: number;
  /** Elastic: seconds the ring trains on without its signaling server before it stops. */
  serverWait?: number;
  /** Elastic: a host-discovery script polled every `discoverIntervalMs` (discovery.node.ts). */
  discover?: string;
  discoverIntervalMs?: number;
  tls?: ReturnType<typeof readTlsFiles>;
  ice?: ReturnType<typeof iceFromFlags>;
  /** --compression and local SGD (absent: as --fp16 says). */
  wan?: WanOptions;
  /** --global-batch and --balance (share-options.ts). */
  shares?: ShareOptions;
  /** --aggregation (aggregation-option.ts; absent: the mean). */
  aggregation?: Aggregation;
  /** --link-tls: the workers encrypt their TCP links. */
  linkTls?: boolean;
  /** --model-options with --layers/--width/--heads merged in: every worker builds the model with them. */
  modelOptions?: Record<string, unknown>;
  /** --text: the text's SHA-256, which every worker's own copy must match. */
  textSha256?: string;
  /** --data FILE.csv|.npy|.json: the labels file (--labels) or the column that holds them (--label-column). */
  labels?: string;
  labelColumn?: string;
  /** --data as a table: its SHA-256 (and the labels file's), which every worker's own copies must match. */
  tableSha256?: string;
  labelsSha256?: string;
  /**
   * From code only (RunExtension): the command line of local worker `index`,
   * given the one the launcher would run (executable first); a program that
   * embeds the launcher may start some workers from its own entry.
   */
  workerCommand?: (index: number, command: string[]) => string[];
}

export function intOption(raw: unknown, flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}.`,
    );
  }
  return v;
}

/**
 * The model's recipe (recipes.ts) for every option left at its default, as
 * `train` applies it, with its batch split over the peers: the transformer's
 * 256 words per step become 256 / N per peer (rounded; --batch sets it).
 */
export function runRecipe(
  cmd: Command,
  given: Record<string, unknown>,
): { raw: Record<string, unknown>; recipe: Recipe | undefined } {
  const { raw, recipe } = withRecipe(cmd, given);
  if (!recipe) return { raw, recipe };
  const np = intOption(given.np, '-np', 1, 64);
  const defaulted = (key: string) => [undefined, 'default'].includes(cmd.getOptionValueSource(key));
  if (defaulted('batch')) raw.batch = String(Math.max(1, Math.round(Number(raw.batch) / np)));
  if (defaulted('warmupSteps')) raw.warmupSteps = String(recipe.warmupSteps);
  return { raw, recipe };
}

/** --min-np, --max-np and --server-wait: checked against -np, and only with --elastic. */
export function elasticOptions(raw: Record<string, unknown>): Pick<RunOptions, 'minNp' | 'maxNp' | 'serverWait'> {
  const given = (['minNp', 'maxNp', 'serverWait'] as const).filter((k) => raw[k] !== undefined);
  if (!raw.elastic) {
    if (given.length > 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `--${given[0].replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} only applies to an elastic run; add --elastic or drop it.`,
      );
    return {};
  }
  const np = intOption(raw.np, '-np', 1, 64);
  const extra = intOption(raw.extraPeers ?? 0, '--extra-peers', 0, 1000);
  const minNp = raw.minNp === undefined ? 1 : intOption(raw.minNp, '--min-np', 1, np);
  const maxNp = raw.maxNp === undefined ? np + extra : intOption(raw.maxNp, '--max-np', np, 1024);
  const serverWait = raw.serverWait === undefined ? undefined : intOption(raw.serverWait, '--server-wait', 0, 86_400);
  return { minNp, maxNp, serverWait };
}

/**
 * The settings that do not combine (src/job/conflicts.ts), refused naming the
 * flags as the user gave them.
 */
export function refuseFlagConflicts(o: RunOptions): void {
  const compression = o.wan?.compression ?? (o.fp16 ? 'fp16' : 'none');
  const settings = {
    verify: o.settings.verify,
    doubtRule: o.settings.doubtRule,
    aggregation: o.aggregation,
    compression,
    syncEvery: o.wan?.syncEvery,
    balance: o.shares?.balance,
  };
  refuseConflicts(settings, (setting) => {
    if (setting === 'verify') return '--verify';
    if (setting === 'aggregation') return `--aggregation ${aggregationText(o.aggregation)}`;
    if (setting === 'compression') return o.fp16 && compression === 'fp16' ? '--fp16' : `--compression ${compression}`;
    if (setting === 'syncEvery') return `--sync-every ${o.wan?.syncEvery}`;
    if (setting === 'doubtRule') return '--doubt-rule';
    return `--balance ${o.shares?.balance}`;
  });
}

export function jobSpecFor(o: RunOptions, model: ModelChoice = { model: o.model }): JobSpec {
  // A setting left at its default is not written (beyond those every run's job carries), so the job reads as before to
  // peers of any version; verify and the doubt rule have no default (on in an elastic job): they are written when given.
  const hyperparameters: Hyperparameters = {
    lr: o.lr,
    momentum: o.momentum,
    weightDecay: o.weightDecay,
    seed: o.seed,
    epochs: o.epochs,
    compression: o.fp16 ? 'fp16' : 'none',
    ...o.settings,
  };
  // What the launcher checked and spelled its own way (a top-k ratio, a rule, the shares) wins over the flag's text.
  if (o.wan) Object.assign(hyperparameters, wanHyperparameters(o.wan));
  if (o.shares) Object.assign(hyperparameters, shareHyperparameters(o.shares));
  // Conflicting flags were refused when `run` parsed them (refuseFlagConflicts), and the server's schema refuses the
  // job's.
  Object.assign(hyperparameters, aggregationHyperparameters(o.aggregation));
  if (o.steps !== undefined) hyperparameters.steps = o.steps;
  if (o.evalLimit !== undefined) hyperparameters.evalLimit = o.evalLimit;
  if (o.microBatch !== undefined) hyperparameters.microBatch = o.microBatch;
  // Every peer trains at the job's precision (src/distributed/train/mixed-precision.ts); f32 is not written.
  if (o.precision !== undefined && o.precision !== 'f32') hyperparameters.precision = o.precision;
  if (o.serverWait !== undefined) hyperparameters.serverWaitMs = o.serverWait * 1000;
  // An elastic job waits once for all -np workers (so an unbroken run is the same as a fixed one),
  // then goes on with as few as --min-np: a survivor of a crash carries the run to its end.
  const peers = o.settings.elastic
    ? { minPeers: o.minNp ?? 1, maxPeers: o.maxNp ?? o.np + o.extraPeers, startPeers: o.np }
    : { minPeers: o.np, maxPeers: o.np + o.extraPeers };
  Object.assign(hyperparameters, jobModelFields(model));
  if (o.modelOptions !== undefined) hyperparameters.modelOptions = JSON.stringify(o.modelOptions);
  if (o.text !== undefined) {
    // The text itself is no part of the job: every worker reads its own copy, which must hash the same
    // (a tab downloads the launcher's copy from the server, by this hash).
    hyperparameters.text = o.text.startsWith('@') ? o.text : basename(o.text);
    hyperparameters.textSha256 = o.textSha256 ?? '';
    hyperparameters.context = o.context ?? DEFAULT_TEXT_CONTEXT;
    // Written only when named: a job without it tokenizes as before (the text's characters, or bytes).
    if (o.tokenizer !== undefined) hyperparameters.tokenizer = o.tokenizer;
  }
  if (o.tableSha256 !== undefined && o.data !== undefined) {
    // Like the text: the rows never travel, only the names and hashes every worker's copies must match.
    hyperparameters.table = basename(o.data);
    hyperparameters.tableSha256 = o.tableSha256;
    if (o.labelColumn !== undefined) hyperparameters.labelColumn = o.labelColumn;
    if (o.labels !== undefined) {
      hyperparameters.labels = basename(o.labels);
      hyperparameters.labelsSha256 = o.labelsSha256 ?? '';
    }
  }
  return {
    id: `run-${randomUUID().slice(0, 8)}`,
    token: randomUUID().replaceAll('-', ''),
    // A model file travels as an absolute path: workers may start elsewhere.
    config: {
      model: model.identity ? resolve(o.model) : o.model,
      optimizer: o.optimizer,
      hyperparameters,
      batchPerPeer: o.batch,
      ...peers,
    },
  };
}
