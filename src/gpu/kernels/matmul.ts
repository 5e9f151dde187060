/**
 * Tiled matmul `C = op(A)·op(B)`, with the transposed variants backward needs
 * (Aᵀ·B for weight gradients, A·Bᵀ for input gradients), and an optional fused
 * epilogue (bias add, ReLU) for dense-layer forward passes. See shaders/matmul.wgsl.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Binding, Dispatch, Gpu } from '../gpu.ts';

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
}

/**
 * 'tiled' (matmul.wgsl): workgroup-memory tiles, any shape; the right kernel
 * for GPUs. 'direct' (matmul_direct.wgsl): no workgroup memory, vec4 loads,
 * 4×8 per invocation; faster where compute shaders run on a CPU (fallback
 * adapters), needs the vec4 alignment `directFits` checks. 'wide'
 * (matmul_wide.wgsl): the same with 32×32 per invocation, for CPU adapters
 * on shapes `wideFits` accepts (the direct alignment, M ≥ 32, N ≥ 32).
 */
export type MatmulVariant = 'auto' | 'tiled' | 'direct' | 'wide';

export const MATMUL_TILE = 64;
const DIRECT_TILE_ROWS = 32;
const DIRECT_TILE_COLS = 64;
/** One workgroup of matmul_wide.wgsl: 8×2 invocations of 32 rows × 32 columns. */
const WIDE_TILE_ROWS = 64;
const WIDE_TILE_COLS = 256;
const WIDE_MIN_ENTRIES = 8 * 32 * 32;

export function directFits(o: MatmulShape): boolean {
  if (o.transA && o.transB) return false;
  if (o.n % 4 !== 0) return false;
  return o.transA ? o.m % 4 === 0 : o.k % 4 === 0;
}

/** matmul_wide.wgsl: at least one whole 32×32 block, vec4-aligned like `directFits`. */
export function wideFits(o: MatmulShape): boolean {
  return directFits(o) && o.m >= 32 && o.n >= 32;
}

export function chooseMatmulVariant(gpu: Gpu, o: MatmulOptions): 'tiled' | 'direct' | 'wide' {
  const want = o.variant ?? 'auto';
  if (want === 'direct' && !directFits(o)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `matmul: the direct kernel needs vec4-aligned shapes (n, and k or m for Aᵀ, multiples of 4; not Aᵀ·Bᵀ), got m=${o.m} n=${o.n} k=${o.k}`, { ...o });
  }
  if (want === 'wide' && !wideFits(o)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `matmul: the wide kernel needs m ≥ 32, n ≥ 32 and the direct kernel's vec4 alignment (n, and k or m for Aᵀ, multiples of 4; not Aᵀ·Bᵀ), got m=${o.m} n=${o.n} k=${o.k}`, { ...o });
  }
  if (want !== 'auto') return want;
  if (!gpu.info.isFallbackAdapter) return 'tiled';
  // Below one SIMD group's worth of 32×32 blocks (8 lanes), most lanes of the
  // wide kernel would idle; the direct kernel's smaller blocks spread the work.
  if (wideFits(o) && o.m * o.n >= WIDE_MIN_ENTRIES) return 'wide';
  return directFits(o) ? 'direct' : 'tiled';
}

export function checkDims(what: string, dims: Record<string, number>): void {
  for (const [name, v] of Object.entries(dims)) {
    if (!Number.isInteger(v) || v < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: ${name} must be a positive integer, got ${v}`, { ...dims });
    }
  }
}

export function planMatmul(gpu: Gpu, a: Binding, b: Binding, c: Binding, o: MatmulOptions): Dispatch {
  checkDims('matmul', { m: o.m, n: o.n, k: o.k });
  const dims = gpu.uniform([['u32', o.m], ['u32', o.n], ['u32', o.k], ['u32', 0]], 'matmul-dims');
  const constants = { TRANS_A: o.transA ? 1 : 0, TRANS_B: o.transB ? 1 : 0, HAS_BIAS: o.bias ? 1 : 0, RELU: o.relu ? 1 : 0 };
  const bindings = [dims, a, b, c, o.bias ?? gpu.dummy];
  const variant = chooseMatmulVariant(gpu, o);
  if (variant === 'wide') {
    return gpu.plan('matmul_wide', bindings, [Math.ceil(o.n / WIDE_TILE_COLS), Math.ceil(o.m / WIDE_TILE_ROWS)], { constants });
  }
  if (variant === 'direct') {
    return gpu.plan('matmul_direct', bindings, [Math.ceil(o.n / DIRECT_TILE_COLS), Math.ceil(o.m / DIRECT_TILE_ROWS)], { constants });
  }
  return gpu.plan('matmul', bindings, [Math.ceil(o.n / MATMUL_TILE), Math.ceil(o.m / MATMUL_TILE)], { constants });
}
