/**
 * Issue 34: a link that corrupts bytes is named by the verified allreduce, over real TCP links.
 * A 3-peer elastic MLP job (real server, real Deno workers, which link by TCP where both ends
 * listen: the worker's default `--transport auto`), inside scripts/in-netns.sh. One worker's
 * TCP link to its right neighbour flips bits in the data frames it carries (--chaos flip-link:
 * below the communicator, so that worker's process publishes honest sketches and sends honest
 * numbers). The rank after it on the ring finds partial sums the sketches do not explain,
 * names the link, and the job ejects its sender; the other two finish and learn.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { requireNetns } from '../support/workers.ts';
import { cleanUpRuns, FAULT_STEP, lastStepAtSize, runWithFault } from './eject.ts';

afterAll(() => cleanUpRuns());

const STEPS = 16;

describe('a TCP link that corrupts bytes', () => {
  it('--chaos flip-link on a TCP link: the verified allreduce names it, its sender is ejected, the others finish', async () => {
    requireNetns();
    const { honest, faulty, honestCodes, faultyCode } = await runWithFault(
      'tcp-fliplink',
      'flip-link',
      undefined,
      true,
      {
        steps: STEPS,
      },
    );
    const bad = faulty.rank!;
    // What the fault wrapped was a TCP link (the chaos entry says which transport it found).
    expect(faulty.stderr).toMatch(new RegExp(`--chaos flip-link: the tcp link to rank ${(bad + 1) % 3} flips bits`));
    for (const [i, w] of honest.entries()) {
      expect(honestCodes[i], w.stderr).toBe(0);
      expect(w.result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
      // The ring that is left is TCP too.
      const links = w.result!.links as { peer: number; transport: string }[];
      expect(links.map((l) => l.transport)).toEqual(['tcp']);
      const named = w.events.filter((e) => e.event === 'peer-misbehaved');
      expect(named[0], w.stderr).toMatchObject({ peer: bad });
      expect(String(named[0].reason)).toMatch(/its link to rank \d changed gradient data in transit/);
      expect(
        w.events.find((e) => e.event === 'peer-left' && e.reason === 'ejected'),
        w.stderr,
      ).toMatchObject({ rank: bad, name: 'faulty' });
      // Named within 2 steps of the fault; the corrupted steps were never applied.
      expect(lastStepAtSize(w, 3)).toBeLessThanOrEqual(FAULT_STEP + 2);
      expect(w.result!.test_accuracy).toBeGreaterThan(0.7);
    }
    expect(faultyCode, faulty.stderr).not.toBe(0);
    expect(faulty.stderr).toMatch(/ejected from the job/);
  }, 200_000);
});
