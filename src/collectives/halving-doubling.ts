import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { segmentsOf, splitEven, type Range } from './partition.ts';
import { foldToPowerOfTwo } from './recursive-doubling.ts';
import { reduceInto } from './reduce.ts';
import type { Run } from './run.ts';
import type { ReduceOp, Tensor } from './types.ts';
import { elementsIn, roundTripInPlace, type Codec } from './wire.ts';

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
 * (tensors shorter than P): each pair's first message carries the cached
 * agreement's fingerprint on the fast path (run.ts), and every rank's result
 * then waits on a chain of messages from every other rank, as with recursive
 * doubling.
 *
 * Tags: phase PHASE_HALVING_DOUBLING; step 0 folds in, steps 1..log2(P) halve,
 * steps log2(P)+1..2·log2(P) double, step 2·log2(P)+1 folds out; segment index in `chunk`.
 */
export const PHASE_HALVING_DOUBLING = 6;

/** Reduces `buf` in place over all ranks; `finish` (average, postscale) runs once per fully reduced block. */
export async function halvingDoublingAllreduce(run: Run, buf: Tensor, op: ReduceOp, codec: Codec, finish: (t: Tensor) => void): Promise<void> {
  const { rank, size } = run.comm;
  const { p, extra, rounds, index, actual } = foldToPowerOfTwo(rank, size);
  const per = run.segmentElements(codec);
  // Lossy codecs decode into this, one segment at a time; raw codecs hand out views of the payload.
  const scratch = codec.lossy ? new Float32Array(Math.min(per, buf.length)) : undefined;
  const blocks = splitEven(buf.length, p);
  /** Elements of blocks [first, first + n): contiguous, as splitEven lays them out. */
  const span = (first: number, n: number): Range => ({ offset: blocks[first].offset, count: blocks[first + n - 1].offset + blocks[first + n - 1].count - blocks[first].offset });
  const whole: Range = { offset: 0, count: buf.length };
  // One message at least, even for an empty range (see above).
  const pieces = (r: Range): Range[] => (r.count === 0 ? [r] : segmentsOf(r, per));

  const send = (step: number, to: number, r: Range, block: number): void => {
    pieces(r).forEach((seg, j) => {
      const v = buf.subarray(seg.offset, seg.offset + seg.count);
      const bytes = codec.encode(v);
      run.send(to, run.tag(PHASE_HALVING_DOUBLING, step, j), bytes);
      run.chunkEvent('chunk-send', 'halving-doubling', step, rank, to, block, seg, bytes.byteLength, v);
    });
  };

  /** Receives `r` from `from`: reduced into `buf` (`reduce`), or written over it. */
  const receive = async (step: number, from: number, r: Range, block: number, reduce: boolean): Promise<void> => {
    const segs = pieces(r);
    for (let j = 0; j < segs.length; j++) {
      const seg = segs[j];
      const payload = await run.recv(from, run.tag(PHASE_HALVING_DOUBLING, step, j));
      if (elementsIn(codec, payload) !== seg.count) {
        throw new RingtrainError(ErrorCode.Transport, `halving-doubling: rank ${from} sent ${elementsIn(codec, payload)} elements where ${seg.count} were expected; the ranks' tensors or versions differ`, { from });
      }
      const target = buf.subarray(seg.offset, seg.offset + seg.count);
      if (reduce) {
        const incoming = codec.decode(payload, buf, scratch?.subarray(0, seg.count));
        reduceInto(op, target, incoming);
        run.chunkEvent('chunk-recv', 'halving-doubling', step, from, rank, block, seg, payload.byteLength, incoming, target);
      } else {
        const got = codec.decode(payload, buf, target);
        if (got !== target) target.set(got);
        run.chunkEvent('chunk-recv', 'halving-doubling', step, from, rank, block, seg, payload.byteLength, target, target);
      }
    }
  };

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
