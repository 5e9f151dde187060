/**
 * Host discovery for `ringtrain run --discover ./script`, after Horovod's
 * `--host-discovery-script`: the script prints one `host[:slots]` per line
 * (slots default to 1) and the sum of the slots is how many workers may run
 * now. The launcher polls it every few seconds and keeps the workers between
 * --min-np and --max-np: it starts workers when the answer grows and stops
 * the newest ones when it shrinks; the elastic ring re-forms at the next step.
 *
 * ringtrain starts workers on this machine only (there is no ssh step, as in
 * Horovod), so every host a script names must be this machine. On Kubernetes
 * worker pods join the job by themselves (docs/KUBERNETES.md).
 */
import { execFile } from 'node:child_process';
import { hostname } from 'node:os';
import process from 'node:process';
import type { Command } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

export interface DiscoveredHost {
  host: string;
  slots: number;
}

/** How long one run of the script may take before the answer counts as a failure. */
const SCRIPT_TIMEOUT_MS = 10_000;
/** Horovod polls its discovery script about once a second; a few seconds keeps a loaded machine calm. */
export const DEFAULT_DISCOVER_INTERVAL_S = 3;

/** Parses the script's output: blank lines and `#` comments are skipped; anything else malformed is an error naming the line. */
export function parseHostList(text: string): DiscoveredHost[] {
  const hosts: DiscoveredHost[] = [];
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([A-Za-z0-9._-]+)(?::(\d+))?$/.exec(line);
    const slots = m?.[2] === undefined ? 1 : Number(m[2]);
    if (!m || !Number.isSafeInteger(slots) || slots < 1) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `discovery script, line ${i + 1}: expected host or host:slots (slots a whole number from 1), got ${JSON.stringify(raw)}.`,
      );
    }
    hosts.push({ host: m[1], slots });
  }
  return hosts;
}

const LOCAL_NAMES = new Set(['localhost', '127.0.0.1', '::1', 'ip6-localhost']);

/** The workers this machine may run per the script's hosts; a host that is not this machine is an error. */
export function localSlots(hosts: readonly DiscoveredHost[], thisHost: string = hostname()): number {
  let sum = 0;
  for (const h of hosts) {
    if (!LOCAL_NAMES.has(h.host) && h.host !== thisHost && h.host !== thisHost.split('.')[0]) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `discovery script named host ${JSON.stringify(h.host)}, but ringtrain run starts workers on this machine only (${thisHost}); print localhost:<slots>, or on a cluster let worker pods join the job themselves (docs/KUBERNETES.md).`,
      );
    }
    sum += h.slots;
  }
  return sum;
}

/** Runs the script once and returns the number of local slots it offers. */
export function discoverSlots(script: string): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(script, [], { timeout: SCRIPT_TIMEOUT_MS, encoding: 'utf8' }, (err, out, errText) => {
      if (err) {
        const code = (err as NodeJS.ErrnoException).code;
        const why =
          code === 'EACCES'
            ? 'it is not executable (chmod +x it)'
            : code === 'ENOENT'
              ? 'no such file'
              : err.killed
                ? `it ran past ${SCRIPT_TIMEOUT_MS / 1000} s`
                : `it failed (${String(errText).trim().split('\n').pop() || err.message})`;
        reject(new RingtrainError(ErrorCode.InvalidArgument, `discovery script ${script}: ${why}.`));
        return;
      }
      try {
        resolve(localSlots(parseHostList(out)));
      } catch (e) {
        reject(e);
      }
    });
  });
}

/** Local workers, at most, when --max-np is not given (the cap of -np). */
const MAX_LOCAL_WORKERS = 64;
/** How long the launcher waits for the script to offer --min-np slots before it gives up (Horovod's elastic timeout). */
const FIRST_ANSWER_DEADLINE_MS = 600_000;

export function addDiscoverOptions(cmd: Command): Command {
  return cmd
    .option(
      '--discover <script>',
      "elastic run sized by a host-discovery script (Horovod's contract: it prints host[:slots] lines; the slots summed are the workers to run), polled every few seconds",
    )
    .option(
      '--discover-interval <seconds>',
      `with --discover: seconds between two runs of the script (default ${DEFAULT_DISCOVER_INTERVAL_S})`,
    );
}

function wholeNumber(raw: unknown, flag: string, min: number, max: number): number {
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}.`,
    );
  return v;
}

/**
 * The options --discover implies: elastic, --min-np (default 1), --max-np
 * (default ${MAX_LOCAL_WORKERS}), and -np from the script's first answer that
 * offers at least --min-np slots (or -np as given).
 */
export async function discoverOptions(
  raw: Record<string, unknown>,
  say: (line: string) => void = (l) => void process.stderr.write(`${l}\n`),
): Promise<Record<string, unknown>> {
  const script = String(raw.discover);
  const minNp = raw.minNp === undefined ? 1 : wholeNumber(raw.minNp, '--min-np', 1, MAX_LOCAL_WORKERS);
  const maxNp = raw.maxNp === undefined ? MAX_LOCAL_WORKERS : wholeNumber(raw.maxNp, '--max-np', minNp, 1024);
  const seconds = raw.discoverInterval === undefined ? DEFAULT_DISCOVER_INTERVAL_S : Number(raw.discoverInterval);
  if (!Number.isFinite(seconds) || seconds < 0.1 || seconds > 3600)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--discover-interval must be seconds from 0.1 to 3600, got ${JSON.stringify(raw.discoverInterval)}.`,
    );
  let np =
    raw.np === undefined
      ? undefined
      : clampWorkers(wholeNumber(raw.np, '-np', 1, MAX_LOCAL_WORKERS), minNp, Math.min(maxNp, MAX_LOCAL_WORKERS));
  const deadline = Date.now() + FIRST_ANSWER_DEADLINE_MS;
  let waited = false;
  while (np === undefined) {
    // A script that fails on its first run is a mistake to report now, not to retry.
    const slots = await discoverSlots(script);
    if (slots >= minNp) np = clampWorkers(slots, minNp, Math.min(maxNp, MAX_LOCAL_WORKERS));
    else if (Date.now() > deadline)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `discovery script ${script} offered ${slots} slots for ${FIRST_ANSWER_DEADLINE_MS / 60_000} minutes; --min-np is ${minNp}.`,
      );
    else {
      if (!waited) say(`ringtrain: discovery offers ${slots} slots; waiting for --min-np ${minNp}`);
      waited = true;
      await new Promise((r) => setTimeout(r, seconds * 1000));
    }
  }
  return { elastic: true, np, minNp, maxNp, discoverIntervalMs: Math.round(seconds * 1000) };
}

/** Between --min-np and --max-np. */
export function clampWorkers(slots: number, minNp: number, maxNp: number): number {
  return Math.min(maxNp, Math.max(minNp, slots));
}

export interface ScaledWorker {
  /** True once the process is gone. */
  exited: boolean;
  /** True once the worker took a step in the ring. */
  training: boolean;
  rank?: number;
  /** Set here when the loop stops it: a retired worker's exit is no failure. */
  retired?: boolean;
}

const running = (w: ScaledWorker) => !w.exited && !w.retired;

export interface DiscoveryLoop {
  script: string;
  intervalMs: number;
  minNp: number;
  maxNp: number;
  /** The workers started so far (the loop reads it each round). */
  workers(): readonly ScaledWorker[];
  start(): void;
  stop(w: ScaledWorker): void;
  /** True once training is over: the loop ends and starts nothing more. */
  over(): boolean;
  say(line: string): void;
}

/**
 * Which running workers to stop to get down to `target`: first those still
 * starting (they hold nothing), then the newest; rank 0 last, since the ring's
 * weights and evaluation come from it.
 */
export function workersToStop<W extends ScaledWorker>(workers: readonly W[], target: number): W[] {
  const alive = workers.filter(running);
  const order = alive
    .map((w, i) => ({ w, i }))
    .sort(
      (a, b) =>
        Number(a.w.training) - Number(b.w.training) || Number(a.w.rank === 0) - Number(b.w.rank === 0) || b.i - a.i,
    );
  return order.slice(0, Math.max(0, alive.length - target)).map((x) => x.w);
}

/** Polls the script until `over()`; resolves then. A failed poll keeps the current workers and says why. */
export async function keepWorkersDiscovered(
  loop: DiscoveryLoop,
  waitMs: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<void> {
  let lastTarget = loop.workers().filter(running).length;
  let lastError = '';
  while (!loop.over()) {
    await waitMs(loop.intervalMs);
    if (loop.over()) break;
    let slots: number;
    try {
      slots = await discoverSlots(loop.script);
      lastError = '';
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      if (msg !== lastError) loop.say(`${msg} Keeping the ${lastTarget} workers running.`);
      lastError = msg;
      continue;
    }
    if (loop.over()) break;
    const target = clampWorkers(slots, loop.minNp, loop.maxNp);
    const alive = loop.workers().filter(running).length;
    if (target !== lastTarget) loop.say(`discovery: ${slots} slots, ${target} workers (was ${lastTarget})`);
    lastTarget = target;
    for (let n = alive; n < target; n++) loop.start();
    for (const w of workersToStop(loop.workers(), target)) {
      w.retired = true;
      loop.stop(w);
    }
  }
}
