/**
 * `ringtrain worker`: one peer of a job. Joins the job on the signaling
 * server, trains with the job's settings on this machine's GPU, averages
 * gradients with the other peers (TCP to workers that reach each other,
 * WebRTC to the rest: link-options.node.ts), and leaves. The launcher
 * (`ringtrain run`) starts N of these; anyone can start one by hand.
 *
 * With --events, stdout carries one JSON object per line (`{"event": …}`)
 * for the launcher; human-readable lines go to stderr.
 */
import { type ModelChoice, parseModelOptions, workerModel } from '../options/model-option.ts';
import { checkWorkerModelOptions, workerText } from '../options/text-option.node.ts';
import { workerTable } from '../options/table-option.node.ts';
import { writeFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { z } from 'zod';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { EventBus } from '../../core/events.ts';
import { stallReporter } from '../../distributed/observe/stall.ts';
import { preflightCheckpoints } from '../../checkpoint/preflight.node.ts';
import { checkResumeFits } from '../../distributed/train/resume-check.ts';
import { CheckpointSaver } from './checkpoint-saver.node.ts';
import { limitEvaluation, loadTrainingData } from '../options/training-data.node.ts';
import { trainConfigFromJob } from '../../distributed/train/job-config.ts';
import { FINISHED, type Session } from '../../distributed/session/session.ts';
import { init } from '../../distributed/session/session.node.ts';
import { TimelineRecorder } from '../../distributed/observe/timeline.ts';
import { trainAsPeer } from '../../distributed/train/peer.ts';
import { peerPrecision } from '../../distributed/train/mixed-precision.ts';
import { prepareTraining, type PreparedTraining } from '../../distributed/train/warm-up.ts';
import type { Communicator } from '../../comm/interface.ts';
import type { DistributedTrainArgs } from '../../distributed/train/trainer-types.ts';
import { acquireGpu } from '../../gpu/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { TcpLinkEndpoint } from '../../comm/tcp-link.node.ts';
import type { Aggregation } from '../../collectives/robust/robust-aggregate.ts';
import { workerSummary, type TrainingData } from './worker-summary.node.ts';
import { crc32 } from '../../checkpoint/crc32.ts';
import { currentRuntime, decideRuntime, printLine, reexecUnder, runtimeLine, stderr } from '../host.node.ts';
import { TOKEN_ENV, tokenFrom } from '../options/secrets.node.ts';
import { withRuntime } from '../runtime-choice.ts';
import { commandStatus } from '../status.ts';
import { refuseInitFromWithResume, RUNTIMES } from '../options/train-options.ts';
import type { Model } from '../../engine/model.ts';
import { flatFromHfGpt2 } from '../../checkpoint/hf-gpt2.ts';
import { loadHfWeights } from '../../checkpoint/hf-gpt2.node.ts';
import {
  checkJobAggregation,
  parseAggregationOption,
  WORKER_AGGREGATION_OPTION,
} from '../options/aggregation-option.ts';
import { addLinkOptions, LINK_TRANSPORTS, openLinkListener } from '../options/link-options.node.ts';

const WorkerOptionsSchema = z.object({
  server: z.string().min(1, { error: '--server needs the server address, like http://127.0.0.1:8080' }),
  job: z.string().min(1, { error: '--job needs a job id' }),
  token: z.string().min(1, { error: '--token needs the job token' }).optional(),
  tokenFile: z.string().min(1).optional(),
  name: z.string().max(128).optional(),
  runtime: z.enum(RUNTIMES).optional(),
  save: z.string().min(1).optional(),
  resume: z.string().min(1).optional(),
  initFrom: z.string().min(1, { error: '--init-from needs a file path' }).optional(),
  recovery: z.string().min(1).optional(),
  overwrite: z.boolean().default(false),
  timeline: z.string().min(1).optional(),
  data: z.string().min(1).optional(),
  connectTimeoutMs: z.coerce.number().int().min(1000).optional(),
  events: z.boolean().default(false),
  json: z.boolean().default(false),
  aggregation: z.string().min(1).optional(),
  precision: z.enum(['f32', 'f16-mixed']).optional(),
  model: z.string().min(1).optional(),
  text: z.string().min(1, { error: '--text needs a file path (or @brown)' }).optional(),
  modelOptions: z.string().optional(),
  labels: z.string().min(1, { error: '--labels needs a file path' }).optional(),
  labelColumn: z.string().min(1).optional(),
  transport: z.enum(LINK_TRANSPORTS).default('auto'),
  listen: z.string().min(1).optional(),
  advertise: z.string().min(1).optional(),
  linkTls: z.boolean().default(false),
});
type WorkerOptions = z.infer<typeof WorkerOptionsSchema> & { token: string };

/** The trainer's hooks a program that embeds the worker may set (trainer-types.ts). */
export type WorkerTrainHooks = Pick<DistributedTrainArgs, 'transformGradients' | 'transformContribution'>;

/**
 * How code that embeds `ringtrain worker` extends it (never set from the
 * command line): the shipped CLI passes none.
 */
export interface WorkerExtension {
  /**
   * Called once this worker holds its place in the ring, with the ring's
   * current communicator (a re-formed ring has a new one) and a line writer;
   * returns hooks for the trainer.
   */
  trainHooks?: (peer: { comm: () => Communicator; say: (line: string) => void }) => WorkerTrainHooks;
}

/** The worker's own flags (the job's settings come from the job). */
function addWorkerOptions(cmd: Command): Command {
  return addLinkOptions(
    cmd
      .description("join a job on a signaling server and train with the job's settings")
      .requiredOption('--server <url>', 'the signaling server, like http://127.0.0.1:8080')
      .requiredOption('--job <id>', 'job to join')
      .option('--token-file <path>', `read the job's token from this file (or set ${TOKEN_ENV})`)
      .option('--token <secret>', `the job's token (visible in ps: prefer ${TOKEN_ENV} or --token-file)`)
      .option('--name <name>', 'a name the other peers and the page show')
      .option(
        '--model <file>',
        "your copy of the job's model file (./my-model.ts), for a job that trains one; it is checked against the job's model before it is loaded. A worker never loads a file the server names",
      )
      .addOption(
        new Option(
          '--runtime <name>',
          `run under this runtime (${RUNTIMES.join('|')}); auto (default): Node on a hardware GPU, Deno without one`,
        ),
      )
      .option('--save <path>', 'rank 0 writes a checkpoint here after each epoch and at the end')
      .option('--resume <path>', 'rank 0 starts from this checkpoint and sends it to every rank')
      .option(
        '--init-from <file>',
        "rank 0 starts from these weights (a Hugging Face GPT-2 safetensors file) and the job's start gives them to every rank",
      )
      .option(
        '--recovery <path>',
        'if the run ends with an error, save the last completed step in a new file <path minus .safetensors>-step<N>.safetensors (default: <--save>.recovery-step<N>…, else ringtrain-recovery-step<N>…)',
      )
      .option('--timeline <path>', "write this rank's Chrome-trace events here (JSON array)")
      .option(
        '--text <file>',
        "your copy of the job's --text (a job that trains on a text); its SHA-256 must match the job's",
      )
      .option(
        '--model-options <json>',
        "the model's options; a job's own are used, and other ones given here are refused",
      )
      .option(
        '--data <dir>',
        "train on IDX files in this directory (MNIST/Fashion-MNIST names) instead of the bundled digits; every peer needs the same files. A job that trains on a table: your copy of its FILE.csv|.npy|.json, whose SHA-256 must match the job's",
      )
      .option(
        '--labels <file>',
        "your copy of the job's labels file (a table job with --labels); its SHA-256 must match the job's",
      )
      .option(
        '--label-column <name>',
        "the table's label column; the job's is used, and another one given here is refused",
      )
      .option(
        '--overwrite',
        '--save may replace a checkpoint of a later step (or a file that is not a checkpoint)',
        false,
      )
      .option(
        '--connect-timeout-ms <n>',
        'give up opening the data channels to the other peers after this long (default 30000)',
      )
      .option(...WORKER_AGGREGATION_OPTION)
      .addOption(
        new Option(
          '--precision <kind>',
          "train at this precision instead of the job's (f16-mixed needs the adapter's shader-f16); only in a job that lets peers mix precisions (run --mix-precisions), refused in any other",
        ).choices(['f32', 'f16-mixed']),
      )
      .option('--events', 'print progress as JSON lines on stdout (for the launcher)', false)
      .option('--json', 'print one JSON result line on stdout at the end', false),
  );
}

export function workerCommand(extension: WorkerExtension = {}): Command {
  return addWorkerOptions(new Command('worker')).action(async (raw: Record<string, unknown>) => {
    const parsed = WorkerOptionsSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new RingtrainError(ErrorCode.InvalidArgument, `${issue.message} (option --${String(issue.path[0])})`);
    }
    // The same arguments and environment go to the other runtime, which reads the token itself.
    // stdout may carry --events JSON lines: the runtime line goes to stderr.
    const decision = await decideRuntime(parsed.data.runtime);
    if (decision.auto) await printLine(runtimeLine(decision), stderr);
    if (decision.runtime !== currentRuntime()) {
      commandStatus.exitCode = await reexecUnder(decision.runtime, withRuntime(commandStatus.args, decision.runtime));
      return;
    }
    const token = tokenFrom(parsed.data, (line) => void printLine(line, stderr));
    if (!token) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the worker needs the job's token: set ${TOKEN_ENV}=… or give --token-file PATH`,
      );
    }
    const o = { ...parsed.data, token };
    commandStatus.exitCode = await runWorker(o, extension);
  });
}

type Say = (line: string) => Promise<void>;
type Emit = (obj: Record<string, unknown>) => Promise<void>;

/** What this process holds while it is a peer: its GPU, its TCP listener, its event bus and its line writers. */
interface WorkerContext {
  gpu: Gpu;
  tcp: TcpLinkEndpoint | undefined;
  bus: EventBus;
  resume: ReturnType<typeof preflightCheckpoints>;
  say: Say;
  emit: Emit;
}

/** What this worker brings to the ring, made between the server's welcome and the ring. */
interface Joined {
  session: Session;
  choice: ModelChoice;
  data: TrainingData;
  /** The transformer this worker trains, made before the ring (its kernels compiled there); the trainer takes it over. */
  prepared?: PreparedTraining;
}

async function runWorker(o: WorkerOptions, extension: WorkerExtension): Promise<number> {
  const say: Say = (line) => printLine(line, stderr);
  const emit: Emit = (obj) => (o.events ? printLine(JSON.stringify(obj)) : Promise.resolve());
  // Fail on a bad checkpoint, an unwritable --save or missing data before taking a place in the ring.
  refuseInitFromWithResume(o);
  const resume = preflightCheckpoints(o);
  const aggregation = parseAggregationOption(o.aggregation);
  // The job's model is known only once the server answers; --data and the page's image data are for the image models.
  // Listening first: a --listen address that is taken fails before the GPU is held.
  const tcp = await openLinkListener(o, (line) => void say(`[${o.name ?? 'worker'}] ${line}`));
  const gpu = await acquireGpu();
  const bus = new EventBus();
  const timeline = o.timeline ? new TimelineRecorder() : undefined;
  timeline?.attach(bus);
  reportRingEvents(bus, say, emit);
  const ctx: WorkerContext = { gpu, tcp, bus, resume, say, emit };
  let joined: Joined;
  try {
    joined = await joinJob(o, aggregation, ctx);
  } catch (err) {
    // Refused (or never let in): nothing of ours may keep this process alive.
    tcp?.close();
    gpu.destroy();
    throw err;
  }
  let leaveReason = 'stopped';
  try {
    const code = await trainInJob(o, extension, joined, ctx, () => void (leaveReason = FINISHED));
    return code;
  } finally {
    if (timeline && o.timeline) writeFileSync(o.timeline, JSON.stringify(timeline.traceEvents()));
    await joined.session.close(leaveReason);
    tcp?.close();
    gpu.destroy();
  }
}

/** The ring's news worth a line: a peer that broke the rules, a contribution left out, a stall, an admission probe. */
function reportRingEvents(bus: EventBus, say: Say, emit: Emit): void {
  const sayStall = stallReporter((line) => void say(line));
  bus.on((e) => {
    if (e.type === 'peer-misbehaved') {
      void say(`[rank ${e.rank}] rank ${e.peer} broke the rules: ${e.reason}`);
      void emit({ event: 'peer-misbehaved', rank: e.rank, peer: e.peer, reason: e.reason });
    }
    if (e.type === 'contribution-left-out')
      void emit({ event: 'contribution-left-out', rank: e.rank, peer: e.peer, step: e.step, reason: e.reason });
    if (e.type === 'admission-probe') {
      const { type: _, t: __, ...probe } = e;
      void emit({ event: 'admission-probe', ...probe });
    }
    if (e.type !== 'stall') return;
    sayStall(e);
    void emit({
      event: 'stall',
      rank: e.rank,
      name: e.name,
      waitingFor: e.waitingFor,
      waitedMs: Math.round(e.waitedMs),
    });
  });
}

/** Joins the job; every refusal happens between the server's welcome and the ring, and init then leaves the job. */
async function joinJob(o: WorkerOptions, aggregation: Aggregation | undefined, ctx: WorkerContext): Promise<Joined> {
  const { gpu, resume, say } = ctx;
  let joined!: Omit<Joined, 'session'>;
  const session = await init({
    tcp: ctx.tcp,
    server: o.server,
    job: o.job,
    token: o.token,
    name: o.name,
    connectTimeoutMs: o.connectTimeoutMs,
    events: ctx.bus,
    onNotice: (line) => void say(`[${o.name ?? 'worker'}] ${line}`),
    capabilities: {
      webgpu: true,
      adapter: gpu.info.description.slice(0, 256),
      fallbackAdapter: gpu.info.isFallbackAdapter,
    },
    beforeRing: async (job, settings) => {
      // First, before anything of the job's is read or run: the model, from this worker's own --model.
      const jobConfig = trainConfigFromJob(job.config, settings); // refused now if this peer cannot train the job
      jobConfig.precision = peerPrecision(job.id, settings.model, o.precision);
      checkWorkerModelOptions(job.id, parseModelOptions(o.modelOptions), jobConfig.modelOptions);
      const choice = await workerModel(job, settings.model, o.model, jobConfig.modelOptions);
      checkJobAggregation(aggregation, settings.reduce, job.id);
      const loaded = await loadTrainingData(
        job.config.model,
        o.data,
        workerText(job, settings.data, o.text),
        workerTable(job, settings.data, o) ?? {},
      );
      const data = { ...loaded, test: limitEvaluation(loaded.test, settings.data.evalLimit) };
      if (resume) await checkResumeFits(gpu, jobConfig, data.train, resume, o.resume!);
      // The transformer's kernels compile now, outside the ring: compiling blocks Deno's event loop for seconds.
      const prepared =
        job.config.model === 'transformer' ? await prepareTraining(gpu, jobConfig, data.train, data.test) : undefined;
      joined = { choice, data, prepared };
    },
  });
  return { session, ...joined };
}

/** Says who joined and what it trains, and from then on who left and why. */
async function announceJoin(joined: Joined, ctx: WorkerContext): Promise<void> {
  const { session } = joined;
  const { gpu, say, emit } = ctx;
  const { rank, size } = session;
  const config = trainConfigFromJob(session.job.config, session.settings);
  config.model = joined.choice.model;
  await say(
    `[rank ${rank}/${size}] joined job ${session.job.id} (${gpu.info.runtime} on ${gpu.info.description}); training ${config.model} with ${config.optimizer}, ${config.globalBatch ? `global batch ${config.globalBatch} shared ${config.balance === 'speed' ? 'by speed' : 'equally'}` : `batch ${config.batch} per peer`}${config.elastic ? ', elastic' : ''}`,
  );
  await emit({ event: 'joined', rank, size, runtime: gpu.info.runtime, adapter: gpu.info.description });
  // Who left and why, for the launcher's one line per departure (it hears it from every survivor).
  session.onPeerLeft((p) => {
    void emit({
      event: 'peer-left',
      peerId: p.peerId,
      rank: p.rank,
      name: p.name ?? null,
      reason: p.reason,
      detail: p.detail ?? null,
    });
    if ((p.reason === 'left' && p.detail === FINISHED) || p.reason === 'server-closing') return;
    void say(
      `[rank ${session.rank}] ${p.name ?? p.peerId} (rank ${p.rank}) left the job (${p.reason}${p.detail ? `: ${p.detail}` : ''})${config.elastic ? '; re-forming the ring without it' : ''}`,
    );
  });
}

/** Trains as one peer of the job and reports the result; 0 when the run finished, 3 when it was stopped. */
async function trainInJob(
  o: WorkerOptions,
  extension: WorkerExtension,
  joined: Joined,
  ctx: WorkerContext,
  finished: () => void,
): Promise<number> {
  const { session, data } = joined;
  const { say, emit } = ctx;
  tellStateDiffers(ctx.bus, (rank) => session.membership?.peers[rank]?.name, say, emit);
  let recoveryPath: string | null = null;
  // The CRC-32 of this rank's last handed-out weights: replicas that agree print the same number.
  let weightsCrc: number | null = null;
  // Its lines go to the launcher too (as events): a failed save is news to whoever runs the job.
  const saver = new CheckpointSaver(
    o,
    () => ({ job: session.job.id, rank: session.rank }),
    async (line) => {
      await say(`[rank ${session.rank}] ${line}`);
      await emit({ event: 'checkpoint-notice', rank: session.rank, line });
    },
  );
  await announceJoin(joined, ctx);
  const result = await trainAsPeer(session, {
    gpu: ctx.gpu,
    train: data.train,
    test: data.test,
    bus: ctx.bus,
    resume: ctx.resume,
    resumeName: o.resume,
    initialParams: o.initFrom ? initialWeights(o.initFrom) : undefined,
    prepared: joined.prepared,
    precision: o.precision,
    ...extension.trainHooks?.({
      comm: () => session.comm,
      say: (line) => void say(`[rank ${session.rank}] ${line}`),
    }),
    // A disk that fails keeps the run going: reported, kept in a fallback file, tried again next time.
    // Only with --save: without it rank 0 built a whole checkpoint (four copies of the weights) for nothing.
    onCheckpoint: o.save ? (c) => saver.save(c) : undefined,
    onRecovery: async (c, why) => {
      recoveryPath = saver.recover(c);
      const diverged = why.detail?.diverged === true;
      await emit({ event: 'recovery', rank: session.rank, step: c.step, path: recoveryPath, diverged });
      const what = diverged
        ? `step ${c.step}, the last one evaluated before the run diverged,`
        : `the last completed step (${c.step})`;
      await say(
        `[rank ${session.rank}] ${why.message} [${why.code}]; saved ${what} in ${recoveryPath}: resume with --resume ${recoveryPath}`,
      );
    },
    onWeights: (w) =>
      void (weightsCrc = crc32(new Uint8Array(w.params.buffer, w.params.byteOffset, w.params.byteLength))),
    onStep: (s) => void emit({ event: 'step', rank: session.rank, size: session.size, ...s }),
    onEvaluate: (e) => {
      void emit({ event: 'evaluate', rank: session.rank, ...e });
      if (session.rank === 0)
        void say(`epoch ${e.epoch + 1}: step ${e.step}, test accuracy ${(e.testAccuracy * 100).toFixed(2)}%`);
    },
  });
  const summary = workerSummary({ result, session, data, gpu: ctx.gpu, tcp: ctx.tcp, saver, recoveryPath, weightsCrc });
  if (!result.stoppedBy) finished();
  await emit({ event: 'result', ...summary });
  if (o.json) await printLine(JSON.stringify(summary));
  if (!result.stoppedBy) return 0;
  if (!recoveryPath)
    await say(
      `[rank ${result.rank}] stopped: ${result.stoppedBy.message}. No recovery checkpoint written: ${result.noRecovery ?? 'nothing to save'}.`,
    );
  return 3;
}

/** A minority the ring's state check found (state-agreement.ts), named with its peer name: on stderr, and to the launcher. */
function tellStateDiffers(bus: EventBus, nameOf: (rank: number) => string | undefined, say: Say, emit: Emit): void {
  bus.on((e) => {
    if (e.type !== 'state-differs') return;
    const name = nameOf(e.peer);
    void say(
      `[rank ${e.rank}] rank ${e.peer}${name ? ` (${name})` : ''} holds other weights or optimizer state than the majority at step ${e.step} (${e.hash.slice(0, 12)}… against ${e.majorityHash.slice(0, 12)}…); resyncing it from rank ${e.resyncFrom}`,
    );
    void emit({ event: 'state-differs', rank: e.rank, peer: e.peer, name: name ?? null, step: e.step });
  });
}

/** The first weights from a Hugging Face GPT-2 file, read only when asked for (by rank 0, which alone starts from them). */
function initialWeights(path: string): (model: Model) => Float32Array {
  return (model) => flatFromHfGpt2(loadHfWeights(path), model.layout, model.flatLength, path);
}
