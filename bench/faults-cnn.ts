/**
 * The bar for untrusted peers, on the CNN: a 4-peer elastic job on a
 * real server, real Deno workers over real WebRTC, one of them started with a
 * chaos entry's `--chaos` fault (test/support/chaos/faults.ts) at step `--fault-step`. For each fault, one JSON line:
 * who named the faulty worker, whether the server ejected it, how many steps
 * the ring completed with it after it started misbehaving, the survivors'
 * final accuracy against honest runs with the same seed (all 4 peers honest,
 * and the 3 survivors alone), and the honest workers' peak memory (the flood's
 * bound). Honest runs come first, in the same invocation.
 *
 * Contributions the doubt rule left out of a step (event `contribution-left-out`, as
 * seen by honest worker 0) are counted in every run, honest ones included.
 *
 * `--checks LIST` says which step checks the jobs run: a comma-separated list of check sets,
 * each `default` (what an elastic job runs unasked: the verified allreduce and the doubt
 * rule), `none` (every optional check off), or checks joined by `+`, the others off:
 * `verify` (the verified allreduce), `doubt` (the doubt rule), `direction` (the direction
 * rules), e.g. `--checks default,none,verify,doubt,direction`. Every fault (and the honest
 * runs) runs once per check set; each JSON line carries its set. Default `doubt`, the
 * bench's set before it took others; `--doubt-rule false` is `--checks default`.
 * `--no-honest` skips the honest runs (when a set's honest figures are already measured).
 *
 * Jobs fix the global batch at 4 × `--batch`, as `ringtrain run -np 4 --elastic` does
 * (docs/SHARES.md): the survivors take the steps the honest 4-peer run takes, so the gap
 * measures what the fault cost and not a smaller batch after the re-form. `--per-peer`
 * gives each peer `--batch` instead (the ring's batch shrinks with it), as a job made by
 * hand without `globalBatch` does.
 *
 * `--log DIR` keeps each worker's stderr and timeline (`worker --timeline`) in DIR, one
 * pair per run and worker: what to read when a run ends otherwise than expected.
 *
 * The lying faults (`lie-nan`, `lie-scale:K`: honest norm and sketches published, poison sent)
 * are caught by `verify` alone; the flip (`scale:-20`) by `doubt` or `direction`. Every fault
 * runs on an elastic job, so a survivor run that did not finish shows up as
 * `survivors_finished` below the step count and `stopped_by` naming why.
 *
 * Usage: sh scripts/in-netns.sh npx tsx bench/faults-cnn.ts [--steps 60] [--fault-step 3 | --fault-steps 0,3] [--seed 7]
 * [--batch 8] [--checks doubt] [--no-honest] [--per-peer] [--log DIR]
 *        [--faults nan,scale:1e30,scale:-20,garbage-frames,forge-abort,flood-tags,lie-nan,lie-scale:-20]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from '../server/index.ts';
import { CHAOS_ENTRY, startDenoWorker, type TestWorker } from '../test/support/workers.ts';
import { args, opt } from './args.ts';

const steps = Number(opt('steps', '60'));
const faultSteps = opt('fault-steps', opt('fault-step', '3')).split(',').map(Number);
const seed = Number(opt('seed', '7'));
const batch = Number(opt('batch', '8'));
/** The step checks a check set names, as the job hyperparameters that turn them on or off. */
const CHECKS = { verify: 'verify', doubt: 'doubtRule', direction: 'directionRules' } as const;
type CheckSets = { name: string; hyperparameters: Partial<Record<(typeof CHECKS)[keyof typeof CHECKS], boolean>> }[];
const checkSets: CheckSets = opt('checks', opt('doubt-rule', 'true') === 'true' ? 'doubt' : 'default')
  .split(',')
  .map((name) => {
    // 'default': what an elastic job runs unasked; otherwise exactly the checks named, the others off.
    if (name === 'default') return { name, hyperparameters: {} };
    const parts = name === 'none' ? [] : name.split('+');
    const unknown = parts.filter((p) => !Object.hasOwn(CHECKS, p));
    if (unknown.length)
      throw new Error(
        `--checks: unknown check '${unknown[0]}' in '${name}' (default, none, or ${Object.keys(CHECKS).join(', ')} joined by +)`,
      );
    return {
      name,
      hyperparameters: Object.fromEntries(Object.entries(CHECKS).map(([check, key]) => [key, parts.includes(check)])),
    };
  });
const withHonest = !args.includes('--no-honest');
const perPeer = args.includes('--per-peer');
/** The whole ring's examples per step when it is fixed: the 4-peer job's. */
const GLOBAL_BATCH = 4 * batch;
const faults = opt(
  'faults',
  'nan,scale:1e30,scale:-20,garbage-frames,forge-abort,flood-tags,lie-nan,lie-scale:-20',
).split(',');
const RUN_LIMIT_MS = 30 * 60_000;
const logDir = opt('log', '');
if (logDir) mkdirSync(logDir, { recursive: true });
/** Where a run that ends with an error leaves its recovery files: out of the working tree. */
const recoveryDir = mkdtempSync(join(tmpdir(), 'faults-cnn-'));
/** Extra worker arguments: its recovery file's place, and its timeline in the log directory. */
const timelineArgs = (id: string, name: string): string[] => [
  '--recovery',
  join(recoveryDir, `${id}-${name}.safetensors`),
  ...(logDir ? ['--timeline', join(logDir, `${id}-${name}.timeline.json`)] : []),
];

if (process.env.RINGTRAIN_NETNS !== '1')
  throw new Error('run inside scripts/in-netns.sh: WebRTC stays inside a private namespace');

/** Resident memory of a process in MB, or 0 once it is gone. */
/** Passes a worker's stderr on, line by line, tagged with its run and name: the bench's progress. */
function relay(w: TestWorker, tag: string): TestWorker {
  w.child.stderr!.on('data', (d: string) => {
    for (const line of String(d).split('\n'))
      if (line && !line.includes('XDG_RUNTIME_DIR') && !line.includes('--token is visible'))
        process.stderr.write(`${tag} ${line}\n`);
  });
  return w;
}

function rssMb(pid: number | undefined): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

interface Run {
  honest: TestWorker[];
  faulty?: TestWorker;
  codes: (number | null)[];
  /** Peak resident memory of each honest worker (MB). */
  peakMb: number[];
}

async function run(
  id: string,
  checks: CheckSets[number],
  honestPeers: number,
  fault?: string,
  faultStep = 0,
): Promise<Run> {
  const size = honestPeers + (fault ? 1 : 0);
  const job = {
    id,
    token: `${id}-token`,
    config: {
      model: 'cnn',
      optimizer: 'sgd',
      hyperparameters: {
        lr: 0.05,
        momentum: 0.9,
        seed,
        steps,
        elastic: true,
        lrSchedule: 'cosine',
        ...checks.hyperparameters,
        ...(perPeer ? {} : { globalBatch: GLOBAL_BATCH }),
      },
      batchPerPeer: batch,
      minPeers: 2,
      startPeers: size,
      maxPeers: size,
    },
  };
  // The server's default heartbeat: a forged abort is judged once no one left within heartbeat ×
  // (missed + 2), 25 s; a 2 s heartbeat dropped workers whose event loop a loaded machine held.
  const server = await startServer({ jobs: [job], staticDir: null });
  try {
    const honest = [...Array(honestPeers).keys()].map((i) =>
      relay(
        startDenoWorker(server.url, job, ['--name', `honest-${i}`, ...timelineArgs(id, `honest-${i}`)]),
        `[${id} honest-${i}]`,
      ),
    );
    // The faulty worker joins last, so the survivors hold ranks 0..2 as in the 3-peer honest run.
    if (fault)
      await waitFor(() => (server.jobInfo(id)?.size ?? 0) >= honestPeers, 'the honest workers to join the job', honest);
    const faulty = fault
      ? relay(
          startDenoWorker(
            server.url,
            job,
            ['--name', 'faulty', '--chaos', `${fault}@step:${faultStep}`, ...timelineArgs(id, 'faulty')],
            CHAOS_ENTRY,
          ),
          `[${id} faulty]`,
        )
      : undefined;
    const all = faulty ? [...honest, faulty] : honest;
    const peakMb = honest.map(() => 0);
    const codes: (number | null | undefined)[] = all.map(() => undefined);
    all.forEach((w, i) => void w.exit.then((c) => (codes[i] = c)));
    let said = Date.now();
    await waitFor(
      () => {
        honest.forEach((w, i) => (peakMb[i] = Math.max(peakMb[i], rssMb(w.child.pid))));
        if (Date.now() - said > 30_000) {
          said = Date.now();
          process.stderr.write(`[${id}] steps so far: ${all.map((w) => w.steps.at(-1)?.step ?? '-').join(' ')}\n`);
        }
        return codes.every((c) => c !== undefined);
      },
      'every worker to exit',
      all,
    );
    if (logDir)
      all.forEach((w, i) =>
        writeFileSync(join(logDir, `${id}-${w === faulty ? 'faulty' : `honest-${i}`}.stderr`), w.stderr),
      );
    return { honest, faulty, codes: codes as (number | null)[], peakMb };
  } finally {
    await server.close();
  }
}

async function waitFor(pred: () => boolean, what: string, workers: TestWorker[]): Promise<void> {
  const end = Date.now() + RUN_LIMIT_MS;
  while (!pred()) {
    if (Date.now() > end) {
      for (const w of workers) w.child.kill('SIGKILL');
      throw new Error(
        `timed out waiting for ${what}:\n${workers.map((w) => `rank ${w.rank}: ${w.stderr.slice(-1500)}`).join('\n')}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

const accuracy = (r: Run) => r.honest.map((w) => w.result?.test_accuracy ?? NaN);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const points = (a: number, b: number) => Number(((a - b) * 100).toFixed(2));
const maxOf = (xs: number[]) => Number(Math.max(...xs).toFixed(0));

/** What the doubt rule left out, as honest worker 0 saw it: `rank@step` entries. */
const leftOut = (r: Run) =>
  r.honest[0].events.filter((e) => e.event === 'contribution-left-out').map((e) => `${e.peer}@${e.step}`);
/** Why each honest worker stopped early, if it did: its result's stop, or the last line it wrote before exiting with an error. */
const stoppedBy = (r: Run) =>
  r.honest.map((w, i) => {
    if (w.result?.stopped_by)
      return `${w.result.stopped_by.code}: ${String(w.result.stopped_by.message ?? '').slice(0, 200)}`;
    if (r.codes[i] === 0) return null;
    return (
      w.stderr
        .split('\n')
        .filter((l) => l.trim() && !l.includes('XDG_RUNTIME_DIR'))
        .at(-1)
        ?.slice(0, 200) ?? `exit ${r.codes[i]}`
    );
  });

for (const checks of checkSets) {
  const tag = (id: string) => (checkSets.length > 1 ? `${id}-${checks.name.replace(/[^a-z]/g, '')}` : id);
  let acc4 = NaN;
  let acc3 = NaN;
  if (withHonest) {
    const honest4 = await run(tag('honest-4'), checks, 4);
    const honest3 = await run(tag('honest-3'), checks, 3);
    acc4 = mean(accuracy(honest4));
    acc3 = mean(accuracy(honest3));
    console.log(
      JSON.stringify({
        bench: 'faults-cnn',
        run: 'honest',
        checks: checks.name,
        steps,
        seed,
        batch_per_peer: batch,
        global_batch: perPeer ? null : GLOBAL_BATCH,
        accuracy_4_peers: acc4,
        accuracy_3_peers: acc3,
        left_out_4_peers: leftOut(honest4),
        left_out_3_peers: leftOut(honest3),
        peak_rss_mb_4_peers: maxOf(honest4.peakMb),
        exit_codes: [...honest4.codes, ...honest3.codes],
      }),
    );
  }

  for (const faultStep of faultSteps)
    for (const fault of faults) {
      const r = await run(
        tag(`fault-${fault.replace(/[^a-z0-9]/gi, '')}-at-${faultStep}`),
        checks,
        3,
        fault,
        faultStep,
      );
      const bad = r.faulty!.rank;
      const namedBy = r.honest.filter((w) =>
        w.events.some((e) => e.event === 'peer-misbehaved' && e.peer === bad),
      ).length;
      const ejected = r.honest.some((w) =>
        w.events.some((e) => e.event === 'peer-left' && e.reason === 'ejected' && e.rank === bad),
      );
      // Steps the ring completed with the faulty worker in it after the fault's step (step events count completed
      // steps).
      const lastWith4 = Math.max(0, ...r.honest.flatMap((w) => w.steps.filter((s) => s.size === 4).map((s) => s.step)));
      const survivors = accuracy(r);
      const acc = mean(survivors);
      console.log(
        JSON.stringify({
          bench: 'faults-cnn',
          checks: checks.name,
          fault,
          fault_step: faultStep,
          named_by_honest: `${namedBy}/${r.honest.length}`,
          ejected,
          last_step_with_faulty: lastWith4,
          steps_to_ejection: Math.max(0, lastWith4 - faultStep),
          left_out: leftOut(r),
          survivors_finished: r.honest.map((w) => w.result?.steps ?? null),
          survivors_size: r.honest.map((w) => w.result?.size ?? null),
          survivor_accuracy: acc,
          gap_points_vs_3_honest: points(acc, acc3),
          gap_points_vs_4_honest: points(acc, acc4),
          peak_rss_mb_honest: maxOf(r.peakMb),
          exit_codes: r.codes,
          stopped_by: stoppedBy(r),
        }),
      );
    }
}
rmSync(recoveryDir, { recursive: true, force: true });
