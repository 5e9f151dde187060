/**
 * Issue 14, a peer speaks only for itself: in a 3-peer elastic job one real
 * Deno worker sends garbage frames, floods well-formed frames for tags nobody
 * waits for, or forges an abort blaming another rank. The SENDER is named,
 * reported and ejected; the honest peers re-form and finish every step.
 * Real server, real Deno workers, real WebRTC (inside scripts/in-netns.sh).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { requireNetns } from '../support/workers.ts';
import { cleanUpRuns, FAULT_STEP, lastStepAtSize, runWithFault, STEPS } from './eject.ts';

afterAll(() => cleanUpRuns());

describe('a worker breaking the wire protocol', () => {
  // forge-abort and flood-tags once failed in CI because only one honest rank had evidence of its own
  // (the other heard a relay first, or was no longer flooded): now each honest rank weighs every
  // first-hand abort and backs a flood report as soon as the flood reaches it (docs/ROBUSTNESS.md).
  for (const fault of ['garbage-frames', 'flood-tags', 'forge-abort']) {
    it(`--fault ${fault}: the sender is named and ejected within 2 steps; the others finish`, async () => {
      requireNetns();
      // A forged abort is judged false once the server saw no one leave within its liveness window
      // (heartbeat × (missed + 2)): the server's default heartbeat, as a shorter one dropped workers
      // whose event loop a loaded machine held for seconds.
      const { honest, faulty, honestCodes, faultyCode } = await runWithFault(`wire-${fault}`, fault);
      const bad = faulty.rank!;
      for (const [i, w] of honest.entries()) {
        expect(honestCodes[i], w.stderr).toBe(0);
        expect(w.result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
        expect(w.events.find((e) => e.event === 'peer-left' && e.reason === 'ejected'), w.stderr).toMatchObject({ rank: bad, name: 'faulty' });
        expect(lastStepAtSize(w, 3)).toBeLessThanOrEqual(FAULT_STEP + 2);
        // Measured: 80.3% after any of these faults, the same to the digit (the poisoned steps were
        // never applied); 85.1% when all three peers stay honest (a third more examples per step);
        // a 1e30-scaled update applied once leaves chance (10%).
        expect(w.result!.test_accuracy).toBeGreaterThan(0.75);
      }
      // Every honest peer named the sender, never each other (a forged abort blames no honest rank).
      const blamed = honest.flatMap((w) => w.events.filter((e) => e.event === 'peer-misbehaved').map((e) => e.peer));
      expect(new Set(blamed)).toEqual(new Set([bad]));
      // Each honest rank reported the forger on what it heard itself (the majority needs both).
      if (fault === 'forge-abort') expect(honest.every((w) => /reporting rank \d+ \(faulty\) to the server: it aborted the ring saying rank \d+ went away/.test(w.stderr)), honest.map((w) => w.stderr).join('\n')).toBe(true);
      // The sender did not finish as a member (the server's side of its ejection is checked above).
      expect(faultyCode, faulty.stderr).not.toBe(0);
    }, 200_000);
  }
});
