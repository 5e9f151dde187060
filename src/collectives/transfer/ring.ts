import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { segmentsOf, type Range } from '../codecs/partition.ts';
import { reduceInto, reduceTo } from '../codecs/reduce.ts';
import type { Run } from '../controller/run.ts';
import type { ReduceOp, Tensor } from '../codecs/types.ts';
import { elementsIn, encodeSegment, type Codec } from '../codecs/wire.ts';
import { SEND_AHEAD, SendAhead } from './send-ahead.ts';

/**
 * The ring loops. Every rank sends to its right neighbour and receives from
 * its left. Chunks are cut into segments, and a segment is passed on as soon
 * as it has been received (and reduced), so sending, receiving and reducing
 * overlap along the ring instead of waiting for whole chunks.
 *
 * Tags: phase in the high half of `step`, ring step in the low half, segment index in `chunk`.
 */
export const PHASE_REDUCE_SCATTER = 1;
export const PHASE_ALLGATHER = 2;
export const PHASE_BROADCAST = 3;
export const PHASE_ALLTOALL = 4;

const mod = (a: number, n: number) => ((a % n) + n) % n;

/** Checks a payload's size before decoding it, so nothing is written past the segment. */
function expectCount(payload: Uint8Array, codec: Codec, seg: Range, from: number, what: string): void {
  const got = elementsIn(codec, payload);
  if (got !== seg.count) {
    throw new RingtrainError(
      ErrorCode.Transport,
      `${what}: rank ${from} sent ${got} elements where ${seg.count} were expected; the ranks' tensors or versions differ`,
      { from },
    );
  }
}

/** Decodes a received segment straight into its place in `buf`. */
function decodeInto(codec: Codec, payload: Uint8Array, buf: Tensor, seg: Range): Tensor {
  const target = buf.subarray(seg.offset, seg.offset + seg.count);
  const got = codec.decode(payload, buf, target);
  if (got !== target) target.set(got);
  return target;
}

/**
 * Reduce-scatter: afterwards this rank's `chunks[rank]` of `buf` holds the
 * reduction of that chunk over all ranks (other chunks hold partial sums).
 * Step s: send chunk (rank-s-1), receive chunk (rank-s-2) and reduce it in.
 *
 * `residual` (error feedback, lossy codecs): this rank sends every chunk but
 * its own exactly once, so one residual per position of `buf` serves them all.
 *
 * `partial` (as long as `buf`; default `buf` itself): where the partial sums
 * this rank passes on are kept. Given one of its own, `buf` is read but not
 * written until the last step, whose first message has passed through every
 * rank, each of which checked the agreement of the rank before it: from there
 * the run is `agreed` (run.ts), and a fast path that fell back before it finds
 * `buf` as it was, with nothing to put back.
 */
export async function ringReduceScatter(
  run: Run,
  buf: Tensor,
  chunks: Range[],
  op: ReduceOp,
  codec: Codec,
  residual?: Float32Array,
  observe?: (offset: number, values: Float32Array) => void,
  partial: Tensor = buf,
): Promise<void> {
  const { rank, size } = run.comm;
  if (size === 1) return;
  const right = mod(rank + 1, size);
  const left = mod(rank - 1, size);
  const per = run.segmentElements(codec);
  // Lossy codecs decode into this scratch space instead of a new array per segment.
  const scratch = codec.lossy ? new Float32Array(per) : null;
  const sendSegment = (step: number, chunk: number, j: number, seg: Range, from: Tensor) => {
    const view = from.subarray(seg.offset, seg.offset + seg.count);
    // With feedback this rewrites the view, which this rank never reads again (allgather overwrites it).
    const bytes = encodeSegment(codec, view, residual?.subarray(seg.offset, seg.offset + seg.count));
    run.send(right, run.tag(PHASE_REDUCE_SCATTER, step, j), bytes);
    run.chunkEvent('chunk-send', 'reduce-scatter', step, rank, right, chunk, seg, bytes.byteLength, view);
  };
  // Step 0 needs nothing from anyone: its chunk goes a window ahead of what arrives (send-ahead.ts).
  const first = mod(rank - 1, size);
  const firstSegs = segmentsOf(chunks[first], per);
  const ahead = new SendAhead(firstSegs.length, (j) => sendSegment(0, first, j, firstSegs[j], buf));
  for (let step = 0; step < size - 1; step++) {
    const last = step === size - 2;
    const chunk = mod(rank - step - 2, size);
    const segs = segmentsOf(chunks[chunk], per);
    for (let j = 0; j < segs.length; j++) {
      const seg = segs[j];
      if (step === 0) ahead.before(j);
      const payload = await run.recv(left, run.tag(PHASE_REDUCE_SCATTER, step, j));
      if (last && j === 0) run.agreed();
      expectCount(payload, codec, seg, left, 'reduce-scatter');
      const incoming = codec.decode(payload, buf, scratch?.subarray(0, seg.count));
      if (observe && incoming instanceof Float32Array) observe(seg.offset, incoming);
      const mine = buf.subarray(seg.offset, seg.offset + seg.count);
      // This rank's own chunk (the last step) is finished in `buf`; the others' partial sums go to `partial`.
      const view = last || partial === buf ? mine : partial.subarray(seg.offset, seg.offset + seg.count);
      if (view === mine) reduceInto(op, view, incoming);
      else reduceTo(op, view, mine, incoming);
      run.chunkEvent('chunk-recv', 'reduce-scatter', step, left, rank, chunk, seg, payload.byteLength, incoming, view);
      // The chunk we just reduced is the one we pass on in the next step.
      if (!last) {
        sendSegment(step + 1, chunk, j, seg, partial);
        await run.sendsInFlightAtMost(2 * SEND_AHEAD);
      }
    }
    ahead.rest();
  }
}

/**
 * Allgather: before, this rank's `blocks[rank]` of `buf` is filled; after,
 * all blocks are. Blocks may differ in size (uneven allgather). Step s: send
 * block (rank-s), receive block (rank-s-1); received bytes are forwarded as
 * they came, without decoding and encoding again.
 *
 * `residual` (error feedback): this rank encodes only its own block here, the
 * positions it never sends in reduce-scatter.
 */
/**
 * Looks at a block of a gathered tensor as it arrives from `from`, before it is passed on or
 * used: throws to stop the gather, or gives the bytes to pass on (`forwarding`: this rank passes
 * it on); they must decode as the same values (signed-gather.ts checks signatures and adds its own).
 */
export type VetBlock = (block: number, payload: Uint8Array, from: number, forwarding: boolean) => Promise<Uint8Array>;

export async function ringAllgather(
  run: Run,
  buf: Tensor,
  blocks: Range[],
  codec: Codec,
  residual?: Float32Array,
  vet?: VetBlock,
): Promise<void> {
  const { rank, size } = run.comm;
  if (size === 1) return;
  const right = mod(rank + 1, size);
  const left = mod(rank - 1, size);
  const per = run.segmentElements(codec);
  const own = segmentsOf(blocks[rank], per);
  // This rank's own block goes a window ahead of what arrives (send-ahead.ts), the rest after step 0.
  const ahead = new SendAhead(own.length, (j) => {
    const seg = own[j];
    const view = buf.subarray(seg.offset, seg.offset + seg.count);
    const bytes = encodeSegment(codec, view, residual?.subarray(seg.offset, seg.offset + seg.count));
    // With a lossy codec the owner keeps what the others get, so every rank ends bitwise equal.
    if (codec.lossy && !residual) codec.decode(bytes, buf, view);
    run.send(right, run.tag(PHASE_ALLGATHER, 0, j), bytes);
    run.chunkEvent('chunk-send', 'allgather', 0, rank, right, rank, seg, bytes.byteLength, view);
  });
  for (let step = 0; step < size - 1; step++) {
    const block = mod(rank - step - 1, size);
    const segs = segmentsOf(blocks[block], per);
    for (let j = 0; j < segs.length; j++) {
      const seg = segs[j];
      if (step === 0) ahead.before(j);
      const payload = await run.recv(left, run.tag(PHASE_ALLGATHER, step, j));
      // Checked before it goes on: a rank that vets never passes on what fails, so a bad one names who handed it over.
      const onward = vet ? await vet(block, payload, left, step < size - 2) : payload;
      if (step < size - 2) {
        run.send(right, run.tag(PHASE_ALLGATHER, step + 1, j), onward);
        run.chunkEvent('chunk-send', 'allgather', step + 1, rank, right, block, seg, payload.byteLength);
        await run.sendsInFlightAtMost(2 * SEND_AHEAD);
      }
      expectCount(payload, codec, seg, left, 'allgather');
      const incoming = decodeInto(codec, payload, buf, seg);
      run.chunkEvent('chunk-recv', 'allgather', step, left, rank, block, seg, payload.byteLength, incoming, incoming);
    }
    ahead.rest();
  }
}

/**
 * Segments a broadcasting rank may have queued and not yet sent (4 MiB of 256 KiB segments):
 * enough to keep a link busy, where queueing a whole model's weights at once copied all of
 * them into frames.
 */
export const BROADCAST_WINDOW = 16;

/**
 * Pipelined broadcast along the ring starting at `root`: each rank forwards a
 * segment to its right neighbour as soon as it has it, so the whole tensor
 * takes about one transfer time plus (size-1) segment times. No rank queues
 * more than BROADCAST_WINDOW segments ahead of its link.
 */
export async function ringBroadcast(run: Run, buf: Tensor, root: number, codec: Codec): Promise<void> {
  const { rank, size } = run.comm;
  if (size === 1) return;
  const right = mod(rank + 1, size);
  const left = mod(rank - 1, size);
  const position = mod(rank - root, size); // 0 at the root, size-1 at the end of the chain
  const segs = segmentsOf({ offset: 0, count: buf.length }, run.segmentElements(codec));
  for (let j = 0; j < segs.length; j++) {
    const seg = segs[j];
    const tag = run.tag(PHASE_BROADCAST, 0, j);
    if (position === 0) {
      const view = buf.subarray(seg.offset, seg.offset + seg.count);
      const bytes = codec.encode(view);
      run.send(right, tag, bytes);
      run.chunkEvent('chunk-send', 'broadcast', 0, rank, right, 0, seg, bytes.byteLength, view);
      await run.sendsInFlightAtMost(BROADCAST_WINDOW);
      continue;
    }
    const payload = await run.recv(left, tag);
    if (position < size - 1) {
      run.send(right, tag, payload);
      run.chunkEvent('chunk-send', 'broadcast', position, rank, right, 0, seg, payload.byteLength);
      await run.sendsInFlightAtMost(BROADCAST_WINDOW);
    }
    expectCount(payload, codec, seg, left, 'broadcast');
    const incoming = decodeInto(codec, payload, buf, seg);
    run.chunkEvent('chunk-recv', 'broadcast', position - 1, left, rank, 0, seg, payload.byteLength, incoming, incoming);
  }
}
