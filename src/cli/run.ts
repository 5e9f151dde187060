/**
 * `ringtrain run -np N`: the launcher, like `horovodrun -np N`. Starts a
 * signaling server with one job, starts N local workers (Node or Deno) that
 * join it, shows one progress bar for the whole ring, and gathers the
 * results. It accepts every option of `ringtrain train`.
 *
 * Workers report through JSON lines on stdout (`ringtrain worker --events`);
 * the launcher never looks inside the ring, it only listens.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import process from 'node:process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import { preflightCheckpoints } from '../checkpoint/preflight.node.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { forEachLine } from '../core/lines.node.ts';
import { batchCount } from '../data/batches.ts';
import { MNIST_TRAIN } from '../data/mnist.ts';
import { WORD_COUNT, WORD_VALIDATION_COUNT } from '../data/words.ts';
import { FINISHED } from '../distributed/session.ts';
import { stallReporter } from '../distributed/stall.ts';
import { mergeTraces, type TraceEvent } from '../distributed/timeline.ts';
import type { JobSpec } from '../signaling/protocol.ts';
import { startServer, type RunningServer } from '../../server/index.ts';
import { untilSignal } from '../../server/serve.ts';
import { cliCommand, decideRuntime, printLine, runtimeLine, stderr, stderrIsTTY } from './host.node.ts';
import { jobModelFields, type ModelChoice, useModelOption } from './model-option.ts';
import { TOKEN_ENV, readTlsFiles } from './secrets.node.ts';
import { addIceOptions, iceFromFlags } from './ice-flags.node.ts';
import { type Recipe, withRecipe } from './recipes.ts';
import { commandStatus } from './status.ts';
import { addTrainOptions, parseTrainOptions, type TrainOptions } from './train-options.ts';
import { addDiscoverOptions, discoverOptions, keepWorkersDiscovered, type ScaledWorker } from './discovery.node.ts';
import { addWanOptions, parseWanOptions, wanHyperparameters, type WanOptions } from './wan-options.ts';
import { addShareOptions, parseShareOptions, shareHyperparameters, type ShareOptions } from './share-options.ts';

interface RunOptions extends TrainOptions {
  np: number;
  timeline?: string;
  port: number;
  host: string;
  servePage: boolean;
  extraPeers: number;
  fp16: boolean;
  elastic: boolean;
  /** Elastic: the ring goes on while it has at least this many peers (Horovod's --min-np). */
  minNp?: number;
  /** Elastic: at most this many peers (Horovod's --max-np); default np + extra peers. */
  maxNp?: number;
  /** Elastic: seconds the ring trains on without its signaling server before it stops. */
  serverWait?: number;
  /** Elastic: a host-discovery script polled every `discoverIntervalMs` (discovery.node.ts). */
  discover?: string;
  discoverIntervalMs?: number;
  scaleLr: boolean;
  lrSchedule: 'constant' | 'cosine';
  warmupSteps: number;
  /** From the model's recipe (recipes.ts): the words are drawn with replacement, the warm-up starts from zero. */
  sampling: 'epochs' | 'replacement';
  warmupFrom: 'base' | 'zero';
  backwardPasses: number;
  tls?: ReturnType<typeof readTlsFiles>;
  ice?: ReturnType<typeof iceFromFlags>;
  /** --compression and local SGD (absent: as --fp16 says). */
  wan?: WanOptions;
  /** --global-batch and --balance (share-options.ts). */
  shares?: ShareOptions;
}

/** Heartbeats (5 s) a local worker may miss before the server drops it: a minute. */
const RUN_MISSED_HEARTBEATS = 12;

interface WorkerState extends ScaledWorker {
  index: number;
  child: ChildProcess;
  rank?: number;
  result?: Record<string, unknown>;
  stderrTail: string[];
  exit?: Promise<number>;
}

function intOption(raw: unknown, flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${flag} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}.`);
  }
  return v;
}

export function runCommand(): Command {
  const cmd = new Command('run').description('start a signaling server and N local workers, and train together (like horovodrun -np N)');
  addTrainOptions(cmd)
    .option('--np <n>', 'number of local workers (also -np, as horovodrun spells it); with --discover, the script decides')
    .option('--timeline <path>', 'write a Chrome-trace timeline of all ranks here (open it in Perfetto)')
    .option('--port <n>', 'port of the signaling server (0 picks a free one)', '0')
    .option('--host <addr>', 'address the server listens on', '127.0.0.1')
    .option('--serve-page', 'serve the page, print the address where a browser can watch or join, and keep serving after training until Ctrl-C', false)
    .option('--extra-peers <n>', 'places for peers beyond the local workers (browser tabs)', '0')
    .option('--fp16', 'send gradients as float16 (half the bytes)', false)
    .option('--elastic', 'peers may join and leave mid-run (browser tabs, volunteers): the ring re-forms instead of stopping', false)
    .option('--min-np <n>', 'with --elastic: keep training while at least this many peers are left (default 1: a lone survivor finishes the run)')
    .option('--max-np <n>', 'with --elastic: at most this many peers (default -np plus --extra-peers)')
    .option('--server-wait <seconds>', 'with --elastic: how long the ring trains on without its signaling server, reconnecting, before it stops with a recovery checkpoint (default 60)')
    .addOption(new Option('--lr-schedule <kind>', 'constant, or cosine: anneal the learning rate to zero by the last step').choices(['constant', 'cosine']).default('constant'))
    .option('--scale-lr', 'scale the learning rate by the number of peers (with --warmup-steps)', false)
    .option('--warmup-steps <n>', 'steps of linear learning-rate warm-up when --scale-lr', '0')
    .addOption(new Option('--backward-passes <n>', 'local passes summed before each allreduce').default('1'))
    .option('--tls-cert <path>', 'serve https and wss with this PEM certificate (it must name 127.0.0.1, where the workers connect)')
    .option('--tls-key <path>', 'PEM private key of --tls-cert');
  addWanOptions(addDiscoverOptions(addIceOptions(addShareOptions(cmd)))).action(async (given: Record<string, unknown>) => {
      // --discover: the script's first answer is -np, and the run is elastic.
      const discovered = given.discover === undefined ? given : { ...given, ...(await discoverOptions(given)) };
      if (discovered.np === undefined) throw new RingtrainError(ErrorCode.InvalidArgument, 'ringtrain run needs -np N (how many local workers), or --discover SCRIPT.');
      const { raw, recipe } = runRecipe(cmd, discovered);
      const o: RunOptions = {
        ...parseTrainOptions(raw),
        np: intOption(raw.np, '-np', 1, 64),
        timeline: raw.timeline as string | undefined,
        port: intOption(raw.port, '--port', 0, 65535),
        host: String(raw.host),
        servePage: Boolean(raw.servePage),
        extraPeers: intOption(raw.extraPeers, '--extra-peers', 0, 1000),
        fp16: Boolean(raw.fp16),
        elastic: Boolean(raw.elastic),
        ...elasticOptions(raw),
        scaleLr: Boolean(raw.scaleLr),
        lrSchedule: raw.lrSchedule === 'cosine' ? 'cosine' : 'constant',
        warmupSteps: intOption(raw.warmupSteps, '--warmup-steps', 0),
        sampling: recipe?.sampling ?? 'epochs',
        warmupFrom: recipe ? 'zero' : 'base',
        backwardPasses: intOption(raw.backwardPasses, '--backward-passes', 1, 1024),
        tls: readTlsFiles(raw.tlsCert as string | undefined, raw.tlsKey as string | undefined),
        ice: iceFromFlags(raw),
        discover: raw.discover as string | undefined,
        discoverIntervalMs: raw.discoverIntervalMs as number | undefined,
        wan: parseWanOptions(raw),
      };
      o.shares = parseShareOptions(raw, o, cmd.getOptionValueSource('batch') === 'cli');
      if (raw.globalBatch !== undefined) o.batch = Math.ceil(o.shares.globalBatch! / o.np); // what a peer takes at launch
      // Before the server and the workers: a wrong --resume or an unwritable --save stops the launch here.
      preflightCheckpoints(o);
      commandStatus.exitCode = await launch(o);
    });
  return cmd;
}

/**
 * The model's recipe (recipes.ts) for every option left at its default, as
 * `train` applies it, with its batch split over the peers: the transformer's
 * 256 words per step become 256 / N per peer (rounded; --batch sets it).
 */
export function runRecipe(cmd: Command, given: Record<string, unknown>): { raw: Record<string, unknown>; recipe: Recipe | undefined } {
  const { raw, recipe } = withRecipe(cmd, given);
  if (!recipe) return { raw, recipe };
  const np = intOption(given.np, '-np', 1, 64);
  const defaulted = (key: string) => [undefined, 'default'].includes(cmd.getOptionValueSource(key));
  if (defaulted('batch')) raw.batch = String(Math.max(1, Math.round(Number(raw.batch) / np)));
  if (defaulted('warmupSteps')) raw.warmupSteps = String(recipe.warmupSteps);
  return { raw, recipe };
}

/** --min-np, --max-np and --server-wait: checked against -np, and only with --elastic. */
function elasticOptions(raw: Record<string, unknown>): Pick<RunOptions, 'minNp' | 'maxNp' | 'serverWait'> {
  const given = (['minNp', 'maxNp', 'serverWait'] as const).filter((k) => raw[k] !== undefined);
  if (!raw.elastic) {
    if (given.length > 0) throw new RingtrainError(ErrorCode.InvalidArgument, `--${given[0].replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} only applies to an elastic run; add --elastic or drop it.`);
    return {};
  }
  const np = intOption(raw.np, '-np', 1, 64);
  const extra = intOption(raw.extraPeers ?? 0, '--extra-peers', 0, 1000);
  const minNp = raw.minNp === undefined ? 1 : intOption(raw.minNp, '--min-np', 1, np);
  const maxNp = raw.maxNp === undefined ? np + extra : intOption(raw.maxNp, '--max-np', np, 1024);
  const serverWait = raw.serverWait === undefined ? undefined : intOption(raw.serverWait, '--server-wait', 0, 86_400);
  return { minNp, maxNp, serverWait };
}

export function jobSpecFor(o: RunOptions, model: ModelChoice = { model: o.model }): JobSpec {
  const hyperparameters: Record<string, number | string | boolean> = {
    lr: o.lr,
    momentum: o.momentum,
    weightDecay: o.weightDecay,
    seed: o.seed,
    epochs: o.epochs,
    compression: o.fp16 ? 'fp16' : 'none',
    elastic: o.elastic,
    scaleLr: o.scaleLr,
    lrSchedule: o.lrSchedule,
    warmupSteps: o.warmupSteps,
    warmupFrom: o.warmupFrom,
    sampling: o.sampling,
    backwardPassesPerStep: o.backwardPasses,
  };
  if (o.wan) Object.assign(hyperparameters, wanHyperparameters(o.wan));
  if (o.shares) Object.assign(hyperparameters, shareHyperparameters(o.shares));
  if (o.steps !== undefined) hyperparameters.steps = o.steps;
  if (o.evalLimit !== undefined) hyperparameters.evalLimit = o.evalLimit;
  if (o.serverWait !== undefined) hyperparameters.serverWaitMs = o.serverWait * 1000;
  // An elastic job waits once for all -np workers (so an unbroken run is the same as a fixed one),
  // then goes on with as few as --min-np: a survivor of a crash carries the run to its end.
  const peers = o.elastic
    ? { minPeers: o.minNp ?? 1, maxPeers: o.maxNp ?? o.np + o.extraPeers, startPeers: o.np }
    : { minPeers: o.np, maxPeers: o.np + o.extraPeers };
  Object.assign(hyperparameters, jobModelFields(model));
  return {
    id: `run-${randomUUID().slice(0, 8)}`,
    token: randomUUID().replaceAll('-', ''),
    // A model file travels as an absolute path: workers may start elsewhere.
    config: { model: model.identity ? resolve(o.model) : o.model, optimizer: o.optimizer, hyperparameters, batchPerPeer: o.batch, ...peers },
  };
}

function startWorker(index: number, server: RunningServer, job: JobSpec, o: RunOptions, runtime: 'node' | 'deno', onLine: (w: WorkerState, msg: Record<string, unknown>) => void): WorkerState {
  const [exe, ...pre] = cliCommand(runtime);
  // The token goes by environment, never argv (which `ps` shows to everyone).
  const args = [...pre, 'worker', '--server', server.url, '--job', job.id, '--name', `${runtime}-${index}`, '--events', '--runtime', runtime];
  if (o.save) args.push('--save', o.save);
  if (o.resume) args.push('--resume', o.resume);
  if (o.overwrite) args.push('--overwrite');
  if (o.timeline) args.push('--timeline', `${o.timeline}.part${index}`);
  if (o.data) args.push('--data', o.data);
  const env: NodeJS.ProcessEnv = { ...process.env, [TOKEN_ENV]: job.token };
  // A self-signed certificate is its own authority: the workers trust it (Node and Deno read these).
  if (o.tls) Object.assign(env, { NODE_EXTRA_CA_CERTS: o.tls.certPath, DENO_CERT: o.tls.certPath });
  const child = spawn(exe, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const w: WorkerState = { index, child, stderrTail: [], exited: false, training: false };
  forEachLine(child.stdout!, (line) => {
    if (!line.startsWith('{')) return;
    try {
      onLine(w, JSON.parse(line));
    } catch {
      // not one of ours
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    for (const line of chunk.split('\n')) if (line.trim() && !line.includes('XDG_RUNTIME_DIR')) w.stderrTail.push(line);
    if (w.stderrTail.length > 40) w.stderrTail.splice(0, w.stderrTail.length - 40);
  });
  w.exit = new Promise<number>((resolve) => {
    child.on('error', (err) => {
      w.stderrTail.push(`cannot start ${exe}: ${err.message}`);
      resolve(127);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  }).then((code) => {
    w.exited = true;
    return code;
  });
  return w;
}

async function launch(o: RunOptions): Promise<number> {
  // By adapter unless named (runtime-choice.ts): Node on a hardware GPU, Deno on a CPU adapter.
  const decision = await decideRuntime(o.runtime);
  const runtime = decision.runtime;
  const say = (line: string) => (o.json ? printLine(line, stderr) : printLine(line));
  if (decision.auto) await say(runtimeLine(decision));
  const job = jobSpecFor(o, await useModelOption(o.model));
  // A worker's exit closes its socket at once, so heartbeats only catch a hung one; a first step that
  // compiles the transformer's kernels on a busy CPU adapter keeps a worker's event loop for many seconds.
  const server = await startServer({ port: o.port, host: o.host, jobs: [job], staticDir: o.servePage ? undefined : null, tls: o.tls, ice: o.ice, missedHeartbeats: RUN_MISSED_HEARTBEATS });
  await say(`ringtrain: job ${job.id} on ${server.url}: ${o.np} ${runtime} workers, ${o.model} with ${o.optimizer} (lr ${o.lr}, batch ${o.batch} per peer${o.fp16 ? ', fp16 gradients' : ''})`);
  if (o.servePage) {
    await say(`ringtrain: open ${server.url}/?job=${encodeURIComponent(job.id)}#token=${encodeURIComponent(job.token)} in a browser to watch${o.extraPeers > 0 ? ' and join' : ''}`);
  }

  // For the progress bar only: the workers count their own steps from the data they load.
  const stepsPerEpoch = batchCount(o.model === 'transformer' ? WORD_COUNT - WORD_VALIDATION_COUNT : MNIST_TRAIN, o.shares?.globalBatch ?? o.np * o.batch);
  const totalSteps = o.steps ?? o.epochs * stepsPerEpoch;
  const useBar = !o.json && stderrIsTTY;
  const bar = useBar ? new SingleBar({ stream: stderr, format: '{bar} {value}/{total} steps | {sps} steps/s | loss {loss} | allreduce {mbps} MB/s', hideCursor: true }, Presets.shades_classic) : undefined;
  bar?.start(totalSteps, 0, { sps: '-', loss: '-', mbps: '-' });
  const started = Date.now();
  let rank0Bytes = 0;
  const lastLines: string[] = [];

  const workers: WorkerState[] = [];
  // Every survivor hears of a departure: one line per peer that left, from whoever tells first.
  const departed = new Set<string>();
  let lastDeparture: { who: string; at: number } | undefined;
  let ringSize = o.np;
  // The newest recovery checkpoint a worker saved (ranks may stop a step apart, or on an error of their own).
  let recovery: { step: number; path: string } | undefined;
  // Straight to stderr even with a bar on screen: a stalled ring is news now, not after the run.
  const sayStall = stallReporter((line) => void printLine(`${bar ? '\n' : ''}ringtrain: ${line}`, stderr));
  // Without a bar (a log, a pipe), about ten progress lines per run instead.
  const progressEvery = Math.max(1, Math.ceil(totalSteps / 10));
  let lastProgressLine = 0;
  let ringShown = false;
  const onLine = (w: WorkerState, msg: Record<string, unknown>): void => {
    if (msg.event === 'joined') w.rank = Number(msg.rank);
    else if (msg.event === 'step') {
      w.rank = Number(msg.rank); // ranks move when an elastic ring re-forms
      w.training = true;
    }
    if (msg.event === 'joined' && !ringShown && workers.length === o.np && workers.every((x) => x.rank !== undefined)) {
      // Which process holds which rank: what a person needs to read a stall or a lost rank.
      ringShown = true;
      const byRank = [...workers].sort((a, b) => a.rank! - b.rank!);
      void say(`ringtrain: ring of ${o.np}: ${byRank.map((x) => `rank ${x.rank} ${runtime}-${x.index} (pid ${x.child.pid})`).join(', ')}`);
    }
    if (msg.event === 'step' && Number(msg.size) !== ringSize) {
      // The first step of a re-formed ring: say so, and how long the ring was down.
      ringSize = Number(msg.size);
      const after = lastDeparture ? `, ${((Date.now() - lastDeparture.at) / 1000).toFixed(1)} s after ${lastDeparture.who} left` : '';
      lastDeparture = undefined;
      void printLine(`${bar ? '\n' : ''}ringtrain: the ring re-formed with ${ringSize} peers at step ${Number(msg.step)}${after}`, stderr);
    }
    if (msg.event === 'step' && w.rank === 0) {
      const step = Number(msg.step);
      rank0Bytes = Number(msg.bytesSent);
      const secs = (Date.now() - started) / 1000;
      bar?.update(step, { sps: (step / secs).toFixed(2), loss: Number(msg.loss).toFixed(4), mbps: (rank0Bytes / 1e6 / secs).toFixed(2) });
      if (!bar && step >= lastProgressLine + progressEvery) {
        lastProgressLine = step - (step % progressEvery);
        void say(`step ${step}/${totalSteps} on ${Number(msg.size)} peers, loss ${Number(msg.loss).toFixed(4)}, ${(step / secs).toFixed(2)} steps/s`);
      }
    } else if (msg.event === 'evaluate' && w.rank === 0) {
      const line = `epoch ${Number(msg.epoch) + 1}: step ${msg.step}, ${evaluationText(o.model, Number(msg.testAccuracy), Number(msg.testLoss))}`;
      if (bar) lastLines.push(line);
      else void say(line);
    } else if (msg.event === 'stall') {
      // Every rank notices a silent peer: one line per stalled set of ranks, now and then.
      sayStall({ rank: Number(msg.rank), name: String(msg.name), waitingFor: (msg.waitingFor as number[]) ?? [], waitedMs: Number(msg.waitedMs) });
    } else if (msg.event === 'peer-left') {
      // A peer that finished, or a server shutting down, is no news.
      const finished = msg.reason === 'left' && msg.detail === FINISHED;
      if (finished || msg.reason === 'server-closing' || departed.has(String(msg.peerId))) return;
      departed.add(String(msg.peerId));
      const who = `${msg.name ? String(msg.name) : `peer ${String(msg.peerId)}`} (rank ${Number(msg.rank)})`;
      lastDeparture ??= { who, at: Date.now() };
      const why = `${String(msg.reason)}${msg.detail ? `: ${String(msg.detail)}` : ''}`;
      void printLine(`${bar ? '\n' : ''}ringtrain: ${who} left the job (${why}); ${o.elastic ? 'the others re-form the ring without it' : 'the ring stops'}`, stderr);
    } else if (msg.event === 'recovery') {
      if (!recovery || Number(msg.step) > recovery.step) recovery = { step: Number(msg.step), path: String(msg.path) };
    } else if (msg.event === 'result') {
      w.result = msg;
    }
  };
  const addWorker = () => void workers.push(startWorker(workers.length, server, job, o, runtime, onLine));
  for (let i = 0; i < o.np; i++) addWorker();
  if (o.discover) {
    await keepWorkersDiscovered({
      script: o.discover,
      intervalMs: o.discoverIntervalMs!,
      minNp: o.minNp!,
      maxNp: o.maxNp!,
      workers: () => workers,
      start: addWorker,
      stop: (w) => void (w as WorkerState).child.kill('SIGTERM'),
      // Finished (a worker's own error is a loss the others carry on without), or nobody left.
      over: () => workers.some((w) => w.result && !w.result.stopped_by) || workers.every((w) => w.exited),
      say: (line) => void printLine(`${bar ? '\n' : ''}ringtrain: ${line}`, stderr),
    });
    // Training is over: a worker still starting has no ring left to join.
    for (const w of workers) {
      if (w.training || w.exited) continue;
      w.retired = true;
      w.child.kill('SIGTERM');
    }
  }

  // If one worker dies, the others notice through the ring and stop on their own; the launcher only waits.
  const codes = await Promise.all(workers.map((w) => w.exit!));
  bar?.stop();
  for (const l of lastLines) await say(l);
  if (o.servePage) {
    // The demo: training is over, but whoever opened the page can still look at the job.
    await say(`ringtrain: training finished; the page stays up at ${server.url} until Ctrl-C`);
    await untilSignal();
  }
  await server.close();

  const results = workers.map((w) => w.result).filter((r): r is Record<string, unknown> => !!r);
  const rank0 = results.find((r) => r.rank === 0) ?? results[0];
  if (o.timeline) writeTimeline(o.timeline, workers.length);

  // Elastic: workers that died are expected losses as long as the ring that remained finished.
  const ended = o.elastic && rank0 && !rank0.stopped_by ? workers.filter((w, i) => codes[i] !== 0 && !w.result) : [];
  const retired = ended.filter((w) => w.retired);
  const lost = ended.filter((w) => !w.retired);
  const failed = workers.filter((w, i) => codes[i] !== 0 && !ended.includes(w) && !(w.retired && !w.training));
  for (const w of lost) await printLine(`ringtrain: worker ${w.index} left the run early (exit ${codes[w.index]}); the others finished without it`, stderr);
  if (failed.length > 0 || !rank0) {
    for (const w of failed) {
      const why = w.result?.stopped_by as { message?: string } | undefined;
      await printLine(`ringtrain: worker ${w.index}${w.rank !== undefined ? ` (rank ${w.rank})` : ''} exited with ${codes[w.index]}${why?.message ? `: ${why.message}` : ''}`, stderr);
      if (!w.result) for (const l of w.stderrTail.slice(-8)) await printLine(`  | ${l}`, stderr);
    }
    if (recovery && existsSync(recovery.path)) {
      await printLine(`ringtrain: the last completed step (${recovery.step}) is saved in ${recovery.path}; resume with: ringtrain run -np ${o.np} --resume ${recovery.path} …`, stderr);
    } else if (results.some((r) => r.stopped_by)) {
      const why = results.find((r) => r.no_recovery)?.no_recovery;
      await printLine(`ringtrain: no recovery checkpoint was written${why ? `: ${why}` : ''}`, stderr);
    }
  }
  if (rank0) {
    const summary = {
      test_accuracy: rank0.test_accuracy,
      // The words workload's metric: nats per character over the validation words (test_loss for the others).
      val_loss: rank0.test_loss,
      steps: rank0.steps,
      size: rank0.size,
      samples_per_s: rank0.samples_per_s,
      tokens_per_s: rank0.tokens_per_s,
      allreduce_bytes: results.reduce((s, r) => s + Number(r.allreduce_bytes ?? 0), 0),
      train_seconds: rank0.train_seconds,
      runtime,
      adapter: rank0.adapter,
      gpu_waits: rank0.gpu_waits ?? null,
      model: o.model,
      optimizer: o.optimizer,
      batch_per_peer: o.batch,
      global_batch: o.shares?.globalBatch ?? o.np * o.batch,
      fp16: o.fp16,
      ok: failed.length === 0,
      lost_workers: lost.map((w) => w.index),
      retired_workers: retired.map((w) => w.index),
      workers_started: workers.length,
      stopped_by: results.find((r) => r.stopped_by)?.stopped_by ?? null,
      timeline: o.timeline ?? null,
      saved: o.save ?? null,
    };
    if (o.json) await printLine(JSON.stringify(summary));
    else {
      // A run that stopped early may have no evaluation: say so rather than print 0%.
      const accuracy = typeof summary.test_accuracy === 'number' ? evaluationText(o.model, summary.test_accuracy, Number(summary.val_loss)) : 'not evaluated';
      await say(`${summary.ok ? 'done' : 'stopped'}: ${summary.steps} steps on ${summary.size} peers, ${accuracy}, ${Math.round(Number(summary.samples_per_s))} samples/s`);
    }
  }
  return failed.length === 0 && rank0 ? 0 : 1;
}

/** An evaluation in words: a classifier's accuracy; the transformer's validation loss and perplexity (what the page shows too). */
function evaluationText(model: string, accuracy: number, loss: number): string {
  if (model !== 'transformer') return `test accuracy ${(accuracy * 100).toFixed(2)}%`;
  return `validation loss ${loss.toFixed(4)} nats/char (perplexity ${Math.exp(loss).toFixed(2)})`;
}

function writeTimeline(path: string, parts: number): void {
  const traces: TraceEvent[][] = [];
  for (let i = 0; i < parts; i++) {
    const part = `${path}.part${i}`;
    if (!existsSync(part)) continue;
    traces.push(JSON.parse(readFileSync(part, 'utf8')) as TraceEvent[]);
    rmSync(part);
  }
  writeFileSync(path, JSON.stringify(mergeTraces(traces)));
}
