import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { allreduceData, allreduceMayGoAhead, chooseAlgorithm, reduceRequest, reduceSettings } from './allreduce.ts';
import { runCollective } from './controller/collective.ts';
import { dtypeOf, emptyLike, type ReduceOptions, type Tensor } from './codecs/types.ts';
import { fnv1a32 } from '../core/hash.ts';

/**
 * Tensor fusion, as in Horovod: many small tensors (one per layer, say) are
 * packed into one fusion buffer and reduced by one allreduce, which saves a
 * negotiation and a ring round trip per tensor. A group closes when adding the
 * next tensor would pass `thresholdBytes` or change dtype; a tensor bigger
 * than the threshold travels alone.
 */
export interface NamedTensor {
  name: string;
  data: Tensor;
}

export interface FusionOptions extends Omit<ReduceOptions, 'name' | 'shape'> {
  /** Most bytes per fusion buffer (Horovod's default is 64 MiB). */
  thresholdBytes?: number;
}

export const DEFAULT_FUSION_THRESHOLD_BYTES = 64 * 1024 * 1024;

/** Which tensors share a buffer: consecutive, same dtype, at most `threshold` bytes together. */
export function planFusion(tensors: NamedTensor[], thresholdBytes: number): number[][] {
  const groups: number[][] = [];
  let current: number[] = [];
  let bytes = 0;
  tensors.forEach((t, i) => {
    const sameType = current.length === 0 || dtypeOf(tensors[current[0]].data) === dtypeOf(t.data);
    if (current.length > 0 && (!sameType || bytes + t.data.byteLength > thresholdBytes)) {
      groups.push(current);
      current = [];
      bytes = 0;
    }
    current.push(i);
    bytes += t.data.byteLength;
  });
  if (current.length > 0) groups.push(current);
  return groups;
}

function fusedName(names: string[]): string {
  const joined = names.join(',');
  if (joined.length <= 120) return `fused[${joined}]`;
  // Long lists: keep the ends readable and let a hash tell different lists apart.
  return `fused[${names[0]}..${names[names.length - 1]} (${names.length} tensors, #${fnv1a32(joined).toString(16)})]`;
}

/** Allreduces every tensor (results in the same order, new arrays), fusing them into as few collectives as the threshold allows. */
export async function allreduceFused(
  comm: Communicator,
  tensors: NamedTensor[],
  opts: FusionOptions = {},
): Promise<Tensor[]> {
  const threshold = opts.thresholdBytes ?? DEFAULT_FUSION_THRESHOLD_BYTES;
  if (!(Number.isFinite(threshold) && threshold > 0)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `allreduceFused: thresholdBytes must be a positive number, got ${threshold}`,
    );
  }
  const seen = new Set<string>();
  for (const t of tensors) {
    if (!dtypeOf(t.data)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `allreduceFused: tensor '${t.name}' must be a Float32Array, Int32Array, Int8Array or Uint16Array (float16 bits)`,
      );
    }
    if (seen.has(t.name))
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `allreduceFused: the name '${t.name}' is used twice; names identify tensors across ranks`,
      );
    seen.add(t.name);
  }
  if (opts.errorFeedback)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'allreduceFused: errorFeedback describes one tensor; use allreduceInPlace on a flat buffer for error feedback',
    );
  const results: Tensor[] = new Array(tensors.length);
  for (const group of planFusion(tensors, threshold)) {
    const members = group.map((i) => tensors[i]);
    const first = members[0].data;
    const s = reduceSettings(first, opts, 'allreduceFused');
    const count = members.reduce((a, t) => a + t.data.length, 0);
    const bytes = count * first.BYTES_PER_ELEMENT;
    const algorithm = chooseAlgorithm(s, bytes, comm.size);
    const request = reduceRequest(fusedName(members.map((t) => t.name)), first, [count], s, algorithm);
    // The body packs a fresh buffer each time: nothing to put back if the fast path falls back.
    const fast = () => allreduceMayGoAhead(algorithm, count, comm.size);
    const out = await runCollective(comm, opts, { kind: 'allreduce', request, count, bytes, fast }, async (run) => {
      const buf = emptyLike(first, count);
      await run.phase('fusion-pack', async () => {
        let o = 0;
        for (const t of members) {
          buf.set(t.data, o);
          o += t.data.length;
        }
      });
      await allreduceData(run, buf, s, algorithm);
      return run.phase('fusion-unpack', async () => {
        let o = 0;
        return members.map((t) => {
          const part = buf.slice(o, o + t.data.length);
          o += t.data.length;
          return part;
        });
      });
    });
    group.forEach((i, k) => (results[i] = out[k]));
  }
  return results;
}
