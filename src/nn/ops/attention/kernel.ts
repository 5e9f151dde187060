/**
 * Fused multi-head self-attention over a packed qkv [batch, T, 3·D] (causal by
 * default), forward saving the attention probabilities, backward writing
 * dqkv in the same packed layout (shaders/attention.wgsl); which of it and the
 * tiled kernels (tiled-kernel.ts) runs a shape, the uniform both read, and the
 * loop-cap check both pass.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('attention', { shader: 'attention', entryPoints: ['forward', 'backward_q', 'backward_kv'] });

export interface AttentionShape {
  batch: number;
  /** Sequence length. */
  T: number;
  heads: number;
  /** Model width D = heads · head size. */
  width: number;
  /** Mask future positions (GPT-style). Default true. */
  causal?: boolean;
}

/** Sizes in floats of the buffers attention binds. */
export function attentionSizes(s: AttentionShape): { qkv: number; y: number; probs: number } {
  return { qkv: s.batch * s.T * 3 * s.width, y: s.batch * s.T * s.width, probs: s.batch * s.heads * s.T * s.T };
}

/**
 * Which kernel runs a shape: one query row per invocation keeping the [T, T] probabilities
 * ('rows'), or the tiled kernels of tiled-kernel.ts that keep only each row's log-sum-exp
 * ('tiled'). Decided by the shape alone, so every rank and runtime picks the same one.
 * 'tiled' needs heads of at most TILED_HEAD_MAX dimensions (its workgroup tiles).
 */
export type AttentionKernel = 'rows' | 'tiled';
export const TILED_HEAD_MAX = 64;
/**
 * From this context on the tiled kernels run. Below it the row kernel is faster on both CPU adapters
 * (1.7-4x at T 64-256, bench/attention.ts, docs/KERNELS.md) and its [T, T] probabilities are small
 * (256 KiB per head and sample at T = 256); at 1024 they are 4 MiB each (9.7 GB over GPT-2's 12 layers at
 * batch 8, twice with their gradient), and lavapipe refuses the row kernel past T = 480 at heads of 64, so
 * the switch comes before that.
 * Not yet measured on a GPU, where the tiled kernels' parallelism may move this lower.
 */
export const TILED_FROM_T = 384;

export function chooseAttentionKernel(s: AttentionShape): AttentionKernel {
  return s.T >= TILED_FROM_T && s.width / s.heads <= TILED_HEAD_MAX ? 'tiled' : 'rows';
}

/**
 * Mesa's llvmpipe (lavapipe: Deno's adapter on a machine without a GPU) ends a shader's loops
 * after 65,535 iterations in all, without an error. 'rows': one invocation walks one query row,
 * about T·(2·hd + 4) + hd iterations forward (and as many backward), so past the cap the output
 * is silently wrong (seen from T = 496 at hd 64); the margin covers the backward kernels' extra
 * passes over the row. 'tiled': an invocation runs at most 2·hd + 89 iterations per tile of 16
 * positions in backward, hd + 105 in forward (shaders/attention_tiled.wgsl), and a few dozen more.
 */
const LLVMPIPE_LOOP_CAP = 65_535;
const loopIterations: Record<AttentionKernel, (T: number, hd: number) => number> = {
  rows: (T, hd) => T * (2 * hd + 8) + 2 * hd,
  tiled: (T, hd) => Math.ceil(T / 16) * (2 * hd + 112) + 64,
};

/** Refuses `s` on an llvmpipe adapter (by its description) when an invocation of `kernel` would pass the loop cap. */
export function checkAttentionLoopCap(
  adapter: string,
  s: AttentionShape,
  kernel: AttentionKernel = chooseAttentionKernel(s),
): void {
  if (!/llvmpipe/i.test(adapter)) return;
  const hd = s.width / s.heads;
  const count = loopIterations[kernel];
  if (count(s.T, hd) <= LLVMPIPE_LOOP_CAP) return;
  let most = s.T;
  while (most > 1 && count(most, hd) > LLVMPIPE_LOOP_CAP) most--;
  const smaller = kernel === 'rows' ? `heads of ${TILED_HEAD_MAX} dimensions or fewer (more --heads)` : 'more --heads';
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `attention over ${s.T} positions with heads of ${hd} takes about ${count(s.T, hd)} loop iterations per invocation (${kernel} kernel), and this adapter (${adapter}) stops a shader after ${LLVMPIPE_LOOP_CAP}, which would give wrong results; use --context ${most} or less, ${smaller}, or --runtime node (SwiftShader has no such cap)`,
    { T: s.T, headDim: hd, adapter, kernel, mostPositions: most },
  );
}

/** The uniform both kernels read (after checking the shape fits `kernel`). */
export function attentionUniform(gpu: Gpu, s: AttentionShape, kernel: AttentionKernel): GPUBuffer {
  checkDims('attention', { batch: s.batch, T: s.T, heads: s.heads, width: s.width });
  if (s.width % s.heads !== 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `attention: width ${s.width} is not divisible by ${s.heads} heads; pick a width that is a multiple of the head count`,
      { ...s },
    );
  }
  const hd = s.width / s.heads;
  if (kernel === 'tiled' && hd > TILED_HEAD_MAX) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `attention: the tiled kernel takes heads of at most ${TILED_HEAD_MAX} dimensions, not ${hd}; use more heads or the row kernel`,
      { ...s },
    );
  }
  checkAttentionLoopCap(gpu.info.description, s, kernel);
  return gpu.uniform(
    [
      ['u32', s.batch],
      ['u32', s.T],
      ['u32', s.heads],
      ['u32', hd],
      ['f32', 1 / Math.sqrt(hd)],
      ['u32', 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'attention-dims',
  );
}

/** y [batch, T, width] from qkv; probs [batch, heads, T, T] is saved for backward. */
export function planAttentionForward(
  gpu: Gpu,
  s: AttentionShape,
  b: { qkv: Binding; y: Binding; probs: Binding },
): Dispatch {
  const z = attentionSizes(s);
  checkBindings(
    'attention forward',
    { qkv: [b.qkv, z.qkv], y: [b.y, z.y], probs: [b.probs, z.probs] },
    { shape: { ...s } },
  );
  return planEntry(
    gpu,
    'attention',
    'forward',
    [
      [0, attentionUniform(gpu, s, 'rows')],
      [1, b.qkv],
      [2, b.y],
      [3, b.probs],
    ],
    linearGroups(s.batch * s.heads * s.T, 64),
    {
      CAUSAL: s.causal === false ? 0 : 1,
    },
  );
}

export interface AttentionBackwardBuffers {
  qkv: Binding;
  /** What forward wrote to `probs`. */
  probs: Binding;
  dy: Binding;
  /** Scratch of the size of probs. */
  dscores: Binding;
  dqkv: Binding;
}

/** dqkv (=, or += with `accumulate`) from dy: two dispatches, record them in order. */
export function planAttentionBackward(
  gpu: Gpu,
  s: AttentionShape,
  b: AttentionBackwardBuffers,
  accumulate = false,
): Dispatch[] {
  const z = attentionSizes(s);
  checkBindings(
    'attention backward',
    {
      qkv: [b.qkv, z.qkv],
      probs: [b.probs, z.probs],
      dy: [b.dy, z.y],
      dscores: [b.dscores, z.probs],
      dqkv: [b.dqkv, z.qkv],
    },
    { shape: { ...s } },
  );
  const u = attentionUniform(gpu, s, 'rows');
  const constants = { CAUSAL: s.causal === false ? 0 : 1, ACCUMULATE: accumulate ? 1 : 0 };
  const groups = linearGroups(s.batch * s.heads * s.T, 64);
  // Both entry points read the same bindings; backward_q writes dq, backward_kv dk and dv.
  const bindings: [number, Binding][] = [
    [0, u],
    [1, b.qkv],
    [4, b.dy],
    [5, b.probs],
    [6, b.dscores],
    [7, b.dqkv],
  ];
  return (['backward_q', 'backward_kv'] as const).map((entry) =>
    planEntry(gpu, 'attention', entry, bindings, groups, constants),
  );
}
