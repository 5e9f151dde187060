/**
 * Tiled matmul `C = op(A)·op(B)`, with the transposed variants backward needs
 * (Aᵀ·B for weight gradients, A·Bᵀ for input gradients), and an optional fused
 * epilogue (bias add, ReLU) for dense-layer forward passes. See shaders/matmul.wgsl.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { RuntimeName } from '../../core/runtime.ts';
import { type Binding, type Dispatch, type Gpu, linearGroups, type UniformField } from '../gpu.ts';
import { checkDims } from './common.ts';
import { gpuScratch, planColumnSum, type Scratch } from './reduce-rows.ts';
import { defineKernel } from './registry.ts';

defineKernel('matmul', { shader: 'matmul', entryPoints: ['main'] });
defineKernel('matmulDirect', { shader: 'matmul_direct', entryPoints: ['main'] });
defineKernel('matmulBlocked', { shader: 'matmul_tiled_blocked', entryPoints: ['main'] });
defineKernel('matmulWide', { shader: 'matmul_wide', entryPoints: ['main'] });

export interface MatmulShape {
  /** Rows of C (and of op(A)). */
  m: number;
  /** Columns of C (and of op(B)). */
  n: number;
  /** The shared dimension. */
  k: number;
  /** A is stored K×M (use Aᵀ). */
  transA?: boolean;
  /** B is stored N×K (use Bᵀ). */
  transB?: boolean;
}

export interface MatmulOptions extends MatmulShape {
  /** Adds bias[col] to every row (length n). */
  bias?: Binding;
  /** Applies max(x, 0) after the bias. */
  relu?: boolean;
  /** Which program: 'auto' (default) picks per adapter and shape; tests force one. */
  variant?: MatmulVariant;
  /** 'blocked' only: tile order in bands of this many tile rows (0, the default: row-major). Benchmarks try it. */
  groupRows?: number;
}

/**
 * 'blocked' (matmul_tiled_blocked.wgsl): register-blocked tiles for hardware
 * GPUs: 128×128 per workgroup, 8×8 per invocation, vec4 loads; needs the
 * alignment `blockedFits` checks. 'tiled' (matmul.wgsl): workgroup-memory
 * tiles of 64×64, 4×4 per invocation, any shape; the GPU kernel for shapes
 * the blocked one does not fit or too small to fill a GPU with 128×128 tiles. 'direct' (matmul_direct.wgsl): no
 * workgroup memory, vec4 loads,
 * 4×8 per invocation; faster where compute shaders run on a CPU (fallback
 * adapters), needs the vec4 alignment `directFits` checks. 'wide'
 * (matmul_wide.wgsl): the same with 32×32 per invocation, for CPU adapters
 * on shapes `wideFits` accepts (the direct alignment, M ≥ 32, N ≥ 32).
 */
export type MatmulVariant = 'auto' | 'blocked' | 'tiled' | 'direct' | 'wide';
export type ChosenMatmulVariant = Exclude<MatmulVariant, 'auto'>;

export const MATMUL_TILE = 64;
const DIRECT_TILE_ROWS = 32;
const DIRECT_TILE_COLS = 64;
/** matmul_wide.wgsl: 32 rows × 32 columns per invocation, 16 invocations (blocks in row-major order) per workgroup. */
const WIDE_BLOCK = 32;
const WIDE_BLOCKS_PER_GROUP = 16;
const WIDE_MIN_ENTRIES = 8 * 32 * 32;
/** One workgroup of matmul_tiled_blocked.wgsl: 128×128 of C. */
const BLOCKED_TILE = 128;
/**
 * The blocked kernel wins once there are enough 128×128 tiles to keep a GPU's
 * multiprocessors busy (an H100 has 132); below that the 64×64 tiles of
 * 'tiled' spread the work over four times as many workgroups. Measured through
 * Dawn on an H100: at 64 tiles (1024²) tiled 19.7 TFLOP/s against blocked's
 * 15.1; at 256 tiles (2048²) blocked 35.6 against 23.9 (docs/GPU.md).
 */
const BLOCKED_MIN_TILES = 128;

export function directFits(o: MatmulShape): boolean {
  if (o.transA && o.transB) return false;
  if (o.n % 4 !== 0) return false;
  return o.transA ? o.m % 4 === 0 : o.k % 4 === 0;
}

/** matmul_wide.wgsl: at least one whole 32×32 block, vec4-aligned like `directFits`. */
export function wideFits(o: MatmulShape): boolean {
  return directFits(o) && o.m >= 32 && o.n >= 32;
}

/** matmul_tiled_blocked.wgsl: C and bias stored as vec4 (n % 4), and A's and B's contiguous dimension a multiple of 4. */
export function blockedFits(o: MatmulShape): boolean {
  if (o.n % 4 !== 0) return false;
  if (o.transA ? o.m % 4 !== 0 : o.k % 4 !== 0) return false;
  return !o.transB || o.k % 4 === 0;
}

/** The adapter kinds the variant table distinguishes: compute shaders on a CPU, or on a GPU. */
export type AdapterKind = 'cpu' | 'gpu';

export function adapterKind(gpu: Pick<Gpu, 'info'>): AdapterKind {
  return gpu.info.isFallbackAdapter ? 'cpu' : 'gpu';
}

/**
 * Which kernel runs a matmul when none is forced: the first row whose adapter
 * kind matches and whose shape test passes. The CPU rows follow what measured
 * fastest on llvmpipe and SwiftShader; the GPU rows what measured fastest
 * on an H100 through Dawn and through wgpu (docs/GPU.md).
 */
export const MATMUL_TABLE: readonly {
  adapter: AdapterKind;
  runtimes?: readonly RuntimeName[];
  when: (o: MatmulShape) => boolean;
  variant: ChosenMatmulVariant;
  why: string;
}[] = [
  // Dawn only (Node's webgpu, Chrome): through Deno's wgpu the same WGSL ran 16x slower on an H100
  // (11.8 ms against 0.72 ms per transformer step at batch 1024), where 'tiled' keeps pace.
  {
    adapter: 'gpu',
    runtimes: ['node', 'browser'],
    when: (o) => blockedFits(o) && Math.ceil(o.m / BLOCKED_TILE) * Math.ceil(o.n / BLOCKED_TILE) >= BLOCKED_MIN_TILES,
    variant: 'blocked',
    why: 'enough 128×128 tiles to fill the GPU, vec4-aligned',
  },
  { adapter: 'gpu', when: () => true, variant: 'tiled', why: 'small or unaligned: 64×64 tiles, any shape' },
  // Below one SIMD group's worth of 32×32 blocks (8 lanes), most lanes of the wide kernel would idle.
  {
    adapter: 'cpu',
    when: (o) => wideFits(o) && o.m * o.n >= WIDE_MIN_ENTRIES,
    variant: 'wide',
    why: 'big vec4-aligned: 32×32 per invocation',
  },
  { adapter: 'cpu', when: directFits, variant: 'direct', why: 'vec4-aligned: no workgroup memory, 4×8 per invocation' },
  { adapter: 'cpu', when: () => true, variant: 'tiled', why: 'unaligned: any shape' },
];

export function chooseMatmulVariant(gpu: Pick<Gpu, 'info'>, o: MatmulOptions): ChosenMatmulVariant {
  const want = o.variant ?? 'auto';
  if (want === 'direct' && !directFits(o)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `matmul: the direct kernel needs vec4-aligned shapes (n, and k or m for Aᵀ, multiples of 4; not Aᵀ·Bᵀ), got m=${o.m} n=${o.n} k=${o.k}`,
      { ...o },
    );
  }
  if (want === 'wide' && !wideFits(o)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `matmul: the wide kernel needs m ≥ 32, n ≥ 32 and the direct kernel's vec4 alignment (n, and k or m for Aᵀ, multiples of 4; not Aᵀ·Bᵀ), got m=${o.m} n=${o.n} k=${o.k}`,
      { ...o },
    );
  }
  if (want === 'blocked' && !blockedFits(o)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `matmul: the blocked kernel needs n a multiple of 4 and A's and B's contiguous dimension too (k for A and Bᵀ, m for Aᵀ), got m=${o.m} n=${o.n} k=${o.k}${o.transA ? ' Aᵀ' : ''}${o.transB ? ' Bᵀ' : ''}`,
      { ...o },
    );
  }
  if (want !== 'auto') return want;
  const kind = adapterKind(gpu);
  return MATMUL_TABLE.find(
    (row) => row.adapter === kind && (!row.runtimes || row.runtimes.includes(gpu.info.runtime)) && row.when(o),
  )!.variant;
}

/** The kernel layer's entry for the sliced plans (matmul-slices.ts): one dispatch of `variant` with explicit strides. */
export function stridedMatmulDispatch(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulOptions,
  slices: number,
  kc: number,
  strides: Strides,
): Dispatch {
  return matmulDispatch(gpu, a, b, c, o, 'tiled', slices, kc, strides);
}

export function planMatmul(gpu: Gpu, a: Binding, b: Binding, c: Binding, o: MatmulOptions): Dispatch {
  checkDims('matmul', { m: o.m, n: o.n, k: o.k });
  return matmulDispatch(gpu, a, b, c, o, chooseMatmulVariant(gpu, o), 1, o.k);
}

/** The grid of one K slice of `variant` (x, y; z is the slice); the f16 kernels' grids are their f32 twins'. */
export function matmulGrid(variant: ChosenMatmulVariant, o: MatmulShape): [number, number] {
  if (variant === 'blocked') return [Math.ceil(o.n / BLOCKED_TILE), Math.ceil(o.m / BLOCKED_TILE)];
  if (variant === 'wide') {
    const [x, y] = linearGroups(Math.ceil(o.n / WIDE_BLOCK) * Math.ceil(o.m / WIDE_BLOCK), WIDE_BLOCKS_PER_GROUP);
    return [x, y];
  }
  if (variant === 'direct') return [Math.ceil(o.n / DIRECT_TILE_COLS), Math.ceil(o.m / DIRECT_TILE_ROWS)];
  return [Math.ceil(o.n / MATMUL_TILE), Math.ceil(o.m / MATMUL_TILE)];
}

/** Row lengths of A, B and C as stored, and the words between K slices' partial products (matmul.wgsl's LDA, LDB, LDC, ZS). */
export interface Strides {
  lda: number;
  ldb: number;
  ldc: number;
  zs: number;
}

function denseStrides(o: MatmulShape): Strides {
  return { lda: o.transA ? o.m : o.k, ldb: o.transB ? o.k : o.n, ldc: o.n, zs: o.m * o.n };
}

function matmulDispatch(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulOptions,
  variant: ChosenMatmulVariant,
  slices: number,
  kc: number,
  strides = denseStrides(o),
): Dispatch {
  // Only the workgroup-memory kernel takes strides: the one that runs slices of a bigger matrix.
  const layout: UniformField[] =
    variant === 'tiled'
      ? [
          ['u32', strides.lda],
          ['u32', strides.ldb],
          ['u32', strides.ldc],
          ['u32', strides.zs],
        ]
      : [];
  const dims = gpu.uniform([['u32', o.m], ['u32', o.n], ['u32', o.k], ['u32', kc], ...layout], 'matmul-dims');
  const constants: Record<string, number> = {
    TRANS_A: o.transA ? 1 : 0,
    TRANS_B: o.transB ? 1 : 0,
    HAS_BIAS: o.bias ? 1 : 0,
    RELU: o.relu ? 1 : 0,
  };
  if (variant === 'blocked' && o.groupRows) constants.GROUP_ROWS = o.groupRows;
  const bindings = [dims, a, b, c, o.bias ?? gpu.dummy];
  const shader = { blocked: 'matmul_tiled_blocked', wide: 'matmul_wide', direct: 'matmul_direct', tiled: 'matmul' }[
    variant
  ];
  return gpu.plan(shader, bindings, [...matmulGrid(variant, o), slices], { constants });
}

/**
 * Split over K, for products whose K is the batch (weight gradients Aᵀ·B with
 * K = rows): K rows per slice, a multiple of 64 so the vec4 kernels stay
 * aligned. The GPU wants many workgroups (an H100 has 132 multiprocessors);
 * a CPU adapter runs a workgroup per thread, so a few per thread suffice and
 * bigger slices keep the partial products' traffic small.
 */
const SPLIT_K_CHUNK: Record<AdapterKind, number> = { gpu: 128, cpu: 256 };
/** Split only while the unsplit grid has fewer workgroups than this (2 per multiprocessor; a few per CPU thread). */
const SPLIT_BELOW_GROUPS: Record<AdapterKind, number> = { gpu: 264, cpu: 64 };
/** Slices stop growing once the grid reaches this many workgroups, or the partial products this many floats. */
const SPLIT_MAX_GROUPS: Record<AdapterKind, number> = { gpu: 8192, cpu: 256 };
const SPLIT_MAX_PARTIAL_FLOATS = 1 << 22;

/** How many K slices `planMatmulSteps` uses, and the K of each (the last may be shorter). */
export function matmulSplitK(gpu: Pick<Gpu, 'info'>, o: MatmulOptions): { slices: number; kc: number } {
  const none = { slices: 1, kc: o.k };
  if (o.bias || o.relu) return none; // the epilogue belongs after the sum
  const kind = adapterKind(gpu);
  const chunk = SPLIT_K_CHUNK[kind];
  const [x, y] = matmulGrid(chooseMatmulVariant(gpu, o), o);
  const groups = x * y;
  if (groups >= SPLIT_BELOW_GROUPS[kind] || o.k < 2 * chunk) return none;
  const slices = Math.min(
    Math.ceil(o.k / chunk),
    Math.floor(SPLIT_MAX_GROUPS[kind] / groups),
    Math.floor(SPLIT_MAX_PARTIAL_FLOATS / (o.m * o.n)),
  );
  if (slices < 2) return none;
  const kc = Math.ceil(o.k / slices / 64) * 64;
  return { slices: Math.ceil(o.k / kc), kc };
}

/**
 * C = op(A)·op(B) with every operand inside one binding: one dispatch, or,
 * when K is long and the output small (`matmulSplitK`), the partial products
 * of K slices (one dispatch, a grid z per slice, into scratch) and their sum
 * in a fixed order (reduce-rows.ts) into C. What the ops plan is
 * `planMatmulSteps` (matmul-slices.ts), which slices bigger operands first.
 */
export function planMatmulSplitK(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulOptions,
  scratch: Scratch = gpuScratch(gpu),
): Dispatch[] {
  checkDims('matmul', { m: o.m, n: o.n, k: o.k });
  const variant = chooseMatmulVariant(gpu, o);
  const { slices, kc } = matmulSplitK(gpu, o);
  if (slices === 1) return [matmulDispatch(gpu, a, b, c, o, variant, 1, o.k)];
  const partials = scratch(slices * o.m * o.n, 'matmul-split-k');
  return [
    matmulDispatch(gpu, a, b, partials, o, variant, slices, kc),
    ...planColumnSum(gpu, partials, c, { rows: slices, cols: o.m * o.n }, scratch),
  ];
}
