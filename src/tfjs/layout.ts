/**
 * The variable layout of a TF.js model (each variable's name, shape and
 * dtype, in order) and the check that every rank has the same one. Without
 * it, ranks with different models would pack different gradients into flat
 * buffers of equal length by chance, or fail deep in a collective with a
 * message about lengths. The check exchanges every rank's layout (two
 * allgathers), so all ranks see the same facts and fail with the same error.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/communicator.ts';
import { allgather } from '../collectives/allgather.ts';

export interface VariableSpec {
  name: string;
  shape: number[];
  dtype: string;
}

/** A variable as ringtrain needs it: a TF.js Variable or a layers LayerVariable. */
export interface VariableLike {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: string;
}

export function describeVariables(vars: readonly VariableLike[]): VariableSpec[] {
  return vars.map((v) => ({ name: v.name, shape: [...v.shape], dtype: v.dtype }));
}

const shapeText = (s: VariableSpec | undefined) => (s ? `${s.dtype}[${s.shape.join(',')}]` : '(none)');

function encode(layout: VariableSpec[]): Int32Array {
  return Int32Array.from(new TextEncoder().encode(JSON.stringify(layout)));
}

function decode(bytes: Int32Array): VariableSpec[] {
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(bytes))) as VariableSpec[];
}

/** Every rank's layout, in rank order. */
export async function gatherLayouts(
  comm: Communicator,
  layout: VariableSpec[],
  what: string,
  timeoutMs?: number,
): Promise<VariableSpec[][]> {
  const mine = encode(layout);
  const lengths = await allgather(comm, Int32Array.of(mine.length), { name: `${what}/layout-length`, timeoutMs });
  const all = await allgather(comm, mine, { name: `${what}/layout`, timeoutMs });
  const out: VariableSpec[][] = [];
  let offset = 0;
  for (const n of lengths) {
    out.push(decode(all.subarray(offset, offset + n)));
    offset += n;
  }
  return out;
}

/** The first difference between rank 0's layout and another rank's, as a sentence; null when every rank agrees. */
export function firstDifference(layouts: VariableSpec[][]): { rank: number; index: number; message: string } | null {
  const ref = layouts[0];
  for (let rank = 1; rank < layouts.length; rank++) {
    const other = layouts[rank];
    const n = Math.max(ref.length, other.length);
    for (let i = 0; i < n; i++) {
      const a = ref[i];
      const b = other[i];
      if (
        a &&
        b &&
        a.dtype === b.dtype &&
        a.shape.length === b.shape.length &&
        a.shape.every((d, k) => d === b.shape[k])
      )
        continue;
      const name = a?.name ?? b!.name;
      const message =
        `rank ${rank}'s model differs from rank 0's at variable #${i} '${name}': rank 0 has ${a ? `'${a.name}' ` : ''}${shapeText(a)}, ` +
        `rank ${rank} has ${b ? `'${b.name}' ` : ''}${shapeText(b)} (rank 0 has ${ref.length} variables, rank ${rank} has ${other.length}); ` +
        `every rank must build the same model`;
      return { rank, index: i, message };
    }
  }
  return null;
}

/** Throws the same Mismatch error on every rank unless all ranks have this layout. */
export async function agreeOnLayout(
  comm: Communicator,
  layout: VariableSpec[],
  what: string,
  timeoutMs?: number,
): Promise<void> {
  const diff = firstDifference(await gatherLayouts(comm, layout, what, timeoutMs));
  if (diff)
    throw new RingtrainError(ErrorCode.Mismatch, `${what}: ${diff.message}`, { rank: diff.rank, index: diff.index });
}
