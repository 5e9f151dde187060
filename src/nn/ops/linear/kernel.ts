/**
 * The kernels of linear's f16-mixed path (--precision f16-mixed): `castF16`
 * stores an f32 operand as f16, raising the overflow flag for a value past f16's
 * range (shaders/cast_f16.wgsl), and `matmulF16` multiplies two f16 operands,
 * summing in f32 into an f32 result, in one of three programs chosen by adapter
 * and shape (`F16_MATMUL_TABLE`, as matmul.ts's table for f32). Both need the
 * device feature 'shader-f16'.
 *
 * Every matmulF16 program computes each entry of C as its sum over k from 0
 * up, one product at a time, in f32: a product of two f16 values is exact in
 * f32, so the three give the same bits (no split over K, which would reorder
 * the sum).
 *
 * One binding holds each operand whole here: `fitsF16Path` says whether a
 * shape does, and the op keeps the f32 path for one that does not (a
 * vocabulary-sized head on a small binding limit).
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { type Binding, type Dispatch, type Gpu, linearGroups, type UniformField } from '../../../gpu/gpu.ts';
import { checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';
import { adapterKind, type AdapterKind, matmulGrid, type MatmulShape, wideFits } from '../../../gpu/kernels/matmul.ts';

defineKernel('castF16', { shader: 'cast_f16', entryPoints: ['main'], requires: 'shader-f16' });
defineKernel('matmulF16', { shader: 'matmul_f16', entryPoints: ['main'], requires: 'shader-f16' });
defineKernel('matmulWideF16', { shader: 'matmul_wide_f16', entryPoints: ['main'], requires: 'shader-f16' });
defineKernel('matmulTiledF16', { shader: 'matmul_tiled_f16', entryPoints: ['main'], requires: 'shader-f16' });

/** matmul_f16.wgsl: each invocation's block of C is 4×4 and a workgroup 8×8 invocations: 32×32 of C. */
const GROUP_SPAN = 32;

/**
 * 'wide' (matmul_wide_f16.wgsl): matmul_wide's 32×32 blocks per invocation, for CPU adapters on the
 * shapes `wideFits` accepts; 'tiled' (matmul_tiled_f16.wgsl): matmul.wgsl's 64×64 workgroup tiles
 * holding f16, for GPUs, any shape; 'direct' (matmul_f16.wgsl): 4×4 per invocation, scalar loads, no
 * workgroup memory, any shape.
 */
export type F16MatmulVariant = 'wide' | 'tiled' | 'direct';

const F16_SHADERS: Record<F16MatmulVariant, string> = {
  wide: 'matmul_wide_f16',
  tiled: 'matmul_tiled_f16',
  direct: 'matmul_f16',
};

/** The first row whose adapter kind matches and whose shape test passes picks the program: by shape alone, so every rank of one adapter kind picks alike. */
export const F16_MATMUL_TABLE: readonly {
  adapter: AdapterKind;
  when: (o: MatmulShape) => boolean;
  variant: F16MatmulVariant;
  why: string;
}[] = [
  { adapter: 'gpu', when: () => true, variant: 'tiled', why: 'workgroup tiles of f16, any shape' },
  // Wherever it fits, unlike f32's table: f16 has no split over K to fill the SIMD lanes of a few blocks with (at
  // dW 64×64×8192 on lavapipe, 4 blocks: 13.4 ms of CPU against the 4×4 program's 32.6; bench/matmul-f16.ts).
  { adapter: 'cpu', when: wideFits, variant: 'wide', why: 'vec4-aligned, m and n ≥ 32: 32×32 per invocation' },
  { adapter: 'cpu', when: () => true, variant: 'direct', why: 'small or unaligned: 4×4 per invocation' },
];

export function chooseF16Variant(
  gpu: Pick<Gpu, 'info'>,
  o: MatmulShape & { variant?: F16MatmulVariant },
): F16MatmulVariant {
  if (o.variant === 'wide' && !wideFits(o)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `matmulF16: the wide kernel needs m ≥ 32, n ≥ 32, n a multiple of 4 and k (m for Aᵀ) a multiple of 4, not Aᵀ·Bᵀ; got m=${o.m} n=${o.n} k=${o.k}`,
      { m: o.m, n: o.n, k: o.k },
    );
  }
  if (o.variant) return o.variant;
  const kind = adapterKind(gpu);
  return F16_MATMUL_TABLE.find((row) => row.adapter === kind && row.when(o))!.variant;
}

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

/** C (f32) = op(A)·op(B) (+ bias) (ReLU) with A and B stored as f16, summed in f32; `variant` forces a program (tests, benches). */
export function planMatmulF16(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulShape & { bias?: Binding; relu?: boolean; variant?: F16MatmulVariant },
): Dispatch {
  requireF16(gpu, 'matmulF16');
  checkDims('matmulF16', { m: o.m, n: o.n, k: o.k });
  checkBindings(
    'matmulF16',
    { a: [a, halfWords(o.m * o.k)], b: [b, halfWords(o.k * o.n)], c: [c, o.m * o.n] },
    { m: o.m, n: o.n, k: o.k },
  );
  const variant = chooseF16Variant(gpu, o);
  // The tiled program reads matmul.wgsl's strides (here those of whole operands) after K and KC.
  const strides: UniformField[] =
    variant === 'tiled'
      ? [
          ['u32', o.transA ? o.m : o.k],
          ['u32', o.transB ? o.k : o.n],
          ['u32', o.n],
          ['u32', o.m * o.n],
        ]
      : [];
  const dims = gpu.uniform([['u32', o.m], ['u32', o.n], ['u32', o.k], ['u32', o.k], ...strides], 'matmulF16-dims');
  const constants = {
    TRANS_A: o.transA ? 1 : 0,
    TRANS_B: o.transB ? 1 : 0,
    HAS_BIAS: o.bias ? 1 : 0,
    RELU: o.relu ? 1 : 0,
  };
  const grid: [number, number] =
    variant === 'direct' ? [Math.ceil(o.n / GROUP_SPAN), Math.ceil(o.m / GROUP_SPAN)] : matmulGrid(variant, o);
  return planEntry(
    gpu,
    F16_SHADERS[variant],
    'main',
    [
      [0, dims],
      [1, a],
      [2, b],
      [3, c],
      [4, o.bias ?? gpu.dummy],
    ],
    grid,
    constants,
  );
}
