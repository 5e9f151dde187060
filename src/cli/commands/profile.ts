/**
 * `ringtrain bench profile --model mlp|cnn|transformer|./file.ts --batch B`:
 * where one training step's time goes on this machine's adapter. The model,
 * optimizer, learning-rate schedule and data are those `ringtrain train`
 * uses; the measurement is src/engine/step-profile.ts: wall ms per step, CPU
 * ms to encode and submit a step, and each kernel's GPU ms in a step (by
 * timestamp queries where the adapter has them, else by replaying each
 * dispatch alone), grouped by kernel label. A table, or with --json one line:
 * {bench:'profile', model, batch, runtime, adapter, fallback_adapter, step_ms, planned_gpu_bytes,
 *  encode_cpu_ms, kernels_ms, kernels:[{label, dispatches, workgroups, ms, share}], method}.
 */
import { Command, Option } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { batches } from '../../data/batches.ts';
import { modelSpecFor } from '../../distributed/train/model-fit.ts';
import { learningRateAt } from '../../distributed/api/lr.ts';
import { createModel } from '../../engine/create.ts';
import { GraphModel } from '../../engine/graph-model.ts';
import { createOptimizer } from '../../engine/optimizer.ts';
import { profileSteps, type ProfileBatch, type StepProfile } from '../../engine/step-profile.ts';
import { acquireGpu } from '../../gpu/device.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { currentRuntime, decideRuntime, printLine, reexecUnder, runtimeLine, stderr } from '../host.node.ts';
import { useModelOption } from '../options/model-option.ts';
import { withRecipe } from '../options/recipes.ts';
import { withRuntime } from '../runtime-choice.ts';
import { commandStatus } from '../status.ts';
import { loadTrainingData } from '../options/training-data.node.ts';
import { MODEL_KINDS, parseTrainOptions, RUNTIMES, type TrainOptions } from '../options/train-options.ts';

interface ProfileFlags {
  model: string;
  batch: string;
  steps: string;
  rounds: string;
  warmup: string;
  method: 'auto' | 'timestamp' | 'replay';
  seed: string;
  runtime: (typeof RUNTIMES)[number];
  json: boolean;
}

export function profileCommand(): Command {
  const cmd = new Command('profile')
    .description(
      "Where a training step's time goes: wall ms per step, CPU ms to encode and submit it, and GPU ms per kernel (timestamp queries, or each dispatch replayed alone), grouped by kernel label.",
    )
    .addOption(
      new Option('--model <kind>', `model (${MODEL_KINDS.join('|')}, or a model file: ./my-model.ts)`).default('mlp'),
    )
    .option('--batch <n>', "examples per step (default: the model's training recipe, else 64)", '64')
    .option('--steps <n>', 'timed steps, for the wall time and again for the encode time', '20')
    .option('--rounds <n>', 'runs of each dispatch per kernel measurement', '10')
    .option('--warmup <n>', 'untimed steps first (pipelines compile, plans are made)', '2')
    .addOption(
      new Option(
        '--method <how>',
        'kernel timing: timestamp queries, replay (CPU clock around one submit per dispatch), or auto (timestamps where the adapter has them)',
      )
        .choices(['auto', 'timestamp', 'replay'])
        .default('auto'),
    )
    .option('--seed <n>', 'seed for initial weights and data order', '1')
    .addOption(
      new Option('--runtime <name>', `run under this runtime (${RUNTIMES.join('|')})`)
        .choices([...RUNTIMES])
        .default('auto'),
    )
    .option('--json', 'print one JSON line instead of the table', false);
  return cmd.action(async (flags: ProfileFlags) => {
    // The options `train` would take for this model: its recipe's batch, optimizer, learning rate and schedule.
    const { raw, recipe } = withRecipe(cmd, {
      model: flags.model,
      batch: flags.batch,
      seed: flags.seed,
      runtime: flags.runtime,
      json: flags.json,
      epochs: '1',
      optimizer: 'sgd',
      momentum: '0.9',
    });
    const opts = parseTrainOptions({ ...raw, steps: undefined });
    const steps = wholeNumber('--steps', flags.steps, 1);
    const rounds = wholeNumber('--rounds', flags.rounds, 1);
    const warmup = wholeNumber('--warmup', flags.warmup, 0);
    opts.model = (await useModelOption(opts.model)).model;
    const decision = await decideRuntime(opts.runtime);
    if (decision.auto) await printLine(runtimeLine(decision), flags.json ? stderr : undefined);
    if (decision.runtime !== currentRuntime()) {
      commandStatus.exitCode = await reexecUnder(decision.runtime, withRuntime(commandStatus.args, decision.runtime));
      return;
    }
    const gpu = await acquireGpu({ optionalFeatures: ['timestamp-query'] });
    try {
      const profile = await run(gpu, opts, {
        steps,
        rounds,
        warmup,
        method: flags.method,
        cosine: raw.lrSchedule === 'cosine',
        warmupSteps: recipe?.warmupSteps ?? 0,
        replacement: recipe?.sampling === 'replacement',
      });
      await printLine(flags.json ? JSON.stringify(asJson(gpu, opts, profile)) : table(gpu, opts, profile));
    } finally {
      gpu.destroy();
    }
  });
}

function wholeNumber(flag: string, value: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} must be a whole number ≥ ${min} (got ${JSON.stringify(value)}).`,
      { option: flag, value },
    );
  return n;
}

interface RunSettings {
  steps: number;
  rounds: number;
  warmup: number;
  method: ProfileFlags['method'];
  cosine: boolean;
  warmupSteps: number;
  replacement: boolean;
}

/** A step's profile and the GPU bytes its model, optimizer and training plan hold (what `train --dry-run` reports). */
type Profiled = StepProfile & { plannedGpuBytes: number };

async function run(gpu: Gpu, opts: TrainOptions, s: RunSettings): Promise<Profiled> {
  const data = await loadTrainingData(opts.model, undefined);
  const wanted = s.warmup + 2 * s.steps;
  const list: ProfileBatch[] = [];
  for (const b of batches(data.train, {
    batchSize: opts.batch,
    seed: opts.seed,
    epoch: 0,
    replacement: s.replacement,
  })) {
    list.push({ x: b.x, labels: b.labels });
    if (list.length >= wanted) break;
  }
  const before = gpu.pool.createdBytes;
  const model = createModel(gpu, modelSpecFor({ ...opts, steps: undefined }, data.train));
  const optimizer = createOptimizer(model, {
    kind: opts.optimizer,
    lr: opts.lr,
    momentum: opts.momentum,
    weightDecay: opts.weightDecay,
  });
  if (model instanceof GraphModel) model.planTrainingStep(opts.batch);
  const plannedGpuBytes = gpu.pool.createdBytes - before;
  const totalSteps = 1000;
  const schedule = {
    baseLr: opts.lr,
    size: 1,
    scaleBySize: false,
    decay: s.cosine ? ('cosine' as const) : ('constant' as const),
    totalSteps,
    warmupSteps: s.warmupSteps,
    warmupFrom: 'zero' as const,
  };
  try {
    // Past the warm-up ramp, where a real run spends its steps; the rate is passed every step, as trainLocal does.
    const profile = await profileSteps({
      model,
      optimizer,
      batches: list,
      steps: s.steps,
      rounds: s.rounds,
      warmup: s.warmup,
      method: s.method,
      lrAt: (step) => learningRateAt(schedule, Math.min(totalSteps - 1, s.warmupSteps + step)),
    });
    return { ...profile, plannedGpuBytes };
  } finally {
    optimizer.destroy();
    model.destroy();
  }
}

const round = (x: number, digits = 4) => Number(x.toFixed(digits));

function asJson(gpu: Gpu, opts: TrainOptions, p: Profiled): Record<string, unknown> {
  return {
    bench: 'profile',
    model: opts.model,
    batch: opts.batch,
    optimizer: opts.optimizer,
    runtime: gpu.info.runtime,
    adapter: gpu.info.description,
    fallback_adapter: gpu.info.isFallbackAdapter,
    steps: p.steps,
    rounds: p.rounds,
    step_ms: round(p.stepMs),
    encode_cpu_ms: round(p.encodeCpuMs),
    encode_cpu_min_ms: round(p.encodeCpuMinMs),
    submit_cpu_ms: round(p.submitCpuMs),
    kernels_ms: round(p.kernelsMs),
    kernels_over_step: round(p.stepMs > 0 ? p.kernelsMs / p.stepMs : 0),
    dispatches: p.dispatchesPerStep,
    planned_gpu_bytes: p.plannedGpuBytes,
    kernels: p.kernels.map((k) => ({
      label: k.label,
      dispatches: k.dispatches,
      workgroups: k.workgroups,
      workgroups_min: k.workgroupsMin,
      workgroups_max: k.workgroupsMax,
      ms: round(k.ms),
      share: round(k.share),
    })),
    method: p.method,
  };
}

function table(gpu: Gpu, opts: TrainOptions, p: Profiled): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const ms = (x: number) => x.toFixed(x < 1 ? 4 : 2);
  const rows = p.kernels.map((k) => [
    k.label,
    String(k.dispatches),
    k.workgroupsMin === k.workgroupsMax ? String(k.workgroupsMin) : `${k.workgroupsMin}..${k.workgroupsMax}`,
    String(k.workgroups),
    ms(k.ms),
    pct(k.share),
  ]);
  const all = [
    ['kernel', 'dispatches', 'wg/dispatch', 'wg/step', 'GPU ms/step', 'share'],
    ...rows,
    [
      'total',
      String(p.dispatchesPerStep),
      '',
      String(p.kernels.reduce((a, k) => a + k.workgroups, 0)),
      ms(p.kernelsMs),
      '100.0%',
    ],
  ];
  const widths = all[0].map((_, c) => Math.max(...all.map((r) => r[c].length)));
  const line = (r: string[]) =>
    r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
  return [
    `profile: ${opts.model}, batch ${opts.batch}, ${opts.optimizer}; ${gpu.info.runtime} on ${gpu.info.description}${gpu.info.isFallbackAdapter ? ' (fallback adapter)' : ''}`,
    `planned GPU memory ${(p.plannedGpuBytes / 2 ** 20).toFixed(1)} MiB (parameters, gradients, optimizer state, training step)`,
    `step ${ms(p.stepMs)} ms wall (mean of ${p.steps}, losses read every 10) | encode+submit ${ms(p.encodeCpuMs)} ms CPU (median, GPU idle; last submit ${ms(p.submitCpuMs)}) | kernels ${ms(p.kernelsMs)} ms GPU = ${pct(p.stepMs > 0 ? p.kernelsMs / p.stepMs : 0)} of the step (${p.method === 'timestamp' ? 'timestamp queries' : 'replay'}, ${p.rounds} runs each)`,
    '',
    line(all[0]),
    ...all.slice(1).map(line),
  ].join('\n');
}
