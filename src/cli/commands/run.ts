/**
 * `ringtrain run -np N`: the launcher, like `horovodrun -np N`. Starts a
 * signaling server with one job, starts N local workers (Node or Deno) that
 * join it, shows one progress bar for the whole ring, and gathers the
 * results. It accepts every option of `ringtrain train`.
 *
 * Workers report through JSON lines on stdout (`ringtrain worker --events`);
 * the launcher never looks inside the ring, it only listens.
 *
 * Beside it: run-options.node.ts (its options and the job spec),
 * run-workers.node.ts (the worker processes), run-summary.node.ts (the result).
 */
import { Command } from 'commander';
import { preflightCheckpoints } from '../../checkpoint/preflight.node.ts';
import { resumeTokenizer } from '../../distributed/train/model-fit.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { batchCount } from '../../data/batches.ts';
import { MNIST_TRAIN } from '../../data/mnist.ts';
import { WORD_COUNT, WORD_VALIDATION_COUNT } from '../../data/words.ts';
import { startServer, type RunningServer } from '../../../server/index.ts';
import { untilSignal } from '../../../server/serve.ts';
import { decideRuntime, printLine, runtimeLine, stderr } from '../host.node.ts';
import { parseModelOptions, useModelOption } from '../options/model-option.ts';
import { type Recipe, withTextModel } from '../options/recipes.ts';
import { loadText, textSource } from '../../data/text.node.ts';
import { readFileSync } from 'node:fs';
import { DEFAULT_TEXT_CONTEXT } from '../../data/text.ts';
import { trainingTokens } from '../../data/text-split.ts';
import { cachedTokens } from '../../data/token-cache.node.ts';
import { loadTable } from '../../data/table.node.ts';
import type { TableSplit } from '../../data/table.ts';
import { fileSha256, isTable } from '../options/table-option.node.ts';
import { readTlsFiles } from '../options/secrets.node.ts';
import { addIceOptions, iceFromFlags } from '../options/ice-flags.node.ts';
import { commandStatus } from '../status.ts';
import {
  addTrainOptions,
  modelOptionsWithSizes,
  parseTrainOptions,
  refuseInitFromWithResume,
} from '../options/train-options.ts';
import { refuseUnreadableHfWeights } from '../../checkpoint/hf-gpt2.node.ts';
import { addJobSettingOptions, givenJobSettings, RUN_SETTINGS } from '../options/job-setting-options.ts';
import { addDiscoverOptions, discoverOptions, keepWorkersDiscovered } from '../launcher/discovery.node.ts';
import { addWanOptions, parseWanOptions } from '../options/wan-options.ts';
import { parseShareOptions } from '../options/share-options.ts';
import { parseAggregationOption } from '../options/aggregation-option.ts';
import {
  elasticOptions,
  intOption,
  jobSpecFor,
  refuseFlagConflicts,
  type RunOptions,
  type RunSettings,
  runRecipe,
} from '../options/run-options.node.ts';
import { startWorker, type WorkerState } from '../launcher/run-workers.node.ts';
import { reportRun } from '../launcher/run-summary.node.ts';
import { progressBar, RunProgress } from '../launcher/run-progress.node.ts';
import type { JobSpec } from '../../signaling/protocol.ts';

// The option tests read these from here, where the command is.
export { jobSpecFor, runRecipe };

/** Heartbeats (5 s) a local worker may miss before the server drops it: a minute. */
const RUN_MISSED_HEARTBEATS = 12;

/** How code that embeds `ringtrain run` extends it (never set from the command line). */
export type RunExtension = Pick<RunOptions, 'workerCommand'>;

export function runCommand(extension: RunExtension = {}): Command {
  const cmd = new Command('run').description(
    'start a signaling server and N local workers, and train together (like horovodrun -np N)',
  );
  addRunOptions(cmd);
  cmd.action(async (given: Record<string, unknown>) => {
    // --discover: the script's first answer is -np, and the run is elastic.
    const discovered = given.discover === undefined ? given : { ...given, ...(await discoverOptions(given)) };
    if (discovered.np === undefined)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'ringtrain run needs -np N (how many local workers), or --discover SCRIPT.',
      );
    const { raw, recipe } = runRecipe(cmd, withTextModel(cmd, discovered));
    const o = runOptionsFrom(cmd, raw, recipe, extension);
    o.shares = parseShareOptions(
      raw,
      { ...o, elastic: o.settings.elastic },
      cmd.getOptionValueSource('batch') === 'cli',
    );
    if (raw.globalBatch !== undefined) o.batch = Math.ceil(o.shares.globalBatch! / o.np); // what a peer takes at launch
    // Flags that do not combine stop the launch here, before any checkpoint is touched.
    refuseFlagConflicts(o);
    // Before the server and the workers: a wrong --resume or an unwritable --save stops the launch here.
    refuseInitFromWithResume(o);
    const resumed = preflightCheckpoints(o);
    // Rank 0 loads it once it knows it is rank 0; the job's start gives its weights to every worker.
    if (o.initFrom !== undefined) refuseUnreadableHfWeights(o.initFrom);
    if (o.text !== undefined) o.tokenizer = resumeTokenizer(o.tokenizer, resumed, o.resume);
    commandStatus.exitCode = await launch(o);
  });
  return cmd;
}

/** `run`'s flags: train's, the launcher's own, and those made from the job settings' table. */
function addRunOptions(cmd: Command): Command {
  addTrainOptions(cmd)
    .option(
      '--np <n>',
      'number of local workers (also -np, as horovodrun spells it); with --discover, the script decides',
    )
    .option('--timeline <path>', 'write a Chrome-trace timeline of all ranks here (open it in Perfetto)')
    .option(
      '--init-from <file>',
      "with --text: start from these weights instead of a random init (a Hugging Face GPT-2 safetensors file, as for train): rank 0 reads it and the job's start gives them to every worker",
    )
    .option('--port <n>', 'port of the signaling server (0 picks a free one)', '0')
    .option('--host <addr>', 'address the server listens on', '127.0.0.1')
    .option(
      '--serve-page',
      'serve the page, print the address where a browser can watch or join, and keep serving after training until Ctrl-C',
      false,
    )
    .option('--extra-peers <n>', 'places for peers beyond the local workers (browser tabs)', '0')
    .option(
      '--min-np <n>',
      'with --elastic: keep training while at least this many peers are left (default 1: a lone survivor finishes the run)',
    )
    .option('--max-np <n>', 'with --elastic: at most this many peers (default -np plus --extra-peers)')
    .option(
      '--server-wait <seconds>',
      'with --elastic: how long the ring trains on without its signaling server, reconnecting, before it stops with a recovery checkpoint (default 60)',
    )
    .option(
      '--model-options <json>',
      'options for the model, as a JSON object (as for train); every worker builds the model with them, and a worker given other ones is refused',
    )
    .option(
      '--tls-cert <path>',
      'serve https and wss with this PEM certificate (it must name 127.0.0.1, where the workers connect)',
    )
    .option('--tls-key <path>', 'PEM private key of --tls-cert')
    .option(
      '--labels <file>',
      'with --data FILE.csv|.npy|.json: the labels, one class number per row; every worker passes its own copy, which must hash the same',
    )
    .option(
      '--link-tls',
      "encrypt the workers' TCP links with TLS (each worker makes a certificate at start; the others pin its fingerprint)",
      false,
    );
  // The flags that write one job setting, made from the settings' table (src/job/fields.ts); train's are added above.
  addJobSettingOptions(cmd, RUN_SETTINGS);
  return addWanOptions(addDiscoverOptions(addIceOptions(cmd)));
}

/** `run`'s options from commander's values, the model's recipe already applied (runRecipe). */
function runOptionsFrom(
  cmd: Command,
  raw: Record<string, unknown>,
  recipe: Recipe | undefined,
  extension: RunExtension,
): RunOptions {
  const parsed = parseTrainOptions(raw);
  return {
    ...parsed,
    modelOptions: modelOptionsWithSizes(parsed, parseModelOptions(raw.modelOptions)),
    np: intOption(raw.np, '-np', 1, 64),
    timeline: raw.timeline as string | undefined,
    port: intOption(raw.port, '--port', 0, 65535),
    host: String(raw.host),
    servePage: Boolean(raw.servePage),
    extraPeers: intOption(raw.extraPeers, '--extra-peers', 0, 1000),
    fp16: Boolean(raw.fp16),
    settings: runSettings(cmd, raw, recipe),
    ...elasticOptions(raw),
    tls: readTlsFiles(raw.tlsCert as string | undefined, raw.tlsKey as string | undefined),
    ice: iceFromFlags(raw),
    discover: raw.discover as string | undefined,
    discoverIntervalMs: raw.discoverIntervalMs as number | undefined,
    wan: parseWanOptions(raw),
    aggregation: parseAggregationOption(raw.aggregation),
    workerCommand: extension.workerCommand,
    labels: raw.labels as string | undefined,
    labelColumn: raw.labelColumn as string | undefined,
    linkTls: Boolean(raw.linkTls),
  };
}

/**
 * The job settings of run's flags made from the settings' table (those given a value other than the default), with
 * the model's recipe (recipes.ts: the words drawn with replacement, the warm-up from zero) and the settings every run's
 * job carries, checked where the launcher bounds them more tightly than the job does.
 */
function runSettings(cmd: Command, raw: Record<string, unknown>, recipe: Recipe | undefined): RunSettings {
  // The ones every job carries come first, as the job has always listed them; a given flag's value is the same.
  return {
    elastic: raw.elastic === true,
    scaleLr: raw.scaleLr === true,
    lrSchedule: raw.lrSchedule === 'cosine' ? 'cosine' : 'constant',
    warmupSteps: intOption(raw.warmupSteps, '--warmup-steps', 0),
    warmupFrom: recipe ? 'zero' : 'base',
    sampling: recipe?.sampling ?? 'epochs',
    backwardPassesPerStep: intOption(raw.backwardPasses, '--backward-passes', 1, 1024),
    ...givenJobSettings(cmd, RUN_SETTINGS),
  };
}

/** --data FILE.csv|.npy|.json: the table (and labels file) hashed into `o`, and its split, for the progress bar. */
function launcherTable(o: RunOptions): TableSplit | undefined {
  if (!isTable(o.data)) {
    if (o.labels !== undefined || o.labelColumn !== undefined)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        '--labels and --label-column go with --data FILE.csv|.npy|.json (a table of rows)',
      );
    return undefined;
  }
  if (o.model === 'transformer' || o.model === 'cnn')
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--data ${o.data} is a table of rows: train the mlp or a model file on it, not the ${o.model}`,
    );
  const split = loadTable(o.data, { labels: o.labels, labelColumn: o.labelColumn });
  o.tableSha256 = fileSha256(o.data, '--data');
  if (o.labels !== undefined) o.labelsSha256 = fileSha256(o.labels, '--labels');
  return split;
}

/** The job's own data, for tabs that join (a tab cannot read this machine's files; the server hands them over by hash). */
function jobFiles(o: RunOptions): Uint8Array[] {
  // Only a job a tab may join hands its text over: the launcher need not hold a large text otherwise.
  if (o.text !== undefined) return o.extraPeers > 0 || o.servePage ? [loadText(o.text).bytes] : [];
  if (o.tableSha256 === undefined || o.data === undefined) return [];
  return [readFileSync(o.data), ...(o.labels !== undefined ? [readFileSync(o.labels)] : [])];
}

async function launch(o: RunOptions): Promise<number> {
  // By adapter unless named (runtime-choice.ts): Node on a hardware GPU, Deno on a CPU adapter.
  const decision = await decideRuntime(o.runtime);
  const runtime = decision.runtime;
  const say = (line: string) => (o.json ? printLine(line, stderr) : printLine(line));
  if (decision.auto) await say(runtimeLine(decision));
  const { job, choice, trainExamples } = await prepareJob(o);
  const server = await startJobServer(o, job, runtime, say);
  const totalSteps = o.steps ?? o.epochs * batchCount(trainExamples, o.shares?.globalBatch ?? o.np * o.batch);
  const bar = progressBar(o, totalSteps);
  const progress = new RunProgress(o, runtime, totalSteps, bar, say);
  const { workers } = progress;
  const addWorker = () => void workers.push(startWorker(workers.length, server, job, o, runtime, progress.onLine));
  for (let i = 0; i < o.np; i++) addWorker();
  if (o.discover) await discoverWorkers(o, progress, addWorker);

  // If one worker dies, the others notice through the ring and stop on their own; the launcher only waits.
  const codes = await Promise.all(workers.map((w) => w.exit!));
  bar?.stop();
  for (const l of progress.lastLines) await say(l);
  if (o.servePage) {
    // The demo: training is over, but whoever opened the page can still look at the job.
    await say(`ringtrain: training finished; the page stays up at ${server.url} until Ctrl-C`);
    await untilSignal();
  }
  await server.close();
  const { recovery, departures } = progress;
  return reportRun({ o, workers, codes, recovery, runtime, say, departures, model: choice.model });
}

/**
 * The job the workers join, and how many examples an epoch has (for the progress bar only: the workers count
 * their own steps from the data they load).
 */
async function prepareJob(o: RunOptions) {
  // The launcher reads the text once, for its hash: the job names it, and every worker's copy must match.
  // It also tokenizes it into the cache before any worker starts, so the workers read one cache instead of
  // each tokenizing the text at once.
  const text = o.text ? await cachedTokens(textSource(o.text), o.tokenizer) : undefined;
  if (text) {
    o.textSha256 = text.cache.header.sourceSha256;
    text.cache.close();
  }
  // A table likewise: read once here, so a missing label column stops the launch, and hashed for the job.
  const table = launcherTable(o);
  const choice = await useModelOption(o.model, o.modelOptions);
  const job = jobSpecFor(o, choice);
  const trainExamples = table
    ? table.train.count
    : text
      ? trainingTokens(text.cache.length) - (o.context ?? DEFAULT_TEXT_CONTEXT)
      : o.model === 'transformer'
        ? WORD_COUNT - WORD_VALIDATION_COUNT
        : MNIST_TRAIN;
  return { job, choice, trainExamples };
}

/** The signaling server with the one job, and the lines that say where it is. */
async function startJobServer(
  o: RunOptions,
  job: JobSpec,
  runtime: 'node' | 'deno',
  say: (line: string) => Promise<void>,
): Promise<RunningServer> {
  // A worker's exit closes its socket at once, so heartbeats only catch a hung one; a first step that
  // compiles the transformer's kernels on a busy CPU adapter keeps a worker's event loop for many seconds.
  const server = await startServer({
    port: o.port,
    host: o.host,
    jobs: [job],
    staticDir: o.servePage ? undefined : null,
    tls: o.tls,
    ice: o.ice,
    missedHeartbeats: RUN_MISSED_HEARTBEATS,
    files: jobFiles(o),
  });
  await say(
    `ringtrain: job ${job.id} on ${server.url}: ${o.np} ${runtime} workers, ${o.model} with ${o.optimizer} (lr ${o.lr}, batch ${o.batch} per peer${o.fp16 ? ', fp16 gradients' : ''})`,
  );
  if (o.servePage) {
    await say(
      `ringtrain: open ${server.url}/?job=${encodeURIComponent(job.id)}#token=${encodeURIComponent(job.token)} in a browser to watch${o.extraPeers > 0 ? ' and join' : ''}`,
    );
  }
  return server;
}

/** --discover: workers started and stopped as the script says, until training is over. */
async function discoverWorkers(o: RunOptions, progress: RunProgress, addWorker: () => void): Promise<void> {
  const { workers } = progress;
  await keepWorkersDiscovered({
    script: o.discover!,
    intervalMs: o.discoverIntervalMs!,
    minNp: o.minNp!,
    maxNp: o.maxNp!,
    workers: () => workers,
    start: addWorker,
    stop: (w) => void (w as WorkerState).child.kill('SIGTERM'),
    // Finished (a worker's own error is a loss the others carry on without), or nobody left.
    over: () => workers.some((w) => w.result && !w.result.stopped_by) || workers.every((w) => w.exited),
    say: (line) => void progress.notice(line),
  });
  // Training is over: a worker still starting has no ring left to join.
  for (const w of workers) {
    if (w.training || w.exited) continue;
    w.retired = true;
    w.child.kill('SIGTERM');
  }
}
