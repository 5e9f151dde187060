/**
 * The options of `ringtrain train` (and of every command that trains: `run`
 * and `worker` accept the same ones), validated with zod so that a bad value
 * fails before any GPU or data work, with a message that names the flag.
 */
import { Command, Option } from 'commander';
import { z } from 'zod';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { isModelFile } from '../../engine/define.ts';
import { passesOf } from '../../engine/micro-batch.ts';
import { DEFAULT_TEXT_CONTEXT } from '../../data/text.ts';
import { optimizerNamed, optimizerNames } from '../../optimizers/index.ts';
import { addJobSettingOptions, settingValue, TRAIN_SETTINGS } from './job-setting-options.ts';

export const MODEL_KINDS = ['mlp', 'cnn', 'transformer'] as const;
/** The optimizers `--optimizer` takes: every one src/optimizers/ defines. */
export const OPTIMIZER_KINDS: readonly string[] = optimizerNames();
/** 'auto' (the default) picks by adapter: Node on a hardware GPU, Deno on a CPU adapter (runtime-choice.ts). */
export const RUNTIMES = ['node', 'deno', 'auto'] as const;

/**
 * Named model sizes (`--preset`): GPT-2 small's, in GPT-2's architecture, with its 1,024 learned
 * positions whatever the training window. Explicit --layers/--width/--heads/--context win.
 */
export const PRESETS = {
  gpt2: { layers: 12, width: 768, heads: 12, context: 1024, positions: 1024, arch: 'gpt2' },
} as const;
export const PRESET_NAMES = Object.keys(PRESETS) as (keyof typeof PRESETS)[];

/** Each optimizer's learning rate when --lr is not given: its definition's `commandLineLr` (tuned on MNIST), else its own default. */
export const DEFAULT_LR: Readonly<Record<string, number>> = Object.fromEntries(
  OPTIMIZER_KINDS.map((k) => [
    k,
    optimizerNamed(k)!.commandLineLr ?? (optimizerNamed(k)!.settings.lr.default as number),
  ]),
);
/** Weight decay when --weight-decay is not given: each optimizer's own (none for SGD, where it is L2 on the gradient). */
export const DEFAULT_WEIGHT_DECAY: Readonly<Record<string, number>> = Object.fromEntries(
  OPTIMIZER_KINDS.map((k) => [k, optimizerNamed(k)!.settings.weightDecay.default as number]),
);

/** `0.05 for sgd, 0.002 for adamw`: a per-optimizer default, for --help. */
export function perOptimizer(values: Readonly<Record<string, number>>): string {
  return OPTIMIZER_KINDS.map((k) => `${values[k]} for ${k}`).join(', ');
}

const count = (flag: string, min: number) =>
  z.coerce
    .number({ error: `${flag} must be a number` })
    .int({ error: `${flag} must be a whole number` })
    .min(min, { error: `${flag} must be at least ${min}` });
const positive = (flag: string) =>
  z.coerce
    .number({ error: `${flag} must be a number` })
    .positive({ error: `${flag} must be greater than 0` })
    .finite({ error: `${flag} must be finite` });

export const TrainOptionsSchema = z.object({
  model: z.string().refine((m) => (MODEL_KINDS as readonly string[]).includes(m) || isModelFile(m), {
    error: `--model must be one of ${MODEL_KINDS.join(', ')} or a model file (./my-model.ts)`,
  }),
  epochs: settingValue('epochs'),
  batch: count('--batch', 1).max(8192, { error: '--batch must be at most 8192' }),
  lr: positive('--lr').optional(),
  optimizer: z.string().refine((o) => OPTIMIZER_KINDS.includes(o), {
    error: `--optimizer must be one of ${OPTIMIZER_KINDS.join(', ')}`,
  }),
  momentum: settingValue('momentum'),
  weightDecay: z.coerce
    .number({ error: '--weight-decay must be a number' })
    .min(0, { error: '--weight-decay must be at least 0' })
    .finite()
    .optional(),
  seed: settingValue('seed'),
  precision: settingValue('precision').optional(),
  steps: settingValue('steps').optional(),
  microBatch: settingValue('microBatch').optional(),
  save: z.string().min(1, { error: '--save needs a file path' }).optional(),
  resume: z.string().min(1, { error: '--resume needs a file path' }).optional(),
  overwrite: z.boolean().default(false),
  data: z.string().min(1).optional(),
  evalLimit: settingValue('evalLimit').optional(),
  text: z.string().min(1, { error: '--text needs a file path (or @brown)' }).optional(),
  tokenizer: settingValue('tokenizer').optional(),
  context: count('--context', 2).max(4096, { error: '--context must be at most 4096' }).optional(),
  layers: count('--layers', 1).max(64, { error: '--layers must be at most 64' }).optional(),
  width: count('--width', 1).max(4096, { error: '--width must be at most 4096' }).optional(),
  heads: count('--heads', 1).max(256, { error: '--heads must be at most 256' }).optional(),
  preset: z.enum(PRESET_NAMES, { error: `--preset must be one of ${PRESET_NAMES.join(', ')}` }).optional(),
  initFrom: z.string().min(1, { error: '--init-from needs a file path' }).optional(),
  runtime: z.enum(RUNTIMES, { error: `--runtime must be one of ${RUNTIMES.join(', ')}` }).optional(),
  json: z.boolean().default(false),
});

export type TrainOptions = Omit<z.infer<typeof TrainOptionsSchema>, 'lr' | 'weightDecay'> & {
  lr: number;
  weightDecay: number;
};

/**
 * Adds the training options to a command (train and run share them): those of the settings' table marked `onTrain`
 * (--epochs, --momentum, --seed, --steps, --eval-limit, --lr-schedule, --tokenizer, --label-column: src/job/fields.ts), and these.
 */
export function addTrainOptions(cmd: Command): Command {
  return addJobSettingOptions(cmd, TRAIN_SETTINGS)
    .addOption(
      new Option(
        '--model <kind>',
        `model to train (${MODEL_KINDS.join('|')}, or a file exporting a model factory: ./my-model.ts)`,
      ).default('mlp'),
    )
    .option('--batch <n>', 'examples per step (per peer)', '64')
    .option('--lr <x>', `learning rate (default ${perOptimizer(DEFAULT_LR)})`)
    .addOption(new Option('--optimizer <kind>', `optimizer (${OPTIMIZER_KINDS.join('|')})`).default('sgd'))
    .option(
      '--weight-decay <x>',
      `weight decay: L2 for sgd, decoupled for the others (default ${perOptimizer(DEFAULT_WEIGHT_DECAY)})`,
    )
    .option('--save <path>', 'write a safetensors checkpoint here (atomically) after each epoch and at the end')
    .option('--resume <path>', 'continue from a checkpoint written by --save')
    .option(
      '--overwrite',
      '--save may replace a checkpoint of a later step (or a file that is not a checkpoint)',
      false,
    )
    .option(
      '--data <dir>',
      'train on IDX files in this directory (MNIST/Fashion-MNIST names) instead of the bundled 10,000 digits',
    )
    .option(
      '--text <file>',
      'train the transformer on this UTF-8 text file (or @brown, the Brown corpus that comes with ringtrain): tokens as --tokenizer says, the last 10% held out for validation',
    )
    .option(
      '--context <n>',
      `with --text: tokens per window, the transformer's context (default ${DEFAULT_TEXT_CONTEXT})`,
    )
    .option('--layers <n>', "the transformer's blocks (default 2); recorded in the checkpoint and checked on --resume")
    .option('--width <n>', "the transformer's width (default 64; a multiple of --heads)")
    .option('--heads <n>', "the transformer's attention heads (default 4)")
    .option(
      '--preset <name>',
      `with --text: a named size (${PRESET_NAMES.join('|')}): gpt2 = GPT-2 small, 12 layers, width 768, 12 heads, 1,024 positions, context 1024 (--layers/--width/--heads override it; --context sets a shorter training window)`,
    )
    .addOption(
      new Option(
        '--runtime <name>',
        `run under this runtime (${RUNTIMES.join('|')}); auto: Node on a hardware GPU, Deno on a machine without one`,
      ).default('auto'),
    )
    .option('--json', 'print one JSON line with the results on stdout (no progress bar)', false);
}

/** Validates commander's raw option values; throws InvalidArgument naming the flag. */
export function parseTrainOptions(raw: Record<string, unknown>): TrainOptions {
  const parsed = TrainOptionsSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue.path[0] ?? '');
    throw new RingtrainError(ErrorCode.InvalidArgument, `${issue.message} (got ${JSON.stringify(raw[key])}).`, {
      option: key,
      value: raw[key],
    });
  }
  const o = withPreset(parsed.data);
  // Refused here, before any data or GPU work, in the words a step would use.
  if (o.microBatch !== undefined) passesOf(o.batch, o.microBatch);
  return { ...o, lr: o.lr ?? DEFAULT_LR[o.optimizer], weightDecay: o.weightDecay ?? DEFAULT_WEIGHT_DECAY[o.optimizer] };
}

/** --preset's sizes where the flags leave them unset; a preset sizes a --text model (the words set fixes its own context). */
function withPreset<
  O extends {
    preset?: keyof typeof PRESETS;
    text?: string;
    layers?: number;
    width?: number;
    heads?: number;
    context?: number;
    initFrom?: string;
  },
>(o: O): O {
  if (o.preset !== undefined && o.text === undefined) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--preset ${o.preset} sizes a language model on a text; add --text FILE (the words workload's transformer has its own size)`,
      { option: 'preset' },
    );
  }
  if (o.initFrom !== undefined && o.text === undefined) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--init-from ${o.initFrom} starts a language model from GPT-2's weights; add --text FILE to train it on`,
      { option: 'initFrom' },
    );
  }
  if (o.preset === undefined) return o;
  const p = PRESETS[o.preset];
  if (o.context !== undefined && o.context > p.positions) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--context ${o.context} is longer than --preset ${o.preset}'s ${p.positions} positions; give --context ${p.positions} or less`,
      { option: 'context', context: o.context, positions: p.positions },
    );
  }
  return {
    ...o,
    layers: o.layers ?? p.layers,
    width: o.width ?? p.width,
    heads: o.heads ?? p.heads,
    context: o.context ?? p.context,
  };
}

/**
 * --layers, --width and --heads are the transformer's --model-options under
 * their own names: merged into them (a flag and an option that disagree are
 * refused, naming both), and refused for any other model.
 */
export function modelOptionsWithSizes(
  o: Pick<TrainOptions, 'model' | 'layers' | 'width' | 'heads' | 'preset'>,
  modelOptions: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  const sizes: Record<string, unknown> = Object.fromEntries(
    (['layers', 'width', 'heads'] as const).filter((k) => o[k] !== undefined).map((k) => [k, o[k]]),
  );
  if (o.preset !== undefined) {
    // An explicit --model-options positions wins, as explicit sizes do (a checkpoint saved with fewer rows resumes so).
    if (modelOptions?.positions === undefined) sizes.positions = PRESETS[o.preset].positions;
    sizes.arch = PRESETS[o.preset].arch;
  }
  if (Object.keys(sizes).length === 0) return modelOptions;
  if (o.model !== 'transformer') {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--${Object.keys(sizes)[0]} sizes the transformer (--model transformer or --text FILE), not --model ${o.model}; use --model-options for its options`,
      { model: o.model },
    );
  }
  for (const [k, v] of Object.entries(sizes)) {
    if (modelOptions?.[k] !== undefined && modelOptions[k] !== v) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${k === 'arch' ? `--preset ${o.preset}` : `--${k} ${v}`} and --model-options ${JSON.stringify({ [k]: modelOptions[k] })} disagree; give one`,
        { option: k },
      );
    }
  }
  return { ...modelOptions, ...sizes };
}

/** `--init-from` starts a run from a file's weights and `--resume` continues one: `train` and `run` take one of them. */
export function refuseInitFromWithResume(o: { initFrom?: string; resume?: string }): void {
  if (o.initFrom !== undefined && o.resume !== undefined)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--init-from ${o.initFrom} starts a run from GPT-2's weights, --resume ${o.resume} continues one; give one`,
      { option: 'initFrom' },
    );
}
