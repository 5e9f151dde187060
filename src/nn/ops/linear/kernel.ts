/**
 * The kernels of linear's f16-mixed path (--precision f16-mixed): `castF16`
 * stores an f32 operand as f16, raising the overflow flag for a value past f16's
 * range (shaders/cast_f16.wgsl), and `matmulF16` multiplies two f16 operands,
 * summing in f32 into an f32 result (shaders/matmul_f16.wgsl). Both need the
 * device feature 'shader-f16'.
 *
 * One binding holds each operand whole here: `fitsF16Path` says whether a
 * shape does, and the op keeps the f32 path for one that does not (a
 * vocabulary-sized head on a small binding limit).
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { type Binding, type Dispatch, type Gpu, linearGroups } from '../../../gpu/gpu.ts';
import { checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';
import type { MatmulShape } from '../../../gpu/kernels/matmul.ts';

defineKernel('castF16', { shader: 'cast_f16', entryPoints: ['main'], requires: 'shader-f16' });
defineKernel('matmulF16', { shader: 'matmul_f16', entryPoints: ['main'], requires: 'shader-f16' });

/** Each invocation's block of C is 4×4 and a workgroup 8×8 invocations: 32×32 of C. */
const GROUP_SPAN = 32;

/** The 4-byte words that hold n halves. */
export const halfWords = (n: number): number => Math.ceil(n / 2);

/** Whether every operand and result of a linear layer of this shape fits one binding (in f32, the larger). */
export function fitsF16Path(gpu: Gpu, rows: number, inF: number, outF: number): boolean {
  return Math.max(rows * inF, rows * outF, inF * outF) * 4 <= gpu.maxBindingBytes;
}

function requireF16(gpu: Gpu, kernel: string): void {
  if (gpu.hasShaderF16) return;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `${kernel} needs the WebGPU feature 'shader-f16', which this adapter (${gpu.info.description}) does not offer; use --precision f32, or an adapter that has it (Deno's lavapipe here, most GPUs)`,
    { kernel, feature: 'shader-f16' },
  );
}

/** dst (f16) = src (f32) for n values; a value past ±65504 or not finite sets flag[0] = 1. */
export function planCastF16(gpu: Gpu, src: Binding, dst: Binding, n: number, flag: Binding): Dispatch {
  requireF16(gpu, 'castF16');
  checkDims('castF16', { n });
  checkBindings('castF16', { src: [src, n], dst: [dst, halfWords(n)], flag: [flag, 1] }, { n });
  const dims = gpu.uniform(
    [
      ['u32', n],
      ['u32', 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'castF16-dims',
  );
  return planEntry(
    gpu,
    'cast_f16',
    'main',
    [
      [0, dims],
      [1, src],
      [2, dst],
      [3, flag],
    ],
    linearGroups(n, 256),
  );
}

/** C (f32) = op(A)·op(B) (+ bias) (ReLU) with A and B stored as f16, summed in f32. */
export function planMatmulF16(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulShape & { bias?: Binding; relu?: boolean },
): Dispatch {
  requireF16(gpu, 'matmulF16');
  checkDims('matmulF16', { m: o.m, n: o.n, k: o.k });
  checkBindings(
    'matmulF16',
    { a: [a, halfWords(o.m * o.k)], b: [b, halfWords(o.k * o.n)], c: [c, o.m * o.n] },
    { m: o.m, n: o.n, k: o.k },
  );
  const dims = gpu.uniform(
    [
      ['u32', o.m],
      ['u32', o.n],
      ['u32', o.k],
      ['u32', 0],
    ],
    'matmulF16-dims',
  );
  const constants = {
    TRANS_A: o.transA ? 1 : 0,
    TRANS_B: o.transB ? 1 : 0,
    HAS_BIAS: o.bias ? 1 : 0,
    RELU: o.relu ? 1 : 0,
  };
  return planEntry(
    gpu,
    'matmul_f16',
    'main',
    [
      [0, dims],
      [1, a],
      [2, b],
      [3, c],
      [4, o.bias ?? gpu.dummy],
    ],
    [Math.ceil(o.n / GROUP_SPAN), Math.ceil(o.m / GROUP_SPAN)],
    constants,
  );
}
