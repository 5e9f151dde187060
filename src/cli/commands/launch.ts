/**
 * `ringtrain launch -np N SCRIPT [ARGS…]`: horovodrun for your own program.
 * Starts a signaling server with one job of N places and N local processes
 * running SCRIPT (TypeScript or JavaScript, under Node through tsx, or Deno).
 * Each finds the job in its environment (RINGTRAIN_SERVER, RINGTRAIN_JOB,
 * RINGTRAIN_TOKEN, RINGTRAIN_LOCAL_RANK, RINGTRAIN_NAME), so `await init()`
 * from ringtrain or ringtrain/tfjs needs no arguments. Every output line
 * comes back prefixed with its worker's rank once the ring gave it one
 * (`[rank 1] epoch 2 …`), and with the launcher's number for it before
 * (`[worker 0] loading …`). The exit status is 0 when every worker exits 0.
 *
 * With --elastic the job is elastic (src/tfjs/elastic.ts): a worker that dies
 * is a loss the others carry on without, and the run succeeds when at least
 * --min-np workers finish. With --timeline every worker records its ring's
 * events (init() in ringtrain/tfjs reads RINGTRAIN_TIMELINE) and the launcher
 * merges them into one Chrome trace.
 *
 * `ringtrain run` trains ringtrain's own models; this runs a user's (the
 * TF.js example: examples/tfjs-mnist.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import process from 'node:process';
import { Command, Option } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { forEachLine } from '../../core/lines.node.ts';
import type { JobSpec } from '../../signaling/protocol.ts';
import type { Hyperparameters } from '../../job/settings.ts';
import { DEFAULT_STATIC_DIR, startServer } from '../../../server/index.ts';
import {
  JOB_ENV,
  LOCAL_RANK_ENV,
  LOCAL_SIZE_ENV,
  NAME_ENV,
  SERVER_ENV,
  TIMELINE_ENV,
  TOKEN_ENV,
} from '../../tfjs/env.ts';
import { PAGE_MISSING_HINT } from '../../core/package-root.node.ts';
import { prefixedChildEnv, prefixedLine, spawnFailure } from '../child-output.node.ts';
import { runtimeExecutable } from '../host.node.ts';
import { elasticOptions } from '../options/run-options.node.ts';
import { writeTimeline } from '../launcher/run-workers.node.ts';
import { commandStatus } from '../status.ts';
import { FINISHED } from '../../distributed/session/session.ts';

interface LaunchOptions {
  np: string;
  runtime: 'node' | 'deno';
  host: string;
  port: string;
  tabs: string;
  tabModel: string;
  static?: string;
  elastic: boolean;
  minNp?: string;
  maxNp?: string;
  serverWait?: string;
  timeline?: string;
}

export function launchCommand(): Command {
  return new Command('launch')
    .description(
      'start a signaling server and N local processes of your script that join one job (like horovodrun -np N python train.py)',
    )
    .requiredOption('--np <n>', 'number of processes (also -np)')
    .addOption(new Option('--runtime <name>', 'what runs the script').choices(['node', 'deno']).default('node'))
    .option('--host <addr>', 'address the server listens on', '127.0.0.1')
    .option('--port <n>', 'port of the signaling server (0 picks a free one)', '0')
    .option(
      '--tabs <n>',
      'also wait for this many browser tabs to join (the server then serves the page and prints its link)',
      '0',
    )
    .option(
      '--tab-model <name>',
      'what a joining tab trains, with the same arguments as the script (the page knows tfjs-mnist: examples/tfjs-mnist.ts)',
      'tfjs-mnist',
    )
    .option('--static <dir>', 'folder of the built page, for --tabs (default: the one in the package)')
    .option(
      '--elastic',
      'workers may leave (die) and join mid-run: the ring re-forms instead of stopping (the script trains with hvd.elastic.run)',
      false,
    )
    .option(
      '--min-np <n>',
      'with --elastic: the ring goes on while at least this many peers are left, and the run succeeds when this many workers finish (default 1)',
    )
    .option('--max-np <n>', 'with --elastic: at most this many peers (default -np plus --tabs)')
    .option(
      '--server-wait <seconds>',
      'with --elastic: how long the ring trains on without its signaling server (default 60)',
    )
    .option('--timeline <path>', 'write a Chrome-trace timeline of all ranks here (open it in Perfetto)')
    .argument('<script>', 'the program every worker runs (it calls init() from ringtrain/tfjs)')
    .argument('[args...]', 'arguments passed to every worker')
    .allowUnknownOption()
    .action(async (script: string, args: string[], o: LaunchOptions) => {
      commandStatus.exitCode = await launch(script, args, o);
    });
}

const LAUNCH_HEARTBEAT_MS = 10_000;
/** A joining tab learns from the job how long a busy TF.js rank may stay silent (the scripts pass their own to init()). */
const TAB_PEER_TIMEOUT_MS = 120_000;
/** A worker's exit closes its socket at once; the heartbeat only catches a hung one, so minutes are fine. */
const LAUNCH_MISSED_HEARTBEATS = 30;

/** The name worker `i` joins under (NAME_ENV): how the launcher finds its rank. */
const workerName = (i: number): string => `worker-${i}`;

/**
 * Each worker's rank, from the job's membership as the server changes it
 * (ServerOptions.onMembership): the server tells the launcher before it tells
 * the worker, so any line a worker prints after init() returns is prefixed
 * with its rank. Ranks move when an elastic ring re-forms; a worker that left
 * keeps the last rank it held, for its final lines.
 */
class WorkerRanks {
  private readonly last = new Map<number, number>();
  /** Each worker's process id, by the launcher's number for it. */
  readonly pids: (number | undefined)[] = [];
  constructor(private readonly announce: (line: string) => void) {}

  /** A new membership: which worker holds which rank, said each time it changes (what a person needs to read a loss, or to kill one). */
  update(peers: readonly { rank: number; name?: string }[]): void {
    for (const p of peers) {
      const i = Number(/^worker-(\d+)$/.exec(p.name ?? '')?.[1] ?? NaN);
      if (!Number.isInteger(i) || this.last.get(i) === p.rank) continue;
      this.last.set(i, p.rank);
      this.announce(
        `[launch] worker ${i}${this.pids[i] === undefined ? '' : ` (pid ${this.pids[i]})`} is rank ${p.rank}`,
      );
    }
  }

  /** `[rank R]` once the worker has a rank, `[worker I]` (the launcher's own number for it) before. */
  prefix(i: number): string {
    const r = this.last.get(i);
    return r === undefined ? `[worker ${i}]` : `[rank ${r}]`;
  }

  /** The worker with the last rank it held, as a person looks for it in the lines above. */
  who(i: number): string {
    const r = this.last.get(i);
    return `worker ${i} (${r === undefined ? 'no rank yet' : `rank ${r}`})`;
  }

  /** The worker and how it ended. */
  describe(i: number, code: number): string {
    const r = this.last.get(i);
    return `worker ${i} (${r === undefined ? 'no rank yet' : `rank ${r}`}, exit ${code})`;
  }
}

/**
 * Workers start in the launcher's folder with the script's arguments, so a file they name (a text,
 * a table) is there for every one of them. A tab gets the arguments too (the job's `args`), but
 * not this machine's files: its program (--tab-model) trains on data it downloads with the page.
 * An argument naming a file here would be a data set the workers read and the tabs never see, so
 * it is refused before anything starts.
 */
function refuseFileArguments(args: string[], tabModel: string): void {
  for (const arg of args) {
    const path = arg.startsWith('--') && arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : arg;
    if (path === '' || !existsSync(path) || !statSync(path).isFile()) continue;
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `launch --tabs: the script's argument ${arg} names a file on this machine, which a browser tab cannot read (a tab runs --tab-model ${tabModel} with the script's arguments, on the data the page downloads); drop --tabs to train on the file with local workers, or drop the argument`,
      { argument: arg },
    );
  }
}

/**
 * tsx's loader as this package resolves it (a dependency of ringtrain), so a worker finds it
 * whatever the layout of the user's node_modules; the bare name, resolved from the working
 * directory, where the runtime cannot say.
 */
function tsxLoader(): string {
  try {
    return import.meta.resolve('tsx');
  } catch {
    return 'tsx';
  }
}

function scriptCommand(runtime: 'node' | 'deno', script: string): [string, string[]] {
  if (runtime === 'deno') return [runtimeExecutable('deno'), ['run', '-A', '--quiet', script]];
  return [runtimeExecutable('node'), ['--import', tsxLoader(), script]];
}

async function launch(script: string, args: string[], o: LaunchOptions): Promise<number> {
  const { np, port, tabs, staticDir } = checkLaunch(script, args, o);
  const elastic = elasticOptions({
    elastic: o.elastic,
    np: o.np,
    extraPeers: tabs,
    minNp: o.minNp,
    maxNp: o.maxNp,
    serverWait: o.serverWait,
  });
  const job = launchJob(o, args, np + tabs, tabs > 0, elastic);
  // TF.js runs its ops synchronously (the CPU backend above all), so a worker's event loop can stay busy
  // for seconds and answer the server's heartbeats late: be lenient before calling it gone.
  const ranks = new WorkerRanks((line) => process.stdout.write(`${line}\n`));
  const server = await startServer({
    host: o.host,
    port,
    jobs: [job],
    staticDir,
    heartbeatMs: LAUNCH_HEARTBEAT_MS,
    missedHeartbeats: LAUNCH_MISSED_HEARTBEATS,
    onMembership: (_job, peers, change) => {
      // A ring's ranks change only when it re-forms: an elastic ring after a peer is lost or joins.
      // Peers that finish leave a ring that is done, and a fixed ring never re-forms.
      if (change.kind === 'leave' && (!o.elastic || change.reason === `left: ${FINISHED}`)) return;
      ranks.update(peers);
    },
  });
  // The token rides in the link's fragment, which the browser never sends to a server (as `ringtrain server` prints it).
  if (tabs > 0)
    process.stdout.write(
      `[launch] page ${server.url}/?job=${encodeURIComponent(job.id)}#token=${encodeURIComponent(job.token)}\n`,
    );
  const children: ChildProcess[] = [];
  const stop = () => children.forEach((c) => c.exitCode === null && c.signalCode === null && c.kill('SIGTERM'));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    const [exe, pre] = scriptCommand(o.runtime, script);
    const spawnOf: WorkerSpawn = {
      exe,
      argv: [...pre, ...args],
      np,
      timeline: o.timeline,
      serverUrl: server.url,
      job,
      ranks,
    };
    const codes = await Promise.all(Array.from({ length: np }, (_, i) => spawnWorker(spawnOf, i, children)));
    if (o.timeline) writeTimeline(o.timeline, np);
    return launchExitCode(codes, ranks, o.elastic ? elastic.minNp! : undefined);
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await server.close();
  }
}

/** The launch's counts and the page's folder, each checked before anything starts. */
function checkLaunch(
  script: string,
  args: string[],
  o: LaunchOptions,
): { np: number; port: number; tabs: number; staticDir: string | null } {
  const np = Number(o.np);
  if (!Number.isInteger(np) || np < 1 || np > 64)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--np must be a whole number from 1 to 64, got ${JSON.stringify(o.np)}.`,
    );
  const port = Number(o.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--port must be a port number (0 picks one), got ${JSON.stringify(o.port)}.`,
    );
  const tabs = Number(o.tabs);
  if (!Number.isInteger(tabs) || tabs < 0 || np + tabs > 64)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--tabs must be a whole number ≥ 0 with --np + --tabs at most 64, got ${JSON.stringify(o.tabs)}.`,
    );
  const staticDir = tabs > 0 ? (o.static ?? DEFAULT_STATIC_DIR) : null;
  if (staticDir !== null && !existsSync(staticDir))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `launch --tabs: no built page at ${staticDir}; ${PAGE_MISSING_HINT}, or give --static <dir>.`,
    );
  if (!existsSync(script))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `launch: no script at ${script}; give the path of the program every worker runs.`,
    );
  if (tabs > 0) refuseFileArguments(args, o.tabModel);
  return { np, port, tabs, staticDir };
}

/** The one job the workers (and tabs) join: `peers` of them, or with --elastic from --min-np to --max-np. */
function launchJob(
  o: LaunchOptions,
  args: string[],
  peers: number,
  withTabs: boolean,
  elastic: ReturnType<typeof elasticOptions>,
): JobSpec {
  const hyperparameters: Hyperparameters = withTabs ? { args: args.join(' '), peerTimeoutMs: TAB_PEER_TIMEOUT_MS } : {};
  if (o.elastic) hyperparameters.elastic = true;
  if (elastic.serverWait !== undefined) hyperparameters.serverWaitMs = elastic.serverWait * 1000;
  // An elastic job waits once for everyone it starts, then goes on with as few as --min-np.
  const sizes = o.elastic
    ? { minPeers: elastic.minNp!, maxPeers: elastic.maxNp!, startPeers: peers }
    : { minPeers: peers, maxPeers: peers };
  return {
    id: `launch-${randomUUID().slice(0, 8)}`,
    token: randomUUID().replaceAll('-', ''),
    // With tabs, the config tells the page what to run: the model it knows by name, with the script's arguments.
    config: {
      model: withTabs ? o.tabModel : 'user-script',
      optimizer: 'user',
      hyperparameters,
      batchPerPeer: 1,
      ...sizes,
    },
  };
}

/** What every worker's process shares: the command, the job and the launcher's view of ranks. */
interface WorkerSpawn {
  exe: string;
  argv: string[];
  np: number;
  timeline: string | undefined;
  serverUrl: string;
  job: JobSpec;
  ranks: WorkerRanks;
}

/** Starts worker i, its output prefixed with its rank; resolves to its exit code (127: it did not start). */
function spawnWorker(w: WorkerSpawn, i: number, children: ChildProcess[]): Promise<number> {
  const { ranks } = w;
  // The token goes by environment, never argv (which `ps` shows to everyone).
  const env: NodeJS.ProcessEnv = {
    ...prefixedChildEnv(process.env),
    [SERVER_ENV]: w.serverUrl,
    [JOB_ENV]: w.job.id,
    [TOKEN_ENV]: w.job.token,
    [LOCAL_RANK_ENV]: String(i),
    [LOCAL_SIZE_ENV]: String(w.np),
    [NAME_ENV]: workerName(i),
  };
  if (w.timeline) env[TIMELINE_ENV] = `${w.timeline}.part${i}`;
  const child = spawn(w.exe, w.argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  ranks.pids[i] = child.pid;
  // Which process is which worker: what a person needs to read a loss (and what a test kills).
  // No pid means it did not start; the error event says why.
  if (child.pid !== undefined) process.stdout.write(`[launch] worker ${i}: pid ${child.pid}\n`);
  forEachLine(child.stdout!, (line) => process.stdout.write(prefixedLine(ranks.prefix(i), line)));
  // The environment keeps Vulkan quiet; a worker that set XDG_RUNTIME_DIR badly itself is still filtered.
  forEachLine(child.stderr!, (line) => {
    if (!line.includes('XDG_RUNTIME_DIR is invalid')) process.stderr.write(prefixedLine(ranks.prefix(i), line));
  });
  return new Promise<number>((resolve) => {
    child.on('error', (err) => {
      process.stderr.write(`[launch] worker ${i} ${spawnFailure(w.exe, err)}\n`);
      resolve(127);
    });
    child.on('exit', (code, signal) => {
      // The launcher's line, not the worker's: its rank may be another worker's by now.
      if (signal) process.stderr.write(`[launch] ${ranks.who(i)} ended by ${signal}\n`);
      resolve(code ?? 128);
    });
  });
}

/** 0 when every worker finished, or (elastic, `minNp` given) enough did; else 1, naming the workers that failed. */
function launchExitCode(codes: number[], ranks: WorkerRanks, minNp: number | undefined): number {
  const failed = codes.map((c, i) => [i, c]).filter(([, c]) => c !== 0);
  const finished = codes.length - failed.length;
  const named = failed.map(([i, c]) => ranks.describe(i, c)).join(', ');
  if (minNp !== undefined && failed.length > 0 && finished >= minNp) {
    // Elastic: a worker that died (or failed on its own) is a loss the others carried on without.
    process.stderr.write(`ringtrain: ${named} left the run early; ${finished} finished without them\n`);
    return 0;
  }
  if (failed.length > 0) {
    process.stderr.write(`ringtrain: ${named} failed\n`);
    return 1;
  }
  return 0;
}
