/**
 * The ring allreduce: a reduce-scatter round the ring, then an allgather (ring.ts), 2(N-1) steps
 * with every link busy at once, bandwidth-optimal. It is the one algorithm on the ring's path:
 * int8 and top-k with error feedback and observed (verified) reductions go round it at any size,
 * and it takes whatever no algorithm before it in the list did.
 */
import type { Communicator } from '../../comm/interface.ts';
import { splitEven } from '../codecs/partition.ts';
import { finish, scaleInPlace } from '../codecs/reduce.ts';
import { ringAllgather, ringReduceScatter } from '../transfer/ring.ts';
import type { Run } from '../controller/run.ts';
import { topkAllreduceInPlace, topkRatio } from '../transfer/topk.ts';
import type { ReduceSettings, Tensor } from '../codecs/types.ts';
import { codecFor, encodeSegment, roundTripInPlace } from '../codecs/wire.ts';
import { defineAllreduceAlgorithm, type AllreduceCost, type LinkCost } from './registry.ts';

/**
 * The data part of a ring allreduce, in place on `buf` (shared with tensor fusion).
 * With error feedback the residual holds sum-domain values (after prescale) at
 * the positions this rank sends in reduce-scatter and result-domain values in
 * its own chunk: each position always in the same one while the size holds.
 */
export async function ringAllreduceInPlace(
  run: Run,
  buf: Tensor,
  s: ReduceSettings,
  residual = s.errorFeedback,
): Promise<void> {
  const { size } = run.comm;
  scaleInPlace(buf, s.prescale);
  // Sparse pairs are gathered, not reduced along the ring (topk.ts); every rank then holds the sum.
  const ratio = topkRatio(s.compression);
  if (ratio !== null) {
    await topkAllreduceInPlace(run, buf as Float32Array, ratio, residual);
    return finish(buf, s, size);
  }
  const codec = codecFor(s.compression, buf);
  const chunks = splitEven(buf.length, size);
  // Going ahead on the cache, partial sums stay apart from `buf` until every rank is known to have gone ahead too:
  // in the messages received where their bytes are the tensor's, else in a buffer as long as it.
  const apart = run.goingAhead && size > 2;
  const inMessages = !codec.lossy && (buf instanceof Float32Array || buf instanceof Int32Array);
  const partial = !apart ? buf : inMessages ? 'received' : takePartial(run.comm, buf);
  try {
    await run.phase('reduce-scatter', () =>
      ringReduceScatter(run, buf, chunks, s.op, codec, {
        residual,
        observe: s.observe,
        observeSent: s.observeSent,
        partial,
        finishOwn: size > 1 ? (segment) => finish(segment, s, size) : undefined,
      }),
    );
  } finally {
    // Its sums were lent to the links: it goes back to the pool once no link reads it.
    if (partial !== buf && partial !== 'received') void run.lentSettled().then(() => givePartial(run.comm, partial));
  }
  // With company, reduce-scatter finished the own chunk segment by segment (finishOwn).
  if (size === 1) finish(buf, s, size);
  // Allgather makes the owner keep exactly what the others receive (lossy codecs); alone, round it here.
  if (size === 1) {
    if (residual) encodeSegment(codec, buf, residual);
    else roundTripInPlace(codec, buf);
  }
  await run.phase('allgather', () => ringAllgather(run, buf, chunks, codec, { residual }));
}

/** Buffers for the ring's partial sums on the fast path, per communicator: reused call after call (a step's gradient keeps its length). */
const partials = new WeakMap<Communicator, Tensor[]>();
/**
 * Kept per communicator: as many as run at once in practice, the pieces of one allreduceInPlace
 * or a step's gradient buckets (at most 16 of them, src/engine/grad-buckets.ts: together no more
 * than one gradient).
 */
const MAX_FREE_PARTIALS = 16;

function takePartial(comm: Communicator, like: Tensor): Tensor {
  const free = partials.get(comm);
  const i = free ? free.findIndex((t) => t.constructor === like.constructor && t.length === like.length) : -1;
  if (i >= 0) return free!.splice(i, 1)[0];
  return new (like.constructor as new (n: number) => Tensor)(like.length);
}

function givePartial(comm: Communicator, t: Tensor): void {
  let free = partials.get(comm);
  if (!free) partials.set(comm, (free = []));
  if (free.length < MAX_FREE_PARTIALS) free.push(t);
}

/** 2(N-1) alpha + 2(N-1)/N n beta. */
export function ringCost(n: number, bytes: number, link: LinkCost): AllreduceCost {
  if (n <= 1) return { s: 0, bytesSent: 0, messages: 0 };
  const messages = 2 * (n - 1);
  const bytesSent = (messages * bytes) / n;
  return { s: messages * link.alphaS + bytesSent * link.betaSPerByte, bytesSent, messages };
}

/** Last in the list: the large tensors, and whatever needs the ring's path. */
export const RING = defineAllreduceAlgorithm({
  name: 'ring',
  order: 1000,
  ringPath: true,
  enabled: () => true,
  run: (run, buf, s) => ringAllreduceInPlace(run, buf, s),
  cost: ringCost,
  // Every chunk must hold an element, or a rank whose chunk is empty could finish without
  // hearing of a rank that fell back.
  mayGoAhead: (count, size) => count >= size,
  // Without a prescale, error feedback or top-k it writes nothing into `buf` or the residual until
  // every rank has gone ahead (ring.ts), after which it cannot fall back: no snapshot.
  writesEarly: (s) => s.prescale !== 1 || s.errorFeedback !== undefined || topkRatio(s.compression) !== null,
});
