import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { reduceInto } from '../codecs/reduce.ts';
import type { Run } from '../controller/run.ts';
import type { ReduceOp, Tensor } from '../codecs/types.ts';
import { elementsIn, roundTripInPlace, type Codec } from '../codecs/wire.ts';
import { bufferRun, defineAllreduceAlgorithm, type AllreduceCost, type LinkCost } from './registry.ts';

/**
 * Recursive doubling allreduce, for small tensors: in round k every rank
 * swaps its whole partial result with the rank whose (renumbered) index
 * differs in bit k and reduces it in, so after log2(P) rounds everyone holds
 * the full reduction. Fewer hops than the ring's 2(N-1), at N times the bytes
 * per rank: a win while latency, not bandwidth, dominates.
 *
 * A size N that is not a power of two is folded as MPICH does: with P the
 * largest power of two <= N and E = N - P, ranks 0..2E-1 pair up; each even
 * one hands its tensor to the odd one after it and sits out, so P ranks
 * remain; at the end the odd ones hand the result back.
 *
 * Every rank ends with the same bits: partners combine the same two operands
 * (the ops are commutative), and with a lossy codec each rank first rounds
 * its own operand to what its partner will receive.
 *
 * Tags: the phase the registry gives it; step 0 folds in, steps 1..log2(P) are
 * the rounds, step log2(P)+1 folds out.
 */

/**
 * The fold both doubling algorithms use on a size that is not a power of two: P the largest power
 * of two <= size, E = size - P, ranks 0..2E-1 paired (each even one hands its tensor to the odd
 * one after it and sits out). `index` is this rank's number among the P that remain (for one that
 * sits out, its partner's), and `actual` maps such a number back to a rank.
 */
export function foldToPowerOfTwo(
  rank: number,
  size: number,
): { p: number; extra: number; rounds: number; index: number; actual: (i: number) => number } {
  let p = 1;
  while (p * 2 <= size) p *= 2;
  const extra = size - p;
  return {
    p,
    extra,
    rounds: Math.log2(p),
    index: rank < 2 * extra ? rank >> 1 : rank - extra,
    actual: (i) => (i < extra ? 2 * i + 1 : i + extra),
  };
}

/** Reduces `buf` in place over all ranks; `finish` (average, postscale) runs once on the full reduction. */
export async function recursiveDoublingAllreduce(
  run: Run,
  buf: Tensor,
  op: ReduceOp,
  codec: Codec,
  finish: (t: Tensor) => void,
  phase: number,
): Promise<void> {
  const { rank, size } = run.comm;
  const { extra, rounds, index, actual } = foldToPowerOfTwo(rank, size);
  // Lossy codecs decode into this, once per call; raw codecs hand out views of the payload.
  const scratch = codec.lossy ? new Float32Array(buf.length) : undefined;

  const exchange = async (step: number, to: number | null, from: number | null): Promise<Tensor | null> => {
    const tag = run.tag(phase, step, 0);
    const seg = { offset: 0, count: buf.length };
    if (to !== null) {
      const bytes = codec.encode(buf);
      run.send(to, tag, bytes);
      run.chunkEvent('chunk-send', 'recursive-doubling', step, rank, to, 0, seg, bytes.byteLength, buf);
    }
    if (from === null) return null;
    const payload = await run.recv(from, tag);
    if (elementsIn(codec, payload) !== buf.length) {
      throw new RingtrainError(
        ErrorCode.Transport,
        `recursive doubling: rank ${from} sent ${elementsIn(codec, payload)} elements where ${buf.length} were expected; the ranks' tensors or versions differ`,
        { from },
      );
    }
    const incoming = codec.decode(payload, buf, scratch);
    run.chunkEvent('chunk-recv', 'recursive-doubling', step, from, rank, 0, seg, payload.byteLength, incoming);
    return incoming;
  };

  // Fold in: an even rank below 2E gives its tensor to the odd rank after it and waits for the result.
  if (rank < 2 * extra && rank % 2 === 0) {
    await exchange(0, rank + 1, null);
    const result = (await exchange(rounds + 1, null, rank + 1))!;
    if (result !== buf) buf.set(result);
    return;
  }
  if (rank < 2 * extra) reduceInto(op, buf, (await exchange(0, null, rank - 1))!);

  // The P remaining ranks, renumbered 0..P-1 (foldToPowerOfTwo).
  for (let k = 0; k < rounds; k++) {
    const partner = actual(index ^ (1 << k));
    roundTripInPlace(codec, buf);
    reduceInto(op, buf, (await exchange(k + 1, partner, partner))!);
  }
  finish(buf);
  roundTripInPlace(codec, buf);
  // Fold out: hand the result back to the even rank that sat out.
  if (rank < 2 * extra) await exchange(rounds + 1, rank - 1, null);
}

/** Rounds of recursive doubling: log2 N, plus a fold in and out of the extra peers when N is not a power of two. */
export function doublingRounds(n: number): number {
  const r = Math.ceil(Math.log2(n));
  return 2 ** r === n ? r : Math.floor(Math.log2(n)) + 2;
}

/** r alpha + r n beta, r = doublingRounds(N): every round sends the whole tensor. */
function recursiveDoublingCost(n: number, bytes: number, link: LinkCost): AllreduceCost {
  if (n <= 1) return { s: 0, bytesSent: 0, messages: 0 };
  const r = doublingRounds(n);
  return { s: r * (link.alphaS + bytes * link.betaSPerByte), bytesSent: r * bytes, messages: r };
}

/** First for latency-bound small tensors (up to smallBytes), on any number of ranks. */
export const RECURSIVE_DOUBLING = defineAllreduceAlgorithm({
  name: 'recursive-doubling',
  order: 10,
  enabled: ({ bytes, size, smallBytes }) => size > 1 && bytes <= smallBytes,
  run: bufferRun('recursive-doubling', recursiveDoublingAllreduce),
  cost: recursiveDoublingCost,
});
