import { blockExchange } from '../transfer/block-exchange.ts';
import { splitEven, type Range } from '../codecs/partition.ts';
import type { Run } from '../controller/run.ts';
import type { ReduceOp, Tensor } from '../codecs/types.ts';
import { roundTripInPlace, type Codec } from '../codecs/wire.ts';
import { foldToPowerOfTwo } from './recursive-doubling.ts';
import { bufferRun, defineAllreduceAlgorithm, type AllreduceCost, type LinkCost } from './registry.ts';

/**
 * Recursive halving-doubling allreduce (Rabenseifner's), for tensors too big
 * for recursive doubling to be cheap and too small for the ring's 2(N-1) hops
 * to pay: a reduce-scatter by recursive halving, then an allgather by
 * recursive doubling. With P ranks cut the tensor into P blocks; in round k of
 * the reduce-scatter every rank swaps half of the blocks it still holds with
 * the rank at distance P/2^(k+1), keeps the half its index selects and reduces
 * the partner's copy of that half in. After log2(P) rounds each rank holds its
 * own block fully reduced; the allgather runs the rounds backwards, doubling
 * what each holds. Each rank sends 2(P-1)/P of the tensor, the ring's bytes,
 * in 2·log2(P) rounds; recursive doubling sends all of it log2(P) times.
 *
 * A size N that is not a power of two is folded as recursive-doubling.ts does
 * (MPICH's way): with P the largest power of two <= N and E = N - P, ranks
 * 0..2E-1 pair up; each even one hands its tensor to the odd one after it and
 * sits out, P ranks remain; at the end the odd ones hand the result back.
 *
 * Every rank ends with the same bits: each block is reduced on one rank only,
 * which rounds it through the codec before the allgather, so what it keeps is
 * what the others decode; everything sent after that is exact.
 *
 * Every exchange sends at least one message, an empty one for an empty range
 * (block-exchange.ts), so every rank's result waits on a chain of messages
 * from every other rank, as with recursive doubling.
 *
 * Tags: the phase the registry gives it; step 0 folds in, steps 1..log2(P) halve,
 * steps log2(P)+1..2·log2(P) double, step 2·log2(P)+1 folds out; segment index in `chunk`.
 */
/** Reduces `buf` in place over all ranks; `finish` (average, postscale) runs once per fully reduced block. */
export async function halvingDoublingAllreduce(
  run: Run,
  buf: Tensor,
  op: ReduceOp,
  codec: Codec,
  finish: (t: Tensor) => void,
  phase: number,
): Promise<void> {
  const { rank, size } = run.comm;
  const { p, extra, rounds, index, actual } = foldToPowerOfTwo(rank, size);
  const blocks = splitEven(buf.length, p);
  /** Elements of blocks [first, first + n): contiguous, as splitEven lays them out. */
  const span = (first: number, n: number): Range => ({
    offset: blocks[first].offset,
    count: blocks[first + n - 1].offset + blocks[first + n - 1].count - blocks[first].offset,
  });
  const whole: Range = { offset: 0, count: buf.length };
  const { send, receive } = blockExchange(run, buf, op, codec, phase, 'halving-doubling', buf.length);

  const last = 2 * rounds + 1;
  // Fold in: an even rank below 2E gives its tensor to the odd rank after it and waits for the result.
  if (rank < 2 * extra && rank % 2 === 0) {
    send(0, rank + 1, whole, 0);
    await receive(last, rank + 1, whole, 0, false);
    return;
  }
  if (rank < 2 * extra) await receive(0, rank - 1, whole, 0, true);

  // The P remaining ranks, renumbered 0..P-1 (foldToPowerOfTwo); block b ends up reduced on renumbered rank b.
  // Reduce-scatter: this rank holds blocks [lo, lo + 2·half) and gives away the half its index does not select.
  let lo = 0;
  for (let k = 0; k < rounds; k++) {
    const half = p >> (k + 1);
    const partner = actual(index ^ half);
    const upper = (index & half) !== 0;
    const give = upper ? lo : lo + half;
    if (upper) lo += half;
    send(k + 1, partner, span(give, half), give);
    await receive(k + 1, partner, span(lo, half), lo, true);
  }
  const own = buf.subarray(blocks[index].offset, blocks[index].offset + blocks[index].count);
  finish(own);
  roundTripInPlace(codec, own);
  // Allgather: this rank holds blocks [lo, lo + held), its partner the same number next to them.
  for (let k = 0, held = 1; k < rounds; k++, held *= 2) {
    const partner = actual(index ^ held);
    const theirs = lo ^ held;
    send(rounds + k + 1, partner, span(lo, held), lo);
    await receive(rounds + k + 1, partner, span(theirs, held), theirs, false);
    lo = Math.min(lo, theirs);
  }
  // Fold out: hand the result back to the even rank that sat out.
  if (rank < 2 * extra) send(last, rank - 1, whole, 0);
}

/**
 * Reduce-scatter by recursive halving, allgather by recursive doubling over the largest power of
 * two P <= N: 2 log2 P alpha + 2(P-1)/P n beta; the fold in and out of the others (when N is not a
 * power of two) moves the whole vector twice, counted as recursive doubling counts it.
 */
function halvingDoublingCost(n: number, bytes: number, link: LinkCost): AllreduceCost {
  if (n <= 1) return { s: 0, bytesSent: 0, messages: 0 };
  const p = 2 ** Math.floor(Math.log2(n));
  const fold = p === n ? 0 : 2;
  const messages = 2 * Math.log2(p) + fold;
  const bytesSent = (2 * (p - 1) * bytes) / p + fold * bytes;
  return { s: messages * link.alphaS + bytesSent * link.betaSPerByte, bytesSent, messages };
}

/**
 * Middle sizes (up to mediumBytes) on 4, 8, 16… ranks: the ring's bytes in fewer rounds. On other
 * sizes its fold moves the whole tensor in and out, which takes its saving away; on 2 ranks it is
 * the ring's one exchange of halves.
 */
export const HALVING_DOUBLING = defineAllreduceAlgorithm({
  name: 'halving-doubling',
  order: 20,
  enabled: ({ bytes, size, mediumBytes }) => size > 2 && bytes <= mediumBytes && (size & (size - 1)) === 0,
  run: bufferRun('halving-doubling', halvingDoublingAllreduce),
  cost: halvingDoublingCost,
});
