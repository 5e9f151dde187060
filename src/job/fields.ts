/**
 * Every setting a job's `hyperparameters` can carry, one entry each: the
 * section of `JobSettings` it lives in, its schema, what it allows in words
 * (for messages), a line of help, its unit, and what an absent one means
 * (`default`). This table is the one place a setting is spelled, bounded and
 * defaulted; settings.ts parses a job through it, the CLI's `--hp` list and
 * the page's settings table are read from it.
 *
 * The wire keeps the flat keys (`{ lr, overlap, … }`): jobs files, GET
 * /api/jobs, checkpoints and job records are written with them. The sections
 * only group them once parsed, under the same names (`settings.reduce.overlap`).
 *
 * A new setting is one entry here plus the code that reads it.
 */
import { z } from 'zod';
import { AGGREGATION_FORMS, parseAggregation, topkRatio } from './setting-text.ts';

/** The longest text a setting may hold (the wire's limit on a string value). */
export const MAX_TEXT = 256;

const finite = z.number().finite();
const int = z.number().int();
const text = z.string().max(MAX_TEXT);

/** Text that `ok` accepts, else a refusal that carries `check`'s own words on what is wrong (a top-k ratio out of range...). */
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

/** The sections of `JobSettings`, each the sub-object one part of a peer takes. */
export const SECTIONS = ['model', 'data', 'optimizer', 'schedule', 'reduce', 'checks', 'membership', 'links'] as const;
export type Section = (typeof SECTIONS)[number];

export interface Field<S extends z.ZodType = z.ZodType> {
  section: Section;
  schema: S;
  /** What the setting allows, in words: "job hyperparameter 'lr' must be <allowed>". */
  allowed: string;
  /** One line on what it does (`server --hp`'s list, the page's table). */
  help: string;
  /** The unit a number counts in, for a table's column. */
  unit?: string;
  /**
   * `ringtrain run`'s flag that writes the setting as it is (commander's spelling: `--warmup-steps <n>`,
   * `--no-overlap` for one that is on unless turned off), where there is one: the flag is made from this entry.
   */
  flag?: string;
  /** The flag's help where the command line says more than `help` (how it goes with other flags). */
  flagHelp?: string;
  /**
   * A switch with no default of its own (the job's kind decides: stepCheckOn): the help of its `--no-` form. The flag is
   * then three-way: on, off, or unsaid.
   */
  offFlagHelp?: string;
  /** An older switch that sets the setting to one value (`--fp16` for `compression: 'fp16'`); a value flag given too wins. */
  shorthand?: { flag: string; value: string; help: string };
  /** `ringtrain train` takes the flag too (a setting one process trains by); otherwise it is `run`'s alone. */
  onTrain?: boolean;
  /** What an absent setting means, where every reader agrees on one value. */
  default?: z.infer<S>;
}

/** A field, typed by its schema (so `default` must be a value the schema takes). */
const field = <S extends z.ZodType, const Sec extends Section, const D extends z.infer<S> | undefined = undefined>(
  f: Omit<Field<S>, 'section' | 'default'> & { section: Sec; default?: D },
) => f as Omit<Field<S>, 'section' | 'default'> & { section: Sec; default: D };

const TEXT = `text of at most ${MAX_TEXT} characters`;
const bool = z.boolean();
const BOOL = 'true or false';

export const FIELDS = {
  // The optimizer.
  lr: field({
    section: 'optimizer',
    schema: finite.gt(0),
    allowed: 'a finite number > 0 (the learning rate)',
    help: 'the learning rate',
  }),
  momentum: field({
    section: 'optimizer',
    schema: finite.min(0).lt(1),
    allowed: 'a number in [0, 1)',
    help: "SGD's momentum",
    default: 0.9,
    flag: '--momentum <x>',
    onTrain: true,
  }),
  weightDecay: field({
    section: 'optimizer',
    schema: finite.min(0),
    allowed: 'a finite number >= 0',
    help: 'decoupled weight decay',
    default: 0,
  }),
  scaleLr: field({
    section: 'optimizer',
    schema: bool,
    allowed: BOOL,
    help: 'scale the learning rate by the number of peers (with --warmup-steps)',
    flag: '--scale-lr',
    default: false,
  }),
  outerLr: field({
    section: 'optimizer',
    schema: finite.gt(0),
    allowed: 'a finite number > 0',
    help: "local SGD / DiLoCo: the outer step's learning rate",
  }),
  outerMomentum: field({
    section: 'optimizer',
    schema: finite.min(0).lt(1),
    allowed: 'a number in [0, 1)',
    help: "local SGD / DiLoCo: the outer step's Nesterov momentum",
  }),
  // How long, and how much per step.
  lrSchedule: field({
    section: 'schedule',
    schema: z.enum(['constant', 'cosine']),
    allowed: "'constant' or 'cosine'",
    help: 'constant, or cosine: anneal the learning rate to zero by the last step',
    flag: '--lr-schedule <kind>',
    default: 'constant',
    onTrain: true,
  }),
  warmupSteps: field({
    section: 'schedule',
    schema: int.min(0),
    allowed: 'a whole number of steps >= 0',
    help: 'steps of linear learning-rate warm-up when --scale-lr',
    flag: '--warmup-steps <n>',
    unit: 'steps',
    default: 0,
  }),
  warmupFrom: field({
    section: 'schedule',
    schema: z.enum(['base', 'zero']),
    allowed: "'base' or 'zero'",
    help: 'where the warm-up starts',
    default: 'base',
  }),
  backwardPassesPerStep: field({
    section: 'schedule',
    schema: int.min(1),
    allowed: 'a whole number >= 1',
    // Not microBatch: these passes are loop steps of their own, summed by the reducer on the CPU (docs/KERNELS.md, Micro-batches).
    help: 'backward passes, each on its own batch, summed before each allreduce',
    default: 1,
    flag: '--backward-passes <n>',
    flagHelp: 'local passes summed before each allreduce',
  }),
  // A peer's own memory matter, no part of the job's math: each step's gradient is the same (micro-batch.ts).
  microBatch: field({
    section: 'schedule',
    schema: int.min(1),
    allowed: 'a whole number of examples >= 1 that divides the batch',
    help: "examples per forward-backward pass: a step's batch runs in passes of this many, their gradients summed on the GPU",
    unit: 'examples',
    flag: '--micro-batch <n>',
    flagHelp:
      'examples per forward-backward pass: each step of --batch runs in passes of n whose gradients add up on the GPU (the activations of n examples in memory, the same gradient); n must divide --batch',
    onTrain: true,
  }),
  seed: field({
    section: 'schedule',
    schema: int.min(0).max(2 ** 32 - 1),
    allowed: 'a whole number from 0 to 2^32-1',
    help: 'the seed of the initial weights and the batches',
    default: 1,
    flag: '--seed <n>',
    onTrain: true,
  }),
  epochs: field({
    section: 'schedule',
    schema: int.min(1),
    allowed: 'a whole number >= 1',
    help: 'passes over the training set',
    default: 1,
    flag: '--epochs <n>',
    flagHelp: 'epochs over the training set (counted from a resumed checkpoint)',
    onTrain: true,
  }),
  steps: field({
    section: 'schedule',
    schema: int.min(1),
    allowed: 'a whole number of steps >= 1',
    help: 'stop after this many steps',
    unit: 'steps',
    flag: '--steps <n>',
    flagHelp: 'stop after this many steps in total (overrides --epochs)',
    onTrain: true,
  }),
  globalBatch: field({
    section: 'schedule',
    schema: int.min(1),
    allowed: 'a whole number >= 1 (examples per step for the whole ring)',
    help: 'examples per step for the whole ring (absent: the batch per peer)',
    unit: 'examples',
    flag: '--global-batch <n>',
    flagHelp:
      'examples per step for the whole ring, fixed when peers leave or join (each peer takes a share); default with --elastic or --balance speed: -np x --batch',
  }),
  balance: field({
    section: 'schedule',
    schema: z.enum(['equal', 'speed']),
    allowed: "'equal' or 'speed'",
    help: 'how the global batch is shared',
    default: 'equal',
    flag: '--balance <how>',
    flagHelp:
      "how the peers share the global batch: equal, or speed (in proportion to each peer's measured compute speed)",
  }),
  // What the peers train on.
  sampling: field({
    section: 'data',
    schema: z.enum(['epochs', 'replacement']),
    allowed: "'epochs' or 'replacement'",
    help: 'shuffled epochs or draws with replacement',
    default: 'epochs',
  }),
  evalLimit: field({
    section: 'data',
    schema: int.min(1),
    allowed: 'a whole number of examples >= 1',
    help: 'evaluate on at most this many test examples',
    unit: 'examples',
    flag: '--eval-limit <n>',
    flagHelp: 'evaluate on the first n test (validation) examples only: a quick glance, not the documented metric',
    onTrain: true,
  }),
  text: field({ section: 'data', schema: text, allowed: TEXT, help: 'the text trained on (run --text)' }),
  textSha256: field({ section: 'data', schema: text, allowed: TEXT, help: "the text's SHA-256" }),
  context: field({
    section: 'data',
    schema: int.min(2),
    allowed: 'a whole number >= 2',
    help: 'tokens per window of the text',
    unit: 'tokens',
  }),
  // src/data/tokenizer.ts TOKENIZER_NAMES; absent: its characters, or bytes.
  tokenizer: field({
    section: 'data',
    schema: z.enum(['char', 'byte', 'gpt2']),
    allowed: "'char', 'byte' or 'gpt2'",
    help: "the text's tokenizer",
    flag: '--tokenizer <name>',
    flagHelp:
      "with --text: char (its characters), byte (its UTF-8 bytes) or gpt2 (GPT-2's 50,257-token BPE); default: its characters, or its bytes past 256 distinct characters; a --resume takes the checkpoint's",
    onTrain: true,
  }),
  table: field({
    section: 'data',
    schema: text,
    allowed: TEXT,
    help: 'the table of rows trained on (run --data FILE.csv|.npy|.json)',
  }),
  tableSha256: field({ section: 'data', schema: text, allowed: TEXT, help: "the table's SHA-256" }),
  labelColumn: field({
    section: 'data',
    schema: text,
    allowed: TEXT,
    help: "the table's label column",
    flag: '--label-column <name>',
    flagHelp:
      'with --data FILE.csv|.npy|.json: the column that holds the class numbers (a CSV header name, or a column number from 0)',
    onTrain: true,
  }),
  labels: field({ section: 'data', schema: text, allowed: TEXT, help: "the table's labels file" }),
  labelsSha256: field({ section: 'data', schema: text, allowed: TEXT, help: "the labels file's SHA-256" }),
  // How gradients are reduced over the ring.
  compression: field({
    section: 'reduce',
    schema: textParsedBy(
      (c) => c === 'none' || c === 'fp16' || c === 'int8',
      (c) => {
        if (topkRatio(c) === null) throw new Error(`unknown compression '${c}'`);
      },
    ),
    allowed: "'none', 'fp16', 'int8' or 'topk:R' (0 < R <= 1)",
    help: 'gradient compression on the wire',
    default: 'none',
    flag: '--compression <kind>',
    flagHelp:
      'what the ring sends: none, fp16 (half the bytes), int8 (a quarter, with error feedback) or topk:R (each peer the fraction R of largest gradients, with error feedback)',
    shorthand: { flag: '--fp16', value: 'fp16', help: 'send gradients as float16 (half the bytes)' },
  }),
  fusionThresholdBytes: field({
    section: 'reduce',
    schema: int.min(0),
    allowed: 'a whole number of bytes >= 0',
    help: 'gradient bucket size',
    unit: 'bytes',
  }),
  // Whether a step reduces its gradient bucket by bucket as backward finishes them (src/distributed/reduce/overlap-plan.ts).
  overlap: field({
    section: 'reduce',
    schema: bool,
    allowed: BOOL,
    help: "read each step's gradient whole before reducing it, instead of reducing each bucket as backward finishes it (docs/COLLECTIVES.md, Overlap)",
    flag: '--no-overlap',
    default: true,
  }),
  timeoutMs: field({
    section: 'reduce',
    schema: finite.gt(0),
    allowed: 'a number of milliseconds > 0',
    help: 'give up on a collective after this long',
    unit: 'ms',
  }),
  aggregation: field({
    section: 'reduce',
    schema: textParsedBy(() => false, parseAggregation),
    allowed: AGGREGATION_FORMS,
    help: "how the peers' gradients are combined",
    default: 'mean',
    flag: `--aggregation <${AGGREGATION_FORMS}>`,
    flagHelp:
      'how the peers combine gradients: mean (the ring allreduce, default); median or trimmed-mean:F (per element: ' +
      "F of the peers dropped at each end); centered-clip[:tau] (each peer's deviation from the last step's result clipped to tau; " +
      'default tau: the median deviation). The robust rules resist peers sending wild gradients, at the same traffic as the ring but to every peer',
  }),
  syncEvery: field({
    section: 'reduce',
    schema: int.min(1),
    allowed: 'a whole number of steps >= 1',
    help: 'local SGD / DiLoCo: average the models every this many steps',
    unit: 'steps',
    flag: '--sync-every <H>',
    flagHelp:
      'local SGD / DiLoCo: each peer takes H steps alone, then the ring averages how far they moved (one allreduce per H steps)',
  }),
  // The step checks. verify and doubtRule have no fixed default: settings.ts's stepCheckOn decides.
  verify: field({
    section: 'checks',
    schema: bool,
    allowed: BOOL,
    help: 'the verified allreduce (names a peer that lies about its sum)',
    flag: '--verify',
    flagHelp:
      'check every allreduce against sketches each peer publishes of its own gradient: a peer that sends other numbers than it published, or a link that corrupts data, is named and ejected (default: on with --elastic, off otherwise; docs/ROBUSTNESS.md)',
    offFlagHelp: 'turn the verified allreduce off, in an elastic job too',
  }),
  directionRules: field({
    section: 'checks',
    schema: bool,
    allowed: BOOL,
    help: "eject a peer whose gradients pull against the others' over several steps (opt-in: docs/ROBUSTNESS.md)",
    flag: '--direction-rules',
    default: false,
  }),
  doubtRule: field({
    section: 'checks',
    schema: bool,
    allowed: BOOL,
    help: 'the doubt rule (names a sign-flipped peer)',
    flag: '--doubt-rule',
    flagHelp:
      "leave out of a step a gradient far larger than the others' and against them, and clip any other large one to 2x theirs; a peer doubtful four steps in a row is ejected (default: on with --elastic, off otherwise; docs/ROBUSTNESS.md)",
    offFlagHelp: 'turn the doubt rule off, in an elastic job too',
  }),
  // Steps between the ranks' checks that they hold one state (src/distributed/robust/state-agreement.ts).
  stateCheckEvery: field({
    section: 'checks',
    schema: int.min(0),
    allowed: 'a whole number of steps >= 0 (0: no state check)',
    help: 'every this many steps and at the end, the peers check that they hold the same weights and optimizer state',
    unit: 'steps',
    flag: '--state-check-every <n>',
    default: 100,
  }),
  // Membership and its clocks (the session).
  elastic: field({
    section: 'membership',
    schema: bool,
    allowed: BOOL,
    help: 'peers may join and leave mid-run (browser tabs, volunteers): the ring re-forms instead of stopping',
    flag: '--elastic',
    default: false,
  }),
  // How long an elastic ring trains on without its server before it stops (README: ringtrain run).
  serverWaitMs: field({
    section: 'membership',
    schema: int.min(0),
    allowed: 'a whole number of milliseconds >= 0',
    help: 'how long a peer waits for a lost server to come back',
    unit: 'ms',
    default: 60_000,
  }),
  peerTimeoutMs: field({
    section: 'membership',
    schema: finite.gt(0),
    allowed: 'a number of milliseconds > 0',
    help: 'a peer silent this long is lost',
    unit: 'ms',
  }),
  // A peer is a member from its join, but loads its data (and compiles the transformer's kernels) before it can
  // answer; under load that took over 30 s. A job open to outsiders may lower it.
  silentPeerMs: field({
    section: 'membership',
    schema: finite.min(1000),
    allowed: 'a number of milliseconds >= 1000',
    help: 'how long the ring waits for a member that sent no signal',
    unit: 'ms',
    default: 120_000,
  }),
  // Staged admission (server/candidates.ts): how long a joiner of a running job has to echo with its would-be
  // neighbours. A joiner loads its data and compiles its kernels before it echoes (a tab on a software adapter took
  // over 30 s), and a ghost that waits it out costs a candidate slot, never the ring: room to prepare.
  admitTimeoutMs: field({
    section: 'membership',
    schema: int.min(0),
    allowed: 'a whole number of milliseconds >= 0 (0: admit joiners at once)',
    help: 'how long a joiner of a running job has to prove its links before it is dropped',
    unit: 'ms',
    default: 120_000,
  }),
  // The links between peers.
  connectTimeoutMs: field({
    section: 'links',
    schema: finite.min(1000),
    allowed: 'a number of milliseconds >= 1000',
    help: 'give up opening the links to the other peers after this long',
    unit: 'ms',
    default: 30_000,
  }),
  // Every peer of a job links alike: 'webrtc' turns every worker's TCP links off; 'auto' leaves each worker's own
  // (`worker --transport`: TCP to the peers that listen too and can be reached, WebRTC to the rest).
  transport: field({
    section: 'links',
    schema: z.enum(['auto', 'webrtc']),
    allowed: "'auto' or 'webrtc'",
    help: 'links between the workers: auto (TCP where both listen and reach each other; browser tabs use WebRTC) or webrtc (WebRTC for every link)',
    flag: '--transport <kind>',
    default: 'auto',
  }),
  ringOrder: field({
    section: 'links',
    schema: z.enum(['rtt']),
    allowed: "'rtt'",
    help: 'order the ring by measured round-trip times and bandwidth',
  }),
  // The model.
  precision: field({
    section: 'model',
    schema: z.enum(['f32', 'f16-mixed']),
    allowed: "'f32' or 'f16-mixed'",
    help: "f32, or f16-mixed: the linear layers' operands and the saved activations in f16, f32 sums and dynamic loss scaling (needs the adapter's shader-f16); every peer of a ring uses the job's",
    flag: '--precision <kind>',
    flagHelp:
      "f32, or f16-mixed: the linear layers' matmul operands and the activations kept for backward stored as f16, sums in f32, with dynamic loss scaling; weights, optimizer state and checkpoints stay f32; needs the adapter's 'shader-f16' (here Deno's lavapipe); in a ring every peer uses the job's",
    default: 'f32',
    onTrain: true,
  }),
  // Off: a peer that asks for another precision than the job's is refused (mixed-precision.ts).
  mixPrecisions: field({
    section: 'model',
    schema: bool,
    allowed: BOOL,
    help: "peers may train at a precision of their own (worker --precision: f32 beside f16-mixed; a step any peer overflowed is skipped by all); off, every peer trains at the job's and one that asks for another is refused",
    flag: '--mix-precisions',
    default: false,
  }),
  modelOptions: field({
    section: 'model',
    schema: text.refine(isJsonObjectText),
    allowed: 'a JSON object in a string',
    help: "the model's options (JSON)",
  }),
  modelName: field({ section: 'model', schema: text, allowed: TEXT, help: 'the name a model file registered' }),
  modelLayoutHash: field({ section: 'model', schema: text, allowed: TEXT, help: "the model's parameter layout hash" }),
  // launch --tabs: the arguments the page's recipe runs with.
  args: field({
    section: 'model',
    schema: text,
    allowed: TEXT,
    help: "the arguments the page's recipe runs with (launch --tabs)",
  }),
};
// Every entry is a Field (checked here, not with `satisfies`, which would infer an absent default as the schema's type).
FIELDS satisfies Record<string, Field>;

export type JobSettingKey = keyof typeof FIELDS;
export const JOB_SETTING_KEYS = Object.keys(FIELDS) as JobSettingKey[];
