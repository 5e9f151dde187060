/**
 * What the trainer hands over when a run ends with an error (the experiment
 * runs under Deno in recovery-run.ts: real kernels, real trainer): the state
 * of the last completed step, on every rank that stops; nothing when no step
 * completed; never non-finite weights. A regroup that fails with ERR_SIGNALING
 * (an elastic job without its server) ends the run cleanly, as a result.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('recovery state of a run that ends with an error', () => {
  it('is the last completed step on every rank, nothing before the first step, never non-finite weights', () => {
    const run = spawnSync('node_modules/.bin/deno', ['run', '-A', 'test/distributed/recovery-run.ts'], {
      encoding: 'utf8',
      timeout: 300_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const r = JSON.parse(run.stdout.trim().split('\n').pop()!);

    // A forged abort after 3 steps, and no server to regroup through: both ranks stop with
    // ERR_SIGNALING and hand over step 3, the same weights on both.
    for (const rank of r.midRun) {
      expect(rank).toMatchObject({ steps: 3, completed: 3, stoppedBy: 'ERR_SIGNALING', noRecovery: null });
      expect(rank.saved).toHaveLength(1);
      expect(rank.saved[0]).toMatchObject({ step: 3, finite: true, why: 'ERR_SIGNALING' });
    }
    expect(r.midRun[0].saved[0].first).toBe(r.midRun[1].saved[0].first);

    // Aborted before any step: nothing to hand over, and the result says why.
    for (const rank of r.beforeFirstStep) {
      expect(rank).toMatchObject({ completed: 0, saved: [] });
      expect(rank.stoppedBy).not.toBeNull();
      expect(rank.noRecovery).toMatch(/completed no step/);
    }

    // A diverged loss still ends in an error (ERR_INVALID_ARGUMENT) and hands over the last
    // completed step only if its weights are finite.
    expect(r.diverged.rejected).toBe('ERR_INVALID_ARGUMENT');
    for (const s of r.diverged.saved) expect(s).toMatchObject({ step: r.diverged.lastStep, finite: true });
  });
});
