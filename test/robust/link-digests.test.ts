/**
 * Signed link digests (src/collectives/robust/link-digests.ts, verify-verdicts.ts) on memory links
 * with real signing keys: a liar that passes on NaN and claims its left neighbour sent it that NaN
 * is named by every rank, the neighbour by none; a sender that signs a sketch other than that of
 * the bytes it sent is named from the bytes its receiver shows; honest steps name nobody.
 * Real processes: test/robust/relayed-checks.test.ts (--chaos lie-accuse).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { LinkCommunicator } from '../../src/comm/communicator.ts';
import { allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { judgeEvidence, judgeHops, sha256, type HopInput } from '../../src/collectives/robust/link-digests.ts';
import { sketchInto } from '../../src/collectives/robust/sketch.ts';
import { chunkSketches, ringChunks } from '../../src/collectives/robust/verified.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { mulberry32 } from '../../src/core/random.ts';
import { StepChecks } from '../../src/distributed/robust/step-checks.ts';
import { newSigningKeys, recordRingKeys, type SigningKeys } from '../../src/distributed/session/ring-keys.ts';
import type { Membership } from '../../src/signaling/client.ts';
import { accuseOnSend } from '../support/chaos/accuse.ts';
import { ring } from './memory-ring.ts';

const opened: LinkCommunicator[] = [];
afterEach(async () => {
  for (const c of opened.splice(0)) await c.close().catch(() => {});
});

async function signedRing(size: number) {
  const r = ring(size);
  opened.push(...r.comms);
  const keys = (await Promise.all(r.comms.map(() => newSigningKeys()))) as SigningKeys[];
  const membership = {
    peers: keys.map((k, rank) => ({ rank, peerId: `p${rank}`, runtime: 'node', signingKey: k.publicText })),
  } as unknown as Membership;
  await Promise.all(r.comms.map((c, rank) => recordRingKeys(c, membership, keys[rank])));
  return r;
}

const GRADIENT = 20000;

function gradients(size: number, n: number, seed: number): Float32Array[] {
  const r = mulberry32(seed);
  return Array.from({ length: size }, () => Float32Array.from({ length: n }, () => r() - 0.5));
}

/** One verified step on every rank, as the trainer runs it; `lie` changes a contribution after its checks went out. */
async function verifiedStep(comms: LinkCommunicator[], step: number, lie?: (r: number, g: Float32Array) => void) {
  const grads = gradients(comms.length, GRADIENT, step + 1);
  const checks = comms.map(() => new StepChecks({ guard: false, verify: true, seed: 9 }));
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
    const { comms, seen } = await signedRing(3);
    expect(await verifiedStep(comms, 0)).toEqual([null, null, null]);
    expect(seen.flat().filter((e) => e.type === 'peer-misbehaved')).toEqual([]);
  });

  for (const size of [3, 4]) {
    it(`a liar of ${size} that passes on NaN and claims its left neighbour sent it is named by every rank, the neighbour by none`, async () => {
      const { comms, seen } = await signedRing(size);
      const liar = 1;
      accuseOnSend(comms[liar], 0, () => 0, GRADIENT);
      const errors = await verifiedStep(comms, 0, (r, g) => r === liar && g.fill(NaN));
      for (const [r, e] of errors.entries()) {
        expect(e, `rank ${r}`).toBeInstanceOf(RingtrainError);
        expect(e!.code, e!.message).toBe(ErrorCode.PeerMisbehaved);
        expect(e!.detail).toMatchObject({ peer: liar, culprits: [liar] });
        const named = seen[r].filter((ev) => ev.type === 'peer-misbehaved');
        expect(new Set(named.map((ev) => (ev as { peer: number }).peer))).toEqual(new Set([liar]));
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

/** Digests of one hop 0 → 1 of a 2-rank ring's chunk 1 (owner 1), where rank 0 starts the chunk. */
async function oneHop(sentBytes: Float32Array, signedSketchOf: Float32Array, receivedSketchOf: Float32Array) {
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
    sentHash: new Int32Array(16).fill(0).map((_, i) => (sent && i >= 8 ? hash[i - 8] : 0)),
    receivedHash: new Int32Array(16).fill(0).map((_, i) => (!sent && i >= 8 ? hash[i - 8] : 0)),
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
  const evidence = [new Float32Array(c.count), sentBytes];
  return { found, proven: await judgeEvidence(x, found.sketchDisputes, evidence, seed) };
}

describe('judging one hop from its signed digests', () => {
  const honest = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i));
  const poison = honest.map((v, i) => (i === 5 ? v + 100 : v));

  it('agreeing ends and a consistent sender: nothing to judge', async () => {
    const { found, proven } = await oneHop(honest, honest, honest);
    expect(found).toEqual({ proven: [], sketchDisputes: [], hashDisputes: [] });
    expect(proven).toEqual([]);
  });

  it('a sender that sent poison but signed the honest sketch is named from the bytes its receiver shows', async () => {
    const { found, proven } = await oneHop(poison, honest, poison);
    expect(found.sketchDisputes).toHaveLength(1);
    expect(proven.map((f) => f.rank)).toEqual([0]);
    expect(proven[0].reason).toMatch(/signed a sketch of chunk 1 that the bytes it sent rank 1 do not have/);
  });

  it('a receiver that got the honest bytes and claims a poisoned sketch is named (a false accusation)', async () => {
    const { proven } = await oneHop(honest, honest, poison);
    expect(proven.map((f) => f.rank)).toEqual([1]);
    expect(proven[0].reason).toMatch(/false accusation/);
  });
});
