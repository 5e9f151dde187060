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
 * for GPUs. 'direct' (matmul_direct.wgsl): no workgroup memory, vec4 loads;
 * faster where compute shaders run on a CPU (fallback adapters), needs the
 * vec4 alignment `directFits` checks.
 */
export type MatmulVariant = 'auto' | 'tiled' | 'direct';

export const MATMUL_TILE = 64;
const DIRECT_TILE_ROWS = 32;
const DIRECT_TILE_COLS = 64;

export function directFits(o: MatmulShape): boolean {
  if (o.transA && o.transB) return false;
  if (o.n % 4 !== 0) return false;
  return o.transA ? o.m % 4 === 0 : o.k % 4 === 0;
}

export function chooseMatmulVariant(gpu: Gpu, o: MatmulOptions): 'tiled' | 'direct' {
  const want = o.variant ?? 'auto';
  if (want === 'direct' && !directFits(o)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `matmul: the direct kernel needs vec4-aligned shapes (n, and k or m for Aᵀ, multiples of 4; not Aᵀ·Bᵀ), got m=${o.m} n=${o.n} k=${o.k}`, { ...o });
  }
  if (want !== 'auto') return want;
  return gpu.info.isFallbackAdapter && directFits(o) ? 'direct' : 'tiled';
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
  if (chooseMatmulVariant(gpu, o) === 'direct') {
    return gpu.plan('matmul_direct', bindings, [Math.ceil(o.n / DIRECT_TILE_COLS), Math.ceil(o.m / DIRECT_TILE_ROWS)], { constants });
  }
  return gpu.plan('matmul', bindings, [Math.ceil(o.n / MATMUL_TILE), Math.ceil(o.m / MATMUL_TILE)], { constants });
}
