import { blockExchange } from './block-exchange.ts';
import { splitEven } from './partition.ts';
import type { Run } from './run.ts';
import type { ReduceOp, Tensor } from './types.ts';
import { roundTripInPlace, type Codec } from './wire.ts';

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
 * empty block (block-exchange.ts), and every owner waits on every rank before
 * it sends, so every rank's result waits on every rank's data.
 *
 * Tags: phase PHASE_TWO_SHOT; step 1 the reduce-scatter, step 2 the
 * allgather; segment index in `chunk`.
 */
export const PHASE_TWO_SHOT = 7;

/** Reduces `buf` in place over all ranks; `finish` (average, postscale) runs once, on this rank's own block. */
export async function twoShotAllreduce(
  run: Run,
  buf: Tensor,
  op: ReduceOp,
  codec: Codec,
  finish: (t: Tensor) => void,
): Promise<void> {
  const { rank, size } = run.comm;
  const blocks = splitEven(buf.length, size);
  const own = blocks[rank];
  const { send, receive } = blockExchange(run, buf, op, codec, PHASE_TWO_SHOT, 'two-shot', own.count);
  // Each rank starts with the one after it, so no rank is everyone's first.
  const others = Array.from({ length: size - 1 }, (_, d) => (rank + 1 + d) % size);

  // Shot one: each other rank's block to its owner; the copies of this rank's own block reduced in, in a fixed order.
  for (const to of others) send(1, to, blocks[to], to);
  for (const from of others) await receive(1, from, own, rank, true);
  const mine = buf.subarray(own.offset, own.offset + own.count);
  finish(mine);
  roundTripInPlace(codec, mine);
  // Shot two: this rank's reduced block to every other rank, theirs over the rest of `buf`.
  for (const to of others) send(2, to, own, rank);
  for (const from of others) await receive(2, from, blocks[from], from, false);
}
