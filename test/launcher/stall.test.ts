/**
 * The stall inspector over real processes: a worker is frozen (SIGSTOP: alive,
 * connected, silent). Before the ring gives up on it, the others warn that
 * they hear nothing from that rank, naming it; then they stop, naming it
 * again. Real server, real Deno workers, real WebRTC.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';
import { QUIET_LINK } from '../../src/comm/communicator.ts';
import { killStartedWorkers, lastStep, requireNetns, startDenoWorker, until } from '../support/workers.ts';

afterAll(killStartedWorkers);

describe('a frozen peer', () => {
  it('is named by a stall warning first, then as the rank that was lost', { timeout: 240_000 }, async () => {
    requireNetns();
    const job = {
      id: 'frozen',
      token: 'frozen-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05, seed: 5, epochs: 50 },
        batchPerPeer: 16,
        minPeers: 3,
        maxPeers: 3,
      },
    };
    const server = await startServer({ jobs: [job], staticDir: null });
    try {
      const workers = [0, 1, 2].map(() => startDenoWorker(server.url, job));
      await until(() => workers.every((w) => lastStep(w).step >= 3), 'three workers to take 3 steps', 120_000).catch(
        (e) => {
          throw new Error(`${e.message}\n${workers.map((w) => w.stderr.slice(-800)).join('\n---\n')}`);
        },
      );
      const victim = workers.find((w) => w.rank === 2)!;
      victim.child.kill('SIGSTOP');
      const survivors = workers.filter((w) => w !== victim);
      const codes = await Promise.all(survivors.map((w) => w.exit));
      const ended = Date.now();
      expect(codes).toEqual([3, 3]);
      for (const s of survivors) {
        expect(s.result?.stopped_by?.code, s.stderr).toMatch(/ERR_PEER_LOST|ERR_ABORTED/);
        expect(s.result?.stopped_by?.message).toMatch(/rank 2/);
      }
      // At least one survivor warned before the end (the other may first hear of the loss from it).
      const warnings = survivors.flatMap((s) => s.stalls);
      expect(warnings.length, survivors.map((s) => s.stderr).join('\n')).toBeGreaterThanOrEqual(1);
      // Either kind names rank 2: its link went quiet, or rank 0 waited for its gradients (or their norms).
      for (const w of warnings) {
        // Under load a coordinator may also list a rank that was merely late (itself included).
        expect(w.waitingFor, JSON.stringify(w)).toContain(2);
        // ('gradient-sketches': the step checks' allgather of norms and sketches, the step's first collective.)
        expect(
          w.name === QUIET_LINK ||
            w.name.includes('dense0.weight') ||
            w.name.startsWith('gradients') ||
            w.name === 'gradient-sketches' ||
            w.name === 'gradient-norms',
          w.name,
        ).toBe(true);
        expect(w.at).toBeLessThanOrEqual(ended);
      }
      const warnedOnStderr = survivors.some((s) =>
        /stall: rank [01] has (heard nothing from rank 2 for|waited \d+\.\d s for rank 2 to submit)/.test(s.stderr),
      );
      expect(warnedOnStderr, survivors.map((s) => s.stderr).join('\n')).toBe(true);
    } finally {
      await server.close();
    }
  });
});
