/**
 * Signed link digests (src/collectives/robust/link-digests.ts, verify-verdicts.ts) on memory links
 * with real signing keys: a liar that passes on NaN and claims its left neighbour sent it that NaN
 * is named by every rank, the neighbour by none; a sender that signs a sketch other than that of
 * the bytes it sent is named from the bytes its receiver shows; a link that changes reduce-scatter
 * bytes still names its sender (the receiver signs a sketch of what it got, not a hash, so that goes
 * through the evidence too); honest steps name nobody. The
 * verifier's seed is revealed by the sum (sketch.ts's revealedSeed): a change crafted into the null
 * space of a seed known in advance (main's, drawn from the job's seed and the step) is caught.
 * Real processes: test/robust/relayed-checks.test.ts (--chaos lie-accuse).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { LinkCommunicator } from '../../src/comm/communicator.ts';
import { allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { judgeEvidence, judgeHops, sha256, type HopInput } from '../../src/collectives/robust/link-digests.ts';
import { mix32, revealedSeed, sketchInto, stepSeed } from '../../src/collectives/robust/sketch.ts';
import { chunkSketches, ringChunks } from '../../src/collectives/robust/verified.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { mulberry32 } from '../../src/core/random.ts';
import { StepChecks } from '../../src/distributed/robust/step-checks.ts';
import { FAST_STEP_BIT } from '../../src/collectives/controller/negotiate.ts';
import { PHASE_ALLGATHER, PHASE_REDUCE_SCATTER } from '../../src/collectives/transfer/ring.ts';
import { accuseOnSend } from '../support/chaos/accuse.ts';
import { ring, signedRing } from './memory-ring.ts';
import { interceptSends } from '../support/intercept-sends.ts';

const opened: LinkCommunicator[] = [];
afterEach(async () => {
  for (const c of opened.splice(0)) await c.close().catch(() => {});
});

async function openSignedRing(size: number) {
  const r = await signedRing(size);
  opened.push(...r.comms);
  return r;
}

const GRADIENT = 20000;
const JOB_SEED = 9;

function gradients(size: number, n: number, seed: number): Float32Array[] {
  const r = mulberry32(seed);
  return Array.from({ length: size }, () => Float32Array.from({ length: n }, () => r() - 0.5));
}

/** One verified step on every rank, as the trainer runs it; `lie` changes a contribution after its checks went out. */
async function verifiedStep(comms: LinkCommunicator[], step: number, lie?: (r: number, g: Float32Array) => void) {
  const grads = gradients(comms.length, GRADIENT, step + 1);
  const checks = comms.map(() => new StepChecks({ guard: false, verify: true, seed: JOB_SEED }));
  return Promise.all(
    comms.map(async (c, r) => {
      try {
        await checks[r].before(c, grads[r], step);
        lie?.(r, grads[r]);
        await allreduceInPlace(c, grads[r], {
          op: 'average',
          name: `g${step}`,
          algorithm: 'ring',
          segmentBytes: 8192,
          observeReceived: (o, v) => checks[r].observe(c, o, v),
          observeSent: (o, v) => checks[r].observeSent(c, o, v),
        });
        await checks[r].after(c, grads[r], 1 / c.size);
        return null;
      } catch (e) {
        return e as RingtrainError;
      }
    }),
  );
}

describe('signed link digests in the verified allreduce', () => {
  it('an honest signed step names nobody', async () => {
    const { comms, seen } = await openSignedRing(3);
    expect(await verifiedStep(comms, 0)).toEqual([null, null, null]);
    expect(seen.flat().filter((e) => e.type === 'peer-misbehaved')).toEqual([]);
  });

  for (const size of [3, 4]) {
    it(`a liar of ${size} that passes on NaN and claims its left neighbour sent it is named by every rank, the neighbour by none`, async () => {
      const { comms, seen } = await openSignedRing(size);
      const liar = 1;
      accuseOnSend(comms[liar], 0, () => 0, GRADIENT);
      const errors = await verifiedStep(comms, 0, (r, g) => r === liar && g.fill(NaN));
      for (const [r, e] of errors.entries()) {
        expect(e, `rank ${r}`).toBeInstanceOf(RingtrainError);
        expect(e!.code, e!.message).toBe(ErrorCode.PeerMisbehaved);
        expect(e!.detail).toMatchObject({ peer: liar, culprits: [liar] });
        const named = seen[r].filter((ev) => ev.type === 'peer-misbehaved');
        expect(new Set(named.map((ev) => (ev as { peer: number }).peer))).toEqual(new Set([liar]));
        // The others name it for the accusation first (its own code never saw the rewritten block).
        if (r !== liar) expect(String((named[0] as { reason: string }).reason)).toMatch(/false accusation/);
        // Named twice over: the NaN it started its own chunk with, and the accusation its bytes do not back.
        const proven = (e!.detail as { proven: { rank: number; reason: string }[] }).proven;
        expect(new Set(proven.map((f) => f.rank))).toEqual(new Set([liar]));
        // The liar's own code judged its block as it was before the rewrite: only the others hold the accusation.
        if (r !== liar)
          expect(
            proven.some((f) => /false accusation/.test(f.reason)),
            e!.message,
          ).toBe(true);
      }
    });
  }
});

/** From now on the link from `comm` to its right neighbour adds 1 to the first float of every reduce-scatter message. */
function corruptReduceScatter(comm: LinkCommunicator): void {
  const right = (comm.rank + 1) % comm.size;
  interceptSends(comm, (send) => (peer, tag, payload) => {
    if (peer !== right || (tag.step & ~FAST_STEP_BIT) >>> 16 !== PHASE_REDUCE_SCATTER) return send(peer, tag, payload);
    const changed = new Uint8Array(payload);
    new Float32Array(changed.buffer)[0] += 1;
    return send(peer, tag, changed);
  });
}

describe('a link that changes reduce-scatter bytes, signed digests or not', () => {
  it("the receiver's sketch differs from the sender's and the bytes it shows are not what the sender hashed: one word against the other, so the link's sender is named by every rank, as before", async () => {
    const { comms, seen } = await openSignedRing(3);
    corruptReduceScatter(comms[1]);
    const errors = await verifiedStep(comms, 0);
    for (const [r, e] of errors.entries()) {
      expect(e, `rank ${r}`).toBeInstanceOf(RingtrainError);
      expect(e!.code, e!.message).toBe(ErrorCode.PeerMisbehaved);
      expect(e!.message).toContain('rank 1 sent rank 2 gradients that its published sketch does not explain');
      expect(e!.detail).toMatchObject({ peer: 1, link: [1, 2] });
      // Nobody is convicted by a signature: neither end signed anything but what it sent and got.
      expect(e!.detail).not.toHaveProperty('proven');
      const named = seen[r].filter((ev) => ev.type === 'peer-misbehaved');
      expect(new Set(named.map((ev) => (ev as { peer: number }).peer))).toEqual(new Set([1]));
    }
  });
});

/** From now on `comm` changes a float of every allgather message over 16 KB it sends on (the evidence's, here). */
function changeEvidenceOnSend(comm: LinkCommunicator): void {
  interceptSends(comm, (send) => (peer, tag, payload) => {
    const phase = (tag.step & ~FAST_STEP_BIT) >>> 16;
    if (phase !== PHASE_ALLGATHER || payload.byteLength <= 16384) return send(peer, tag, payload);
    const changed = new Uint8Array(payload);
    new Float32Array(changed.buffer)[1] += 1;
    return send(peer, tag, changed);
  });
}

describe('the evidence, signed by the hashes of its bytes', () => {
  it('bytes a relayer changed convict nobody: the ranks after it fail the step naming no one, the receiver that showed them is never named', async () => {
    const { comms, seen } = await openSignedRing(4);
    // A dispute on hop 1 → 2, so rank 2 shows what it got; its block goes 2 → 3 → 0 → 1, and rank 3 changes it.
    corruptReduceScatter(comms[1]);
    changeEvidenceOnSend(comms[3]);
    const errors = await verifiedStep(comms, 0);
    for (const r of [0, 1]) {
      expect(errors[r]?.code, errors[r]?.message).toBe(ErrorCode.Aborted);
      expect(errors[r]!.detail).toMatchObject({ evidenceChanged: [2] });
    }
    // Before the relayer, the bytes are as rank 2 signed them: the hop is one word against the other.
    for (const r of [2, 3]) expect(errors[r]!.detail, errors[r]!.message).toMatchObject({ peer: 1, link: [1, 2] });
    const named = seen.flat().filter((e) => e.type === 'peer-misbehaved') as { peer: number }[];
    expect(named.some((e) => e.peer === 2)).toBe(false);
  });
});

/**
 * Digests of one hop 0 → 1 of a 2-rank ring's chunk 1 (owner 1), where rank 0 starts the chunk: rank 0
 * sent `sentBytes` and signed the sketch of `signedSketchOf`, rank 1 signed the sketch of
 * `receivedSketchOf` and shows `shown` (by default the bytes sent).
 */
async function oneHop(
  sentBytes: Float32Array,
  signedSketchOf: Float32Array,
  receivedSketchOf: Float32Array,
  shown = sentBytes,
) {
  const k = 8;
  const chunks = ringChunks(sentBytes.length * 2, 2, undefined, 0, 0);
  const c = chunks[1];
  const seed = 3;
  const sketchAt = (v: Float32Array) => {
    const s = new Float64Array(k);
    sketchInto(s, v, seed, c.offset);
    return Float32Array.from(s);
  };
  const hash = await sha256(sentBytes);
  const digest = (sent: boolean) => ({
    sentHash: new Int32Array(16).map((_, i) => (sent && i >= 8 ? hash[i - 8] : 0)),
    sentSketch: Float32Array.from({ length: 2 * k }, (_, i) => (sent && i >= k ? sketchAt(signedSketchOf)[i - k] : 0)),
    receivedSketch: Float32Array.from({ length: 2 * k }, (_, i) =>
      !sent && i >= k ? sketchAt(receivedSketchOf)[i - k] : 0,
    ),
  });
  const whole = new Float32Array(sentBytes.length * 2);
  whole.set(signedSketchOf, c.offset);
  const published = [chunkSketches(whole, chunks, k, seed), new Float32Array(4 * k)];
  const x: HopInput = { size: 2, chunks, k, prescale: 1, published, digests: [digest(true), digest(false)] };
  const found = judgeHops(x);
  const evidence = [new Float32Array(c.count), shown];
  return { found, ...(await judgeEvidence(x, found.disputes, evidence, seed)) };
}

describe('judging one hop from its signed digests', () => {
  const honest = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i));
  const poison = honest.map((v, i) => (i === 5 ? v + 100 : v));

  it('agreeing ends and a consistent sender: nothing to judge', async () => {
    const { found, proven, unresolved } = await oneHop(honest, honest, honest);
    expect(found).toEqual({ proven: [], disputes: [] });
    expect(proven).toEqual([]);
    expect(unresolved).toEqual([]);
  });

  it('a sender that sent poison but signed the honest sketch is named from the bytes its receiver shows', async () => {
    const { found, proven } = await oneHop(poison, honest, poison);
    expect(found.disputes).toHaveLength(1);
    expect(proven.map((f) => f.rank)).toEqual([0]);
    expect(proven[0].reason).toMatch(/signed a sketch of chunk 1 that the bytes it sent rank 1 do not have/);
  });

  it('a receiver that got the honest bytes and claims a poisoned sketch is named (a false accusation)', async () => {
    const { proven } = await oneHop(honest, honest, poison);
    expect(proven.map((f) => f.rank)).toEqual([1]);
    expect(proven[0].reason).toMatch(/false accusation/);
  });

  it('a receiver whose shown bytes have neither the hash the sender signed nor its own signed sketch is named', async () => {
    const { proven, unresolved } = await oneHop(honest, honest, poison, new Float32Array(honest.length));
    expect(proven.map((f) => f.rank)).toEqual([1]);
    expect(proven[0].reason).toMatch(/false accusation: it cannot back it/);
    expect(unresolved).toEqual([]);
  });

  it('bytes that changed on the way (the receiver shows and signed other bytes than the sender hashed): one word against the other, nobody proven', async () => {
    const { found, proven, unresolved } = await oneHop(honest, honest, poison, poison);
    expect(proven).toEqual([]);
    expect(unresolved).toEqual(found.disputes);
    expect(unresolved).toEqual([{ chunk: 1, from: 0, to: 1 }]);
  });
});

/**
 * A change that main's verifier could not see: two elements of one chunk that its step seed (known in
 * advance: the job's seed and the step) puts in the same bucket, moved by ±1000 with their signs so
 * that the bucket's sum stays as it was (the per-chunk sketches are unchanged, and their masses only
 * widen the bound).
 */
function nullSpaceChange(chunkOffset: number, chunkCount: number, step: number, k = 64): Map<number, number> {
  const s = (stepSeed(JOB_SEED, step) ^ 0xa5a5a5a5) >>> 0;
  const place = (i: number) => {
    const h = mix32(i ^ s) ^ Math.imul(s, 0x27d4eb2f);
    return { bucket: (h >>> 1) & (k - 1), sign: h & 1 ? -1 : 1 };
  };
  const first = place(chunkOffset);
  for (let j = chunkOffset + 1; j < chunkOffset + chunkCount; j++) {
    const other = place(j);
    if (other.bucket !== first.bucket) continue;
    return new Map([
      [chunkOffset, 1000 * first.sign],
      [j, -1000 * other.sign],
    ]);
  }
  throw new Error('no two elements share a bucket');
}

describe("the verifier's seed is revealed by the sum", () => {
  it('a change aimed at the null space of a seed known in advance is invisible to that seed, and named under the revealed one', async () => {
    const { comms } = await openSignedRing(3);
    const liar = 2;
    const chunks = ringChunks(GRADIENT, 3, undefined, 0, 0);
    // In a chunk the liar passes on (not its own), so its signed link digest carries it.
    const c = chunks[0];
    const change = nullSpaceChange(c.offset, c.count, 0);
    const honest = gradients(3, GRADIENT, 1)[liar];
    const changed = Float32Array.from(honest);
    for (const [i, d] of change) changed[i] += d;
    // Aimed well: under the seed known in advance the chunk sketches do not move (within float rounding).
    const before = chunkSketches(honest, chunks, 64, (stepSeed(JOB_SEED, 0) ^ 0xa5a5a5a5) >>> 0);
    const after = chunkSketches(changed, chunks, 64, (stepSeed(JOB_SEED, 0) ^ 0xa5a5a5a5) >>> 0);
    for (let b = 0; b < 64; b++) expect(Math.abs(after[b] - before[b])).toBeLessThan(1e-3);
    const errors = await verifiedStep(comms, 0, (r, g) => {
      if (r === liar) for (const [i, d] of change) g[i] += d;
    });
    for (const [r, e] of errors.entries()) {
      expect(e, `rank ${r}`).toBeInstanceOf(RingtrainError);
      expect(e!.code, e!.message).toBe(ErrorCode.PeerMisbehaved);
      expect(e!.detail).toMatchObject({ peer: liar, culprits: [liar] });
    }
  });

  it('no rank can know the seed before its contribution is in the sum: one float of one contribution changes it', async () => {
    const grads = gradients(3, 4096, 5);
    const sumHashOf = async (gs: Float32Array[]) => {
      const sum = Float32Array.from(gs[0], (_, i) => gs[0][i] + gs[1][i] + gs[2][i]);
      return sha256(sum);
    };
    const seed = revealedSeed(7, await sumHashOf(grads));
    const nudged = grads.map((g) => Float32Array.from(g));
    nudged[1][100] = Math.fround(nudged[1][100] * (1 + 2 ** -20));
    expect(revealedSeed(7, await sumHashOf(nudged))).not.toBe(seed);
    // And the step alone (all that main's seed was drawn from besides the job's seed) does not give it.
    expect(revealedSeed(8, await sumHashOf(grads))).not.toBe(seed);
  });
});
