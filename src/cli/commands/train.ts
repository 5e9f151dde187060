/**
 * `ringtrain train`: train one model on this machine's GPU, under Node or
 * Deno, with a progress bar (stderr, TTY only), test accuracy after each
 * epoch, optional checkpoints, and with --json one result line on stdout.
 */
import { Command } from 'commander';
import { MultiBar, Presets } from 'cli-progress';
import { EventBus } from '../../core/events.ts';
import { saveCheckpoint } from '../../checkpoint/file.node.ts';
import { preflightCheckpoints } from '../../checkpoint/preflight.node.ts';
import { batchCount } from '../../data/batches.ts';
import { limitEvaluation, loadTrainingData, type TrainingData } from '../options/training-data.node.ts';
import { withRecipe, withTextModel } from '../options/recipes.ts';
import { acquireGpu } from '../../gpu/index.ts';
import {
  currentRuntime,
  decideRuntime,
  interruptSignal,
  printLine,
  reexecUnder,
  runtimeLine,
  stderr,
  stderrIsTTY,
} from '../host.node.ts';
import { withRuntime } from '../runtime-choice.ts';
import { commandStatus } from '../status.ts';
import { evaluationFailed, evaluationFailedLine } from '../evaluation-failure.ts';
import { peakRssBytes } from '../peak-rss.node.ts';
import { parseModelOptions, useModelOption } from '../options/model-option.ts';
import {
  addTrainOptions,
  modelOptionsWithSizes,
  parseTrainOptions,
  refuseInitFromWithResume,
  type TrainOptions,
} from '../options/train-options.ts';
import { modelSpecFor, trainLocal } from '../../distributed/train/train-local.ts';
import { dryRunLines, planDryRun } from './dry-run.ts';
import { resumeTokenizer, withResumedArch } from '../../distributed/train/model-fit.ts';
import type { TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';
import type { LocalTrainConfig } from '../../distributed/train/config-types.ts';
import { flatFromHfGpt2 } from '../../checkpoint/hf-gpt2.ts';
import { loadHfWeights } from '../../checkpoint/hf-gpt2.node.ts';

/** Train's options with what the trainer's config takes beside them (the schedule, from the flag or the recipe). */
type TrainCommandOptions = TrainOptions &
  Required<Pick<LocalTrainConfig, 'lrSchedule' | 'warmupSteps' | 'sampling'>> &
  Pick<LocalTrainConfig, 'modelOptions'> & { dryRun: boolean; labels?: string; labelColumn?: string };

export function trainCommand(): Command {
  const cmd = addTrainOptions(new Command('train').description('train a model on this machine (one peer)'));
  cmd.option(
    '--labels <file>',
    'with --data FILE.csv|.npy|.json: the labels, one class number per row (a one-column .csv/.npy/.json, or one number per line)',
  );
  cmd.option(
    '--init-from <file>',
    'with --text: start from these weights instead of a random init: a Hugging Face GPT-2 safetensors file (wte, wpe, h.N.…, ln_f), F32, F16 or BF16',
  );
  cmd.option(
    '--dry-run',
    "build the model, its optimizer and the plan of one step at --batch on this adapter and report their GPU bytes and the adapter's limits (with --json: one JSON line), without training",
    false,
  );
  cmd.option(
    '--model-options <json>',
    'options for the model, as a JSON object: a model file\'s factory gets them (\'{"width":128}\'); the mlp takes hidden and activation (\'{"hidden":[256,64],"activation":"tanh"}\'). Recorded in the checkpoint and checked on --resume',
  );
  return cmd.action(async (raw: Record<string, unknown>) => {
    const { raw: filled, recipe } = withRecipe(cmd, withTextModel(cmd, raw));
    const parsed = parseTrainOptions(filled);
    const opts: TrainCommandOptions = {
      ...parsed,
      lrSchedule: filled.lrSchedule === 'cosine' ? 'cosine' : 'constant',
      warmupSteps: recipe?.warmupSteps ?? 0,
      sampling: recipe?.sampling ?? 'epochs',
      modelOptions: modelOptionsWithSizes(parsed, parseModelOptions(filled.modelOptions)),
      labels: filled.labels as string | undefined,
      labelColumn: filled.labelColumn as string | undefined,
      dryRun: filled.dryRun === true,
    };
    // A model file is loaded and registered here (and built once with the options, so a bad one fails now); from now on
    // the model goes by its registered name.
    opts.model = (await useModelOption(opts.model, opts.modelOptions)).model;
    const decision = await decideRuntime(opts.runtime);
    if (decision.auto) await printLine(runtimeLine(decision), opts.json ? stderr : undefined);
    if (decision.runtime !== currentRuntime()) {
      commandStatus.exitCode = await reexecUnder(decision.runtime, withRuntime(commandStatus.args, decision.runtime));
      return;
    }
    await (opts.dryRun ? dryRun(opts) : train(opts));
  });
}

async function dryRun(opts: TrainCommandOptions): Promise<void> {
  const data = await loadData(opts, undefined);
  const gpu = await acquireGpu();
  try {
    const report = {
      ...planDryRun(gpu, modelSpecFor(opts, data.train), opts),
      ...(data.text ? { vocabulary_size: data.text.vocabularySize, context: opts.context } : {}),
    };
    if (opts.json) await printLine(JSON.stringify(report));
    else for (const line of dryRunLines(report)) await printLine(line);
  } finally {
    gpu.destroy();
  }
}

async function loadData(opts: TrainCommandOptions, resume: TrainingCheckpoint | undefined): Promise<TrainingData> {
  const text = opts.text
    ? { path: opts.text, context: opts.context, tokenizer: resumeTokenizer(opts.tokenizer, resume, opts.resume) }
    : undefined;
  const data = await loadTrainingData(opts.model, opts.data, text, {
    labels: opts.labels,
    labelColumn: opts.labelColumn,
  });
  return { ...data, test: limitEvaluation(data.test, opts.evalLimit) };
}

function percent(x: number): string {
  return `${(x * 100).toFixed(2)}%`;
}

async function train(opts: TrainCommandOptions): Promise<void> {
  // Before data and GPU: a run that cannot save, or resumes the wrong file, stops now.
  const resume = preflightCheckpoints(opts);
  refuseInitFromWithResume(opts);
  opts.modelOptions = withResumedArch(opts.modelOptions, resume);
  const initFrom = opts.initFrom;
  const initial = initFrom ? loadHfWeights(initFrom) : undefined;
  const data = await loadData(opts, resume);
  const gpu = await acquireGpu();
  // Human-readable lines go to stdout, or to stderr when stdout is reserved for the JSON line.
  const say = (line: string) => (opts.json ? printLine(line, stderr) : printLine(line));
  const bus = new EventBus();
  const stepsPerEpoch = batchCount(data.train.count, opts.batch);
  const totalSteps = opts.steps ?? opts.epochs * stepsPerEpoch;
  const bars = showProgress(opts, bus, say, totalSteps, resume?.step ?? 0);
  const interrupt = interruptSignal(() => {
    bars?.stop();
    stderr.write(
      `ringtrain: stopping after this step${opts.save ? ` and saving ${opts.save}` : ''} (press Ctrl-C again to quit at once)\n`,
    );
  });
  try {
    await say(
      `ringtrain: training ${opts.model} with ${opts.optimizer} (lr ${opts.lr}${opts.lrSchedule === 'cosine' ? ' cosine' : ''}, batch ${opts.batch}, seed ${opts.seed}${opts.precision === 'f16-mixed' ? ', f16-mixed' : ''}) for ${totalSteps} steps ` +
        `on ${data.train.count} examples (${data.name}), ${gpu.info.runtime} on ${gpu.info.description}` +
        (resume ? `, resuming at step ${resume.step} from ${opts.resume}` : '') +
        (initFrom ? `, starting from the weights of ${initFrom}` : ''),
    );
    const result = await trainLocal({
      gpu,
      train: data.train,
      test: data.test,
      config: opts,
      bus,
      resume,
      resumeName: opts.resume,
      onCheckpoint: opts.save ? (c) => saveCheckpoint(opts.save!, c, { overwrite: opts.overwrite }) : undefined,
      signal: interrupt.signal,
      initialParams: initial
        ? (model) => flatFromHfGpt2(initial, model.layout, model.flatLength, initFrom!)
        : undefined,
    });
    bars?.stop();
    if (result.evaluationFailure) await printLine(evaluationFailedLine(result.evaluationFailure, opts.save), stderr);
    // Like a shell job killed by SIGINT, but only after the checkpoint is safe.
    if (result.interrupted) commandStatus.exitCode = 130;
    if (opts.json) await printLine(JSON.stringify(trainResultLine(opts, data, result)));
    else {
      await say(
        `${result.interrupted ? 'interrupted' : 'done'}: ${result.steps} steps, ${result.evaluationFailure ? 'not evaluated' : `test accuracy ${percent(result.testAccuracy)}`}, ${Math.round(result.samplesPerS)} samples/s` +
          (opts.save ? `, saved ${opts.save}` : ''),
      );
    }
  } finally {
    interrupt.dispose();
    bars?.stop();
    gpu.destroy();
  }
}

/**
 * The progress bar on a terminal, or without one (a log, a pipe, --json) about ten progress lines per run, as
 * `run` prints: a long run (the transformer's 1,000 steps on a CPU adapter) shows its loss curve and pace as it goes.
 */
function showProgress(
  opts: TrainCommandOptions,
  bus: EventBus,
  say: (line: string) => Promise<void>,
  totalSteps: number,
  firstStep: number,
): MultiBar | undefined {
  const useBar = !opts.json && stderrIsTTY;
  const bars = useBar
    ? new MultiBar(
        {
          stream: stderr,
          format: '{bar} {value}/{total} steps | epoch {epoch} | loss {loss} | {rate} samples/s',
          hideCursor: true,
          clearOnComplete: true,
        },
        Presets.shades_classic,
      )
    : undefined;
  const bar = bars?.create(totalSteps, firstStep, { epoch: 1, loss: '-', rate: '-' });
  let epochLoss = 0,
    epochSteps = 0;
  const progressEvery = Math.max(1, Math.ceil(totalSteps / 10));
  let lastProgressLine = firstStep;
  const started = Date.now();
  bus.on((e) => {
    if (e.type === 'train-step') {
      epochLoss += e.loss;
      epochSteps++;
      bar?.update(e.step, { epoch: e.epoch + 1, loss: e.loss.toFixed(4), rate: Math.round(e.samplesPerS) });
      if (!bar && e.step >= lastProgressLine + progressEvery) {
        lastProgressLine = e.step - (e.step % progressEvery);
        void say(
          `step ${e.step}/${totalSteps}, loss ${e.loss.toFixed(4)}, ${Math.round(e.samplesPerS)} samples/s, ${((Date.now() - started) / 1000).toFixed(1)} s`,
        );
      }
    } else if (e.type === 'evaluate') {
      const line = `epoch ${e.epoch + 1}: step ${e.step}, train loss ${(epochLoss / Math.max(1, epochSteps)).toFixed(4)}, test accuracy ${percent(e.testAccuracy)}, test loss ${e.testLoss?.toFixed(4)}`;
      epochLoss = 0;
      epochSteps = 0;
      if (bars) {
        bars.log(line + '\n');
        bars.update(); // flush now: the run may stop (and clear the bar) right after the last evaluation
      } else void say(line);
    }
  });
  return bars;
}

/** `train --json`'s line. */
function trainResultLine(
  opts: TrainCommandOptions,
  data: Awaited<ReturnType<typeof loadData>>,
  result: Awaited<ReturnType<typeof trainLocal>>,
) {
  return {
    test_accuracy: result.testAccuracy,
    test_loss: result.testLoss,
    train_loss: result.trainLoss,
    val_loss: result.testLoss,
    tokens_per_s: result.tokensPerS,
    steps: result.steps,
    epochs: result.epochs,
    samples_per_s: result.samplesPerS,
    train_seconds: result.trainSeconds,
    runtime: result.runtime,
    adapter: result.adapter,
    gpu_waits: result.gpuWaits,
    model: opts.model,
    params: result.params,
    optimizer: opts.optimizer,
    batch: opts.batch,
    micro_batch: opts.microBatch ?? null,
    // One process is a ring of one: run --json's fields, with their meaning there.
    global_batch: opts.batch,
    size: 1,
    lr: opts.lr,
    lr_schedule: opts.lrSchedule,
    seed: opts.seed,
    precision: opts.precision ?? 'f32',
    // f16-mixed: the steps whose update an overflow skipped, and the loss scale at the end.
    ...(result.mixedPrecision
      ? { skipped_steps: result.mixedPrecision.skippedSteps, loss_scale: result.mixedPrecision.lossScale }
      : {}),
    ...(data.text
      ? {
          text_sha256: data.text.sha256,
          tokenizer: data.text.tokenizer,
          vocabulary_size: data.text.vocabularySize,
          text_tokens: data.text.tokens,
          token_cache: data.text.cache,
          ...(data.text.built ? { tokenize_seconds: data.text.built.seconds } : {}),
        }
      : {}),
    saved: opts.save ?? null,
    interrupted: result.interrupted,
    // null, or why the last evaluation failed (test_accuracy and test_loss are null then): the run and its
    // checkpoint stand.
    evaluation_failed: evaluationFailed(result.evaluationFailure),
    peak_rss_bytes: peakRssBytes(),
  };
}
