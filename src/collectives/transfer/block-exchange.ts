import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Phase } from '../../core/events.ts';
import { segmentsOf, type Range } from '../codecs/partition.ts';
import { reduceInto } from '../codecs/reduce.ts';
import type { Run } from '../controller/run.ts';
import type { ReduceOp, Tensor } from '../codecs/types.ts';
import { elementsIn, type Codec } from '../codecs/wire.ts';

/** Sends and receives ranges of one buffer in segments, as halving-doubling and two-shot move their blocks. */
export interface BlockExchange {
  /** Sends `range` of the buffer to `to`, tagged (phase, step, segment index); `block` names it in events. */
  send(step: number, to: number, range: Range, block: number): void;
  /** Receives `range` from `from`: reduced into the buffer (`reduce`), or written over it. */
  receive(step: number, from: number, range: Range, block: number, reduce: boolean): Promise<void>;
}

/**
 * Every range travels as at least one message, an empty one for an empty range (tensors
 * shorter than the ranks): each pair's first message carries the cached agreement's
 * fingerprint on the fast path (run.ts), so every exchange must send one.
 */
export function blockExchange(
  run: Run,
  buf: Tensor,
  op: ReduceOp,
  codec: Codec,
  phase: number,
  name: Phase,
  largest: number,
): BlockExchange {
  const rank = run.comm.rank;
  const per = run.segmentElements(codec);
  // Lossy codecs decode into this, one segment at a time; raw codecs hand out views of the payload.
  const scratch = codec.lossy ? new Float32Array(Math.min(per, largest)) : undefined;
  const pieces = (r: Range): Range[] => (r.count === 0 ? [r] : segmentsOf(r, per));
  return {
    send(step, to, range, block) {
      pieces(range).forEach((seg, j) => {
        const v = buf.subarray(seg.offset, seg.offset + seg.count);
        const bytes = codec.encode(v);
        run.send(to, run.tag(phase, step, j), bytes);
        run.chunkEvent('chunk-send', name, step, rank, to, block, seg, bytes.byteLength, v);
      });
    },
    async receive(step, from, range, block, reduce) {
      const segs = pieces(range);
      for (let j = 0; j < segs.length; j++) {
        const seg = segs[j];
        const payload = await run.recv(from, run.tag(phase, step, j));
        if (elementsIn(codec, payload) !== seg.count) {
          throw new RingtrainError(
            ErrorCode.Transport,
            `${name}: rank ${from} sent ${elementsIn(codec, payload)} elements where ${seg.count} were expected; the ranks' tensors or versions differ`,
            { from },
          );
        }
        const target = buf.subarray(seg.offset, seg.offset + seg.count);
        if (reduce) {
          const incoming = codec.decode(payload, buf, scratch?.subarray(0, seg.count));
          reduceInto(op, target, incoming);
          run.chunkEvent('chunk-recv', name, step, from, rank, block, seg, payload.byteLength, incoming, target);
        } else {
          const got = codec.decode(payload, buf, target);
          if (got !== target) target.set(got);
          run.chunkEvent('chunk-recv', name, step, from, rank, block, seg, payload.byteLength, target, target);
        }
      }
    },
  };
}
