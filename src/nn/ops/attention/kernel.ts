/**
 * Fused multi-head self-attention over a packed qkv [batch, T, 3·D] (causal by
 * default), forward saving the attention probabilities, backward writing
 * dqkv in the same packed layout. See shaders/attention.wgsl.
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

function dims(gpu: Gpu, s: AttentionShape): GPUBuffer {
  checkDims('attention', { batch: s.batch, T: s.T, heads: s.heads, width: s.width });
  if (s.width % s.heads !== 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `attention: width ${s.width} is not divisible by ${s.heads} heads; pick a width that is a multiple of the head count`, { ...s });
  }
  const hd = s.width / s.heads;
  return gpu.uniform([['u32', s.batch], ['u32', s.T], ['u32', s.heads], ['u32', hd], ['f32', 1 / Math.sqrt(hd)], ['u32', 0], ['u32', 0], ['u32', 0]], 'attention-dims');
}

/** y [batch, T, width] from qkv; probs [batch, heads, T, T] is saved for backward. */
export function planAttentionForward(gpu: Gpu, s: AttentionShape, b: { qkv: Binding; y: Binding; probs: Binding }): Dispatch {
  const z = attentionSizes(s);
  checkBindings('attention forward', { qkv: [b.qkv, z.qkv], y: [b.y, z.y], probs: [b.probs, z.probs] }, { shape: { ...s } });
  return planEntry(gpu, 'attention', 'forward', [[0, dims(gpu, s)], [1, b.qkv], [2, b.y], [3, b.probs]], linearGroups(s.batch * s.heads * s.T, 64), {
    CAUSAL: s.causal === false ? 0 : 1,
  });
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
export function planAttentionBackward(gpu: Gpu, s: AttentionShape, b: AttentionBackwardBuffers, accumulate = false): Dispatch[] {
  const z = attentionSizes(s);
  checkBindings('attention backward', { qkv: [b.qkv, z.qkv], probs: [b.probs, z.probs], dy: [b.dy, z.y], dscores: [b.dscores, z.probs], dqkv: [b.dqkv, z.qkv] }, { shape: { ...s } });
  const u = dims(gpu, s);
  const constants = { CAUSAL: s.causal === false ? 0 : 1, ACCUMULATE: accumulate ? 1 : 0 };
  const groups = linearGroups(s.batch * s.heads * s.T, 64);
  return [
    planEntry(gpu, 'attention', 'backward_q', [[0, u], [1, b.qkv], [4, b.dy], [5, b.probs], [6, b.dscores], [7, b.dqkv]], groups, constants),
    planEntry(gpu, 'attention', 'backward_kv', [[0, u], [1, b.qkv], [4, b.dy], [5, b.probs], [6, b.dscores], [7, b.dqkv]], groups, constants),
  ];
}
