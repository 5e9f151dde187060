import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { segmentsOf, splitEven, type Range } from './partition.ts';
import { reduceInto } from './reduce.ts';
import type { Run } from './run.ts';
import type { ReduceOp, Tensor } from './types.ts';
import { elementsIn, roundTripInPlace, type Codec } from './wire.ts';

/**
 * Two-shot allreduce over the full mesh: a reduce-scatter and an allgather,
 * each one round of direct messages. Cut the tensor into N blocks, block j
 * owned by rank j. Shot one: every rank sends block j to rank j, for every
 * other j, and each owner reduces the N copies of its block. Shot two: every
 * owner sends its reduced block to every other rank.
 *
 * Each rank sends 2(N-1)/N of the tensor, the ring's bytes and the fewest any
 * allreduce can send, in 2 rounds whatever N is: recursive doubling's rounds
 * on 4 ranks at three quarters of its bytes, and half the rounds of
 * halving-doubling. The price is 2(N-1) messages per rank, a link to every
 * other rank (the mesh every communicator has) and N-1 messages arriving at
 * once, so 'auto' uses it for middle sizes on few ranks, where a machine's
 * CPU, not the wire, carries the bytes: there, fewer bytes and fewer rounds
 * are both time.
 *
 * Every rank ends with the same bits: each block is reduced on its owner
 * only, which rounds it through the codec before shot two, so what it keeps
 * is what the others decode; shot two is exact.
 *
 * Every pair exchanges at least one message per shot, an empty one for an
 * empty block (tensors shorter than N): each pair's first message carries the
 * cached agreement's fingerprint on the fast path (run.ts), and every owner
 * waits on every rank before it sends, so every rank's result waits on every
 * rank's data.
 *
 * Tags: phase PHASE_TWO_SHOT; step 1 the reduce-scatter, step 2 the
 * allgather; segment index in `chunk`.
 */
export const PHASE_TWO_SHOT = 7;

/** Reduces `buf` in place over all ranks; `finish` (average, postscale) runs once, on this rank's own block. */
export async function twoShotAllreduce(run: Run, buf: Tensor, op: ReduceOp, codec: Codec, finish: (t: Tensor) => void): Promise<void> {
  const { rank, size } = run.comm;
  const per = run.segmentElements(codec);
  const blocks = splitEven(buf.length, size);
  const own = blocks[rank];
  // Lossy codecs decode into this, one segment at a time; raw codecs hand out views of the payload.
  const scratch = codec.lossy ? new Float32Array(Math.min(per, own.count)) : undefined;
  // One message at least, even for an empty block (see above).
  const pieces = (r: Range): Range[] => (r.count === 0 ? [r] : segmentsOf(r, per));
  // Each rank starts with the one after it, so no rank is everyone's first.
  const others = Array.from({ length: size - 1 }, (_, d) => (rank + 1 + d) % size);

  const send = (step: number, to: number, block: number): void => {
    pieces(blocks[block]).forEach((seg, j) => {
      const v = buf.subarray(seg.offset, seg.offset + seg.count);
      const bytes = codec.encode(v);
      run.send(to, run.tag(PHASE_TWO_SHOT, step, j), bytes);
      run.chunkEvent('chunk-send', 'two-shot', step, rank, to, block, seg, bytes.byteLength, v);
    });
  };

  /** Receives block `block` from `from`: reduced into `buf` (`reduce`), or written over it. */
  const receive = async (step: number, from: number, block: number, reduce: boolean): Promise<void> => {
    const segs = pieces(blocks[block]);
    for (let j = 0; j < segs.length; j++) {
      const seg = segs[j];
      const payload = await run.recv(from, run.tag(PHASE_TWO_SHOT, step, j));
      if (elementsIn(codec, payload) !== seg.count) {
        throw new RingtrainError(ErrorCode.Transport, `two-shot: rank ${from} sent ${elementsIn(codec, payload)} elements where ${seg.count} were expected; the ranks' tensors or versions differ`, { from });
      }
      const target = buf.subarray(seg.offset, seg.offset + seg.count);
      if (reduce) {
        const incoming = codec.decode(payload, buf, scratch?.subarray(0, seg.count));
        reduceInto(op, target, incoming);
        run.chunkEvent('chunk-recv', 'two-shot', step, from, rank, block, seg, payload.byteLength, incoming, target);
      } else {
        const got = codec.decode(payload, buf, target);
        if (got !== target) target.set(got);
        run.chunkEvent('chunk-recv', 'two-shot', step, from, rank, block, seg, payload.byteLength, target, target);
      }
    }
  };

  // Shot one: each other rank's block to its owner; the copies of this rank's own block reduced in, in a fixed order.
  for (const to of others) send(1, to, to);
  for (const from of others) await receive(1, from, rank, true);
  const mine = buf.subarray(own.offset, own.offset + own.count);
  finish(mine);
  roundTripInPlace(codec, mine);
  // Shot two: this rank's reduced block to every other rank, theirs over the rest of `buf`.
  for (const to of others) send(2, to, rank);
  for (const from of others) await receive(2, from, from, false);
}
