/**
 * Churn on real processes (issue 37; bench/churn.ts is the soak at a 12 s cadence): an elastic job
 * with 3 Deno workers on a real server over real WebRTC (inside scripts/in-netns.sh). Twice, one
 * member is SIGKILLed and a new worker joins; the next kill comes once that joiner has trained a
 * step in a full ring. Every worker that stays finishes every step with exit 0 and the same
 * `weights_hash`, and nobody is ejected or named.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';
import { Churn, churnJob, churnOutcome } from '../support/churn.ts';
import { killStartedWorkers, requireNetns } from '../support/workers.ts';

afterAll(() => killStartedWorkers());

const SIZE = 3;
const ROUNDS = 2;
/**
 * The job must outlast both rounds: the second joiner trained in a full ring by step 27 (load 9 on 2 cores),
 * 33 (load 21) and once ~60 (load 21); the rest is margin. Every step after that only repeats what the
 * survivors already proved (about 0.1 s of three workers' CPU each), so 150, not 250.
 */
const STEPS = 150;

describe('churn in an elastic job', () => {
  it(`${ROUNDS} rounds of SIGKILL one member and one joins: the workers that stay finish with exit 0, one weights_hash, no ejection`, async () => {
    requireNetns();
    const job = churnJob('churn-test', STEPS, SIZE);
    const server = await startServer({ jobs: [job], staticDir: null });
    try {
      const churn = new Churn(server, job, SIZE);
      await churn.start(180_000);
      for (let i = 0; i < ROUNDS; i++) await churn.round(120_000);
      await churn.finish(240_000);
      const outcome = churnOutcome(churn);
      const detail = `${JSON.stringify(outcome)}${churn.seen()}`;
      expect(outcome.rounds.length).toBe(ROUNDS);
      // Each joiner was admitted and trained in a full ring before the job ended.
      for (const r of outcome.rounds) expect(r.join_to_first_step_ms, detail).not.toBeNull();
      expect(outcome.survivors.length).toBe(SIZE);
      for (const s of outcome.survivors) {
        expect(s.exit, detail).toBe(0);
        expect(s).toMatchObject({ steps: STEPS, size: SIZE, stopped_by: null });
        expect(s.weights_hash, detail).toMatch(/^[0-9a-f]{64}$/);
      }
      expect(new Set(outcome.survivors.map((s) => s.weights_hash)).size, detail).toBe(1);
      expect(outcome.ejections, detail).toEqual([]);
      expect(outcome.misbehaved, detail).toEqual([]);
    } finally {
      killStartedWorkers();
      await server.close();
    }
  }, 600_000);
});
