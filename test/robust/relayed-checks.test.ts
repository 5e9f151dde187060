/**
 * Relayed checks on real processes (issue 37): a 3-peer elastic MLP job (real server, real Deno
 * workers, real WebRTC inside scripts/in-netns.sh, the job's default checks). At one step one
 * worker rewrites, to NaN, the norm in the check block it passes on for its left neighbour, and
 * signs its hop over what it sends (--chaos relay-norm). Unsigned, the rank after it read that as
 * the author's gradient and named the author. Signed (signed-gather.ts), the rank after it finds
 * the author's signature broken under the relayer's hop signature: it names the relayer and its
 * abort carries the proof, which the author checks and reports too. The relayer is ejected; the
 * two others finish every step with one weights_hash, and nobody ever names the author.
 *
 * The same job with a liar that sends NaN into the ring and claims, in its signed verdict block,
 * that its left neighbour sent it (--chaos lie-accuse): the neighbour's signed link digest and the
 * bytes the liar must show contradict it (link-digests.ts), so the others name the liar (or it has
 * reported itself first), never the neighbour; the liar is ejected and the two finish with one
 * weights_hash.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { requireNetns } from '../support/workers.ts';
import { cleanUpRuns, FAULT_STEP, lastStepAtSize, runWithFault, STEPS } from './eject.ts';

afterAll(() => cleanUpRuns());

describe('a relayer that rewrites the checks it passes on', () => {
  it('--chaos relay-norm: the relayer is named by both others and ejected, never the author; the others finish with one weights_hash', async () => {
    requireNetns();
    const { honest, faulty, honestCodes, faultyCode } = await runWithFault('relay-norm', 'relay-norm');
    const detail = [...honest, faulty].map((w) => `--- rank ${w.rank}\n${w.stderr.slice(-3000)}`).join('\n');
    const relayer = faulty.rank!;
    for (const [i, w] of honest.entries()) {
      expect(honestCodes[i], detail).toBe(0);
      expect(w.result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
      // Each honest rank names the relayer (the one it handed the block to first-hand, the author from the
      // proof), and no one else.
      const named = w.events.filter((e) => e.event === 'peer-misbehaved');
      expect(named.length, detail).toBeGreaterThan(0);
      expect(new Set(named.map((e) => e.peer)), detail).toEqual(new Set([relayer]));
      expect(String(named[0].reason), detail).toMatch(/passed on rank \d's gradient-sketches block changed/);
      expect(
        w.events.filter((e) => e.event === 'peer-left' && e.reason === 'ejected').map((e) => e.name),
        detail,
      ).toEqual(['faulty']);
      expect(lastStepAtSize(w, 3), detail).toBeLessThanOrEqual(FAULT_STEP + 1);
    }
    expect(faultyCode, detail).not.toBe(0);
    const hashes = new Set(honest.map((w) => w.result?.weights_hash));
    expect(hashes.size, detail).toBe(1);
    expect([...hashes][0]).toMatch(/^[0-9a-f]{64}$/);
  }, 240_000);

  it('--chaos lie-accuse: the liar that blames its left neighbour for the NaN it passes on is named and ejected, the neighbour is not', async () => {
    requireNetns();
    const { honest, faulty, honestCodes, faultyCode } = await runWithFault('lie-accuse', 'lie-accuse');
    const detail = [...honest, faulty].map((w) => `--- rank ${w.rank}\n${w.stderr.slice(-3000)}`).join('\n');
    const liar = faulty.rank!;
    for (const [i, w] of honest.entries()) {
      expect(honestCodes[i], detail).toBe(0);
      expect(w.result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
      // The liar's own code finds its NaN against its signed digest and reports itself, which the server
      // ejects on at once: that may break the others' evidence gather before they name it. Whoever they
      // name is the liar, never its neighbour (memory links: link-digests.test.ts names it for the accusation).
      const named = w.events.filter((e) => e.event === 'peer-misbehaved');
      expect(
        [...new Set(named.map((e) => e.peer))].filter((p) => p !== liar),
        detail,
      ).toEqual([]);
      expect(
        w.events.filter((e) => e.event === 'peer-left' && e.reason === 'ejected').map((e) => e.name),
        detail,
      ).toEqual(['faulty']);
      expect(lastStepAtSize(w, 3), detail).toBeLessThanOrEqual(FAULT_STEP + 1);
    }
    expect(faultyCode, detail).not.toBe(0);
    expect(new Set(honest.map((w) => w.result?.weights_hash)).size, detail).toBe(1);
  }, 240_000);
});
