import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { segmentsOf, type Range } from '../codecs/partition.ts';
import { reduceInto, reduceTo } from '../codecs/reduce.ts';
import type { Phase } from '../../core/events.ts';
import type { Run } from '../controller/run.ts';
import type { ReduceOp, Tensor } from '../codecs/types.ts';
import { elementsIn, encodeSegment, type Codec } from '../codecs/wire.ts';

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

/**
 * Segments of its first chunk a rank sends ahead of what it has received (4 MiB of 256 KiB ones):
 * enough to keep the link busy. Queueing a whole first chunk at once (half the tensor on 2 ranks)
 * copied all of it into frames in one go, and over TCP the garbage collector then spent more time
 * on those frames than the ring on its sums.
 */
export const SEND_AHEAD = 16;

/**
 * Sends `segs` (by index) as the ring's first step receives: `upTo(k)` sends those below k not yet
 * sent. Every rank sends its first SEND_AHEAD at once and one more per segment received, so no
 * rank waits on another that holds back (by induction along the ring).
 */
function sendAhead(segs: Range[], send: (seg: Range, j: number) => void) {
  let sent = 0;
  const upTo = (k: number) => {
    for (const end = Math.min(k, segs.length); sent < end; sent++) send(segs[sent], sent);
  };
  upTo(SEND_AHEAD);
  return upTo;
}

/** Checks a payload's size before decoding it, so nothing is written past the segment. */
function expectCount(
  payload: Uint8Array,
  codec: Codec,
  seg: Range,
  from: number,
  ring: Pick<RingSpec, 'label' | 'members'>,
): void {
  const got = elementsIn(codec, payload);
  if (got !== seg.count) {
    const among = ring.members ? ` in the ring of ranks ${ring.members.join(',')}` : '';
    throw new RingtrainError(
      ErrorCode.Transport,
      `${ring.label}: rank ${from} sent ${got} elements where ${seg.count} were expected${among}; the ranks' tensors${ring.members ? ', groups' : ''} or versions differ`,
      { from },
    );
  }
}

/**
 * Gives a received message back to its link (Communicator.release) once nothing reads it: at once,
 * or when it was lent onward, once that send is done with it (a failed one leaves it to the collector).
 */
function releaseWhenSent(run: Run, from: number, payload: Uint8Array, forwarded: Promise<void> | null): void {
  if (!forwarded) return run.comm.release?.(from, payload);
  forwarded.then(
    () => run.comm.release?.(from, payload),
    () => {},
  );
}

/**
 * Runs one receive loop per ring step, all at once, so each message is taken as it arrives. The
 * left neighbour sends step s+1's segment j as soon as its own step s segment j is in, so its
 * steps' messages come interleaved; taking them one step at a time held the later steps' (up to a
 * chunk, a quarter of the tensor at N = 4) until the earlier step was done. A loop's steps touch
 * only their own chunk. The first loop to throw stops the others at their next message.
 */
async function everyStepAtOnce(
  steps: number,
  loop: (step: number, stopped: () => boolean) => Promise<void>,
): Promise<void> {
  let failed = false;
  const stopped = () => failed;
  const loops = Array.from({ length: steps }, (_, step) =>
    loop(step, stopped).catch((e: unknown) => {
      failed = true;
      throw e;
    }),
  );
  await Promise.all(loops);
}

/** Decodes a received segment straight into its place in `buf`. */
function decodeInto(codec: Codec, payload: Uint8Array, buf: Tensor, seg: Range): Tensor {
  const target = buf.subarray(seg.offset, seg.offset + seg.count);
  const got = codec.decode(payload, buf, target);
  if (got !== target) target.set(got);
  return target;
}

/**
 * The ring a loop runs on: `members`, the ranks in ring order (every rank of the communicator
 * by default; hierarchical.ts runs rings among some of them), where its messages are tagged
 * (`phase`, steps counted from `firstStep`) and the phase its chunk events and errors name.
 */
export interface RingSpec {
  members?: readonly number[];
  phase: number;
  firstStep: number;
  label: Phase;
  /**
   * An empty chunk still sends one (empty) message per hop, so every member's result waits on a
   * message from every other: the fast path's rule (run.ts) for rings whose chunks may be empty.
   */
  emptyChunkMessages?: boolean;
}

const WHOLE_REDUCE_SCATTER: RingSpec = { phase: PHASE_REDUCE_SCATTER, firstStep: 0, label: 'reduce-scatter' };
const WHOLE_ALLGATHER: RingSpec = { phase: PHASE_ALLGATHER, firstStep: 0, label: 'allgather' };

/** This rank's place in a ring: `at` of `n`, its neighbours' ranks, its tags and a range's segments. */
interface Place {
  n: number;
  at: number;
  left: number;
  right: number;
  /**
   * Whether this is the communicator's own ring (no `members` given), so a message that went all
   * the way round passed through every rank; a ring among some ranks leaves `agreed` to its caller.
   */
  whole: boolean;
  tag(step: number, j: number): ReturnType<Run['tag']>;
  segments(r: Range): Range[];
}

function placeIn(run: Run, ring: RingSpec, codec: Codec): Place {
  const { rank, size } = run.comm;
  const members = ring.members;
  const n = members ? members.length : size;
  const at = members ? members.indexOf(rank) : rank;
  if (at < 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${ring.label}: rank ${rank} runs a ring among ranks ${members!.join(',')} without being one of them`,
    );
  const rankAt = (i: number) => (members ? members[mod(i, n)] : mod(i, n));
  const per = run.segmentElements(codec);
  return {
    n,
    at,
    left: rankAt(at - 1),
    right: rankAt(at + 1),
    whole: !members,
    tag: (step, j) => run.tag(ring.phase, ring.firstStep + step, j),
    segments: (r) => (r.count === 0 && ring.emptyChunkMessages ? [r] : segmentsOf(r, per)),
  };
}

export interface ReduceScatterOptions {
  /**
   * Error feedback, lossy codecs: this rank sends every chunk but its own exactly once, so one
   * residual per position of `buf` serves them all.
   */
  residual?: Float32Array;
  observe?: (offset: number, values: Float32Array) => void;
  /** Sees each segment as it is handed to the communicator (lossless codecs: the values are the bytes sent). */
  observeSent?: (offset: number, values: Float32Array) => void;
  /**
   * Where the partial sums this rank passes on are kept (as long as `buf`; default `buf` itself).
   * Given one of its own, `buf` is read but not written until the last step, whose first message
   * has passed through every rank, each of which checked the agreement of the rank before it:
   * from there the run is `agreed` (run.ts), and a fast path that fell back before it finds `buf`
   * as it was, with nothing to put back. 'received': the same, with no buffer at all: each partial
   * sum is made in the message that brought its other operand and sent on from there (lossless
   * codecs, float32 and int32 tensors: the message's bytes are the tensor's).
   */
  partial?: Tensor | 'received';
  /**
   * Finishes each segment of this rank's own chunk as soon as its last reduction is in (an
   * average's scale), while it is still in cache: no pass over the whole chunk between the phases,
   * which every rank's allgather waited for. Elementwise, so the same bits as finishing the chunk after.
   */
  finishOwn?: (segment: Tensor) => void;
  ring?: RingSpec;
}

/**
 * Reduce-scatter: afterwards this rank's `chunks[at]` of `buf` (`at` its place in the ring; its
 * rank on the whole ring) holds the reduction of that chunk over all members (other chunks hold
 * partial sums). Step s: send chunk (at-s-1), receive chunk (at-s-2) and reduce it in.
 */
export async function ringReduceScatter(
  run: Run,
  buf: Tensor,
  chunks: Range[],
  op: ReduceOp,
  codec: Codec,
  options: ReduceScatterOptions = {},
): Promise<void> {
  const placed = placeIn(run, options.ring ?? WHOLE_REDUCE_SCATTER, codec);
  if (placed.n === 1) return;
  await expecting(run, placed.left, buf.byteLength, () =>
    reduceScatterSteps(run, placed, buf, chunks, op, codec, options),
  );
}

/**
 * Runs `body` while the communicator expects up to `bytes` from `left`: a left neighbour may run up to
 * N−2 steps ahead of this rank, so whole chunks (size/N each) can arrive before they are asked for,
 * which a fixed budget for unasked messages (64 MiB a peer) would call a flood on a large tensor.
 */
async function expecting(run: Run, left: number, bytes: number, body: () => Promise<void>): Promise<void> {
  const ended = run.comm.expect?.(left, bytes);
  try {
    await body();
  } finally {
    ended?.();
  }
}

async function reduceScatterSteps(
  run: Run,
  placed: Place,
  buf: Tensor,
  chunks: Range[],
  op: ReduceOp,
  codec: Codec,
  { residual, observe, observeSent, partial = buf, finishOwn, ring = WHOLE_REDUCE_SCATTER }: ReduceScatterOptions,
): Promise<void> {
  const { n, at, left, right, whole, tag, segments } = placed;
  const { rank } = run.comm;
  // Lossy codecs decode into this scratch space instead of a new array per segment.
  const scratch = codec.lossy ? new Float32Array(run.segmentElements(codec)) : null;
  const sendSegment = (step: number, chunk: number, j: number, seg: Range, view: Tensor) => {
    // With feedback this rewrites the view, which this rank never reads again (allgather overwrites it).
    const bytes = encodeSegment(codec, view, residual?.subarray(seg.offset, seg.offset + seg.count));
    if (observeSent && view instanceof Float32Array) observeSent(seg.offset, view);
    // Lent, not copied: no step writes a chunk again once it went out (a rank reduces each chunk
    // once, before sending it on); the allgather, which does, waits for these first.
    const sent = run.lend(right, tag(step, j), bytes);
    run.chunkEvent('chunk-send', ring.label, step, rank, right, chunk, seg, bytes.byteLength, view);
    return sent;
  };
  const reduceSegment = (step: number, chunk: number, j: number, seg: Range, payload: Uint8Array) => {
    const last = step === n - 2;
    expectCount(payload, codec, seg, left, ring);
    const incoming = codec.decode(payload, buf, scratch?.subarray(0, seg.count));
    if (observe && incoming instanceof Float32Array) observe(seg.offset, incoming);
    const mine = buf.subarray(seg.offset, seg.offset + seg.count);
    if (!last && partial === 'received') {
      // The partial sum is made in the message itself and passed on from there (mine op incoming,
      // the bits the other branch gives); the message goes back to its link once it went on.
      reduceTo(op, incoming, mine, incoming);
      run.chunkEvent('chunk-recv', ring.label, step, left, rank, chunk, seg, payload.byteLength, incoming, incoming);
      return releaseWhenSent(run, left, payload, sendSegment(step + 1, chunk, j, seg, incoming));
    }
    // This rank's own chunk (the last step) is finished in `buf`; the others' partial sums go to `partial`.
    const view =
      last || partial === buf || partial === 'received' ? mine : partial.subarray(seg.offset, seg.offset + seg.count);
    if (view === mine) reduceInto(op, view, incoming);
    else reduceTo(op, view, mine, incoming);
    run.chunkEvent('chunk-recv', ring.label, step, left, rank, chunk, seg, payload.byteLength, incoming, view);
    if (last) finishOwn?.(view);
    // Summed (`incoming` may be a view of it): the transport may reuse its bytes for a later message.
    run.comm.release?.(left, payload);
    // The chunk we just reduced is the one we pass on in the next step.
    if (!last) void sendSegment(step + 1, chunk, j, seg, view);
  };
  // Step 0 needs nothing from anyone: its segments go out ahead of what arrives.
  const first = mod(at - 1, n);
  const sendFirst = sendAhead(segments(chunks[first]), (seg, j) => {
    void sendSegment(0, first, j, seg, buf.subarray(seg.offset, seg.offset + seg.count));
  });
  await everyStepAtOnce(n - 1, async (step, stopped) => {
    const chunk = mod(at - step - 2, n);
    const segs = segments(chunks[chunk]);
    for (let j = 0; j < segs.length; j++) {
      const payload = await run.recv(left, tag(step, j));
      if (stopped()) return;
      if (step === n - 2 && j === 0 && whole) run.agreed();
      reduceSegment(step, chunk, j, segs[j], payload);
      if (step === 0) sendFirst(j + 1 + SEND_AHEAD);
      // A rank that receives faster than its right link drains holds a window of frames, not a growing queue.
      await run.sendsInFlightAtMost(2 * SEND_AHEAD);
    }
    if (step === 0) sendFirst(Infinity);
  });
}

/**
 * Looks at a block of a gathered tensor as it arrives from `from`, before it is passed on or
 * used: throws to stop the gather, or gives the bytes to pass on (`forwarding`: this rank passes
 * it on); they must decode as the same values (signed-gather.ts checks signatures and adds its own).
 */
export type VetBlock = (block: number, payload: Uint8Array, from: number, forwarding: boolean) => Promise<Uint8Array>;

export interface AllgatherOptions {
  /** Error feedback: this rank encodes only its own block here, the positions it never sends in reduce-scatter. */
  residual?: Float32Array;
  vet?: VetBlock;
  ring?: RingSpec;
}

/**
 * Allgather: before, this rank's `blocks[at]` of `buf` is filled; after, all blocks are. Blocks
 * may differ in size (uneven allgather). Step s: send block (at-s), receive block (at-s-1);
 * received bytes are forwarded as they came, without decoding and encoding again.
 */
export async function ringAllgather(
  run: Run,
  buf: Tensor,
  blocks: Range[],
  codec: Codec,
  options: AllgatherOptions = {},
): Promise<void> {
  const placed = placeIn(run, options.ring ?? WHOLE_ALLGATHER, codec);
  if (placed.n === 1) return;
  await expecting(run, placed.left, buf.byteLength, () => allgatherSteps(run, placed, buf, blocks, codec, options));
}

async function allgatherSteps(
  run: Run,
  placed: Place,
  buf: Tensor,
  blocks: Range[],
  codec: Codec,
  { residual, vet, ring = WHOLE_ALLGATHER }: AllgatherOptions,
): Promise<void> {
  const { n, at, left, right, tag, segments } = placed;
  const { rank } = run.comm;
  // What was lent before (reduce-scatter's partial sums) may still be read by a link: the blocks
  // received here overwrite them only once it is not.
  let lentBefore: Promise<void> | null = run.lentSettled();
  const sendOwn = sendAhead(segments(blocks[at]), (seg, j) => {
    const view = buf.subarray(seg.offset, seg.offset + seg.count);
    const bytes = encodeSegment(codec, view, residual?.subarray(seg.offset, seg.offset + seg.count));
    // With a lossy codec the owner keeps what the others get, so every rank ends bitwise equal.
    if (codec.lossy && !residual) codec.decode(bytes, buf, view);
    void run.lend(right, tag(0, j), bytes);
    run.chunkEvent('chunk-send', ring.label, 0, rank, right, at, seg, bytes.byteLength, view);
  });
  await everyStepAtOnce(n - 1, async (step, stopped) => {
    const block = mod(at - step - 1, n);
    const segs = segments(blocks[block]);
    for (let j = 0; j < segs.length; j++) {
      const seg = segs[j];
      const payload = await run.recv(left, tag(step, j));
      if (stopped()) return;
      // Checked before it goes on: a rank that vets never passes on what fails, so a bad one names who handed it over.
      const onward = vet ? await vet(block, payload, left, step < n - 2) : payload;
      if (stopped()) return;
      const forwarded = step < n - 2 ? run.lend(right, tag(step + 1, j), onward) : null;
      if (forwarded) {
        run.chunkEvent('chunk-send', ring.label, step + 1, rank, right, block, seg, payload.byteLength);
        await run.sendsInFlightAtMost(2 * SEND_AHEAD);
      }
      expectCount(payload, codec, seg, left, ring);
      if (lentBefore) await lentBefore;
      lentBefore = null;
      if (stopped()) return;
      const incoming = decodeInto(codec, payload, buf, seg);
      run.chunkEvent('chunk-recv', ring.label, step, left, rank, block, seg, payload.byteLength, incoming, incoming);
      // Copied into `buf`: nothing reads it here any more, and a message sent on goes back once sent.
      releaseWhenSent(run, left, payload, forwarded);
      if (step === 0) sendOwn(j + 1 + SEND_AHEAD);
    }
    if (step === 0) sendOwn(Infinity);
  });
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
      void run.lend(right, tag, bytes);
      run.chunkEvent('chunk-send', 'broadcast', 0, rank, right, 0, seg, bytes.byteLength, view);
      await run.sendsInFlightAtMost(BROADCAST_WINDOW);
      continue;
    }
    const payload = await run.recv(left, tag);
    const forwarded = position < size - 1 ? run.lend(right, tag, payload) : null;
    if (forwarded) {
      run.chunkEvent('chunk-send', 'broadcast', position, rank, right, 0, seg, payload.byteLength);
      await run.sendsInFlightAtMost(BROADCAST_WINDOW);
    }
    expectCount(payload, codec, seg, left, { label: 'broadcast' });
    const incoming = decodeInto(codec, payload, buf, seg);
    run.chunkEvent('chunk-recv', 'broadcast', position - 1, left, rank, 0, seg, payload.byteLength, incoming, incoming);
    releaseWhenSent(run, left, payload, forwarded);
  }
}
