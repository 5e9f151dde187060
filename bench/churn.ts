/**
 * The churn soak (issue 37): an elastic `server --job` with 3 Deno workers training the MLP over
 * real WebRTC; every `--every-ms` one member is SIGKILLed and a new worker joins (a candidate
 * until it has proved itself, server/candidates.ts), `--rounds` times. Then the job runs to its
 * `--steps` and every worker that stayed should exit 0 with the same `weights_hash`.
 *
 * Prints one JSON line: kills, joins, per round the time until the survivors trained in the
 * smaller ring and until the joiner trained in a full one, steps/s in the window before the churn
 * and during it, steps lost per event against that rate, each survivor's exit, steps and
 * weights_hash, whether they all agree, and every ejection and misbehaviour the workers saw.
 *
 * `--steps` must outlast the churn: at about 10 steps/s, 6 rounds of 12 s want about 1,500; 2,000 leaves room.
 * The job ending before the last round is reported (`rounds_done` below `rounds`).
 *
 * Usage: sh scripts/in-netns.sh npx tsx bench/churn.ts [--rounds 6] [--every-ms 12000] [--steps 2000]
 */
import { startServer } from '../server/index.ts';
import { Churn, churnJob, churnOutcome } from '../test/support/churn.ts';
import { killStartedWorkers } from '../test/support/workers.ts';
import { opt } from './args.ts';

const rounds = Number(opt('rounds', '6'));
const everyMs = Number(opt('every-ms', '12000'));
const steps = Number(opt('steps', '2000'));
const SIZE = 3;

/** The slowest alive worker's latest step. */
function slowestStep(churn: Churn): number {
  const trained = churn.alive().filter((w) => w.worker.steps.length > 0);
  return Math.min(...trained.map((w) => w.worker.steps.at(-1)!.step));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

const job = churnJob('churn', steps, SIZE);
const server = await startServer({ jobs: [job], staticDir: null });
try {
  const churn = new Churn(server, job, SIZE);
  await churn.start(180_000);
  // The steady rate of the full ring, over one cadence's window.
  const beforeFrom = slowestStep(churn);
  await sleep(everyMs);
  const stepsBefore = slowestStep(churn) - beforeFrom;
  const churnFrom = slowestStep(churn);
  const t0 = Date.now();
  for (let i = 0; i < rounds && !churn.ended(); i++) {
    await churn.round(everyMs * 5);
    await sleep(t0 + (i + 1) * everyMs - Date.now());
  }
  const churnMs = Date.now() - t0;
  const stepsDuring = churn.ended() ? null : slowestStep(churn) - churnFrom;
  await churn.finish(30 * 60_000);
  const outcome = churnOutcome(churn);
  const hashes = new Set(outcome.survivors.map((s) => s.weights_hash));
  const rateBefore = stepsBefore / (everyMs / 1000);
  console.log(
    JSON.stringify({
      bench: 'churn',
      rounds_asked: rounds,
      rounds_done: churn.rounds.length,
      every_ms: everyMs,
      job_steps: steps,
      steps_per_s_before: Number(rateBefore.toFixed(2)),
      steps_per_s_during: stepsDuring === null ? null : Number((stepsDuring / (churnMs / 1000)).toFixed(2)),
      steps_lost_per_event:
        stepsDuring === null ? null : Number(((rateBefore * (churnMs / 1000) - stepsDuring) / rounds).toFixed(1)),
      survivors_exit_0: outcome.survivors.every((s) => s.exit === 0),
      one_weights_hash: hashes.size === 1 && !hashes.has(null),
      ...outcome,
    }),
  );
} finally {
  killStartedWorkers();
  await server.close();
}
