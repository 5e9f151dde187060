/**
 * The tiled attention kernels (shaders/attention_tiled.wgsl, the FlashAttention-2 scheme): forward
 * saves the output and each query row's log-sum-exp, backward recomputes the scores tile by tile, so
 * nothing of size [T, T] exists. A second kernel of the attention op rather than an op of its own: it
 * computes the same function with the same inputs, so it shares the op's f64 reference, gradcheck and
 * model code, and the op's plan picks it by shape (chooseAttentionKernel in kernel.ts).
 */
import { type Binding, type Dispatch, type Gpu, linearGroups } from '../../../gpu/gpu.ts';
import { checkBindings, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';
import { attentionUniform, type AttentionShape } from './kernel.ts';

defineKernel('attention_tiled', {
  shader: 'attention_tiled',
  entryPoints: ['forward', 'backward_dq', 'backward_dkv'],
});

/** Query rows per workgroup in forward and backward_dq; keys per workgroup in backward_dkv. */
const ROWS_PER_GROUP = 16;
const KEYS_PER_GROUP = 8;

/** Sizes in floats of the buffers the tiled kernels bind; `rows` is lse's and delta's ([batch, heads, T]). */
export function tiledAttentionSizes(s: AttentionShape): { qkv: number; y: number; rows: number } {
  return { qkv: s.batch * s.T * 3 * s.width, y: s.batch * s.T * s.width, rows: s.batch * s.heads * s.T };
}

const groupsOf = (s: AttentionShape, per: number) => linearGroups(s.batch * s.heads * Math.ceil(s.T / per), 1);
const causalConstant = (s: AttentionShape) => ({ CAUSAL: s.causal === false ? 0 : 1 });

/** y [batch, T, width] from qkv; lse [batch, heads, T] (each query row's log-sum-exp) is saved for backward. */
export function planTiledAttentionForward(
  gpu: Gpu,
  s: AttentionShape,
  b: { qkv: Binding; y: Binding; lse: Binding },
): Dispatch {
  const z = tiledAttentionSizes(s);
  checkBindings(
    'tiled attention forward',
    { qkv: [b.qkv, z.qkv], y: [b.y, z.y], lse: [b.lse, z.rows] },
    { shape: { ...s } },
  );
  const bindings: [number, Binding][] = [
    [0, attentionUniform(gpu, s, 'tiled')],
    [1, b.qkv],
    [2, b.y],
    [3, b.lse],
  ];
  return planEntry(gpu, 'attention_tiled', 'forward', bindings, groupsOf(s, ROWS_PER_GROUP), causalConstant(s));
}

export interface TiledAttentionBackwardBuffers {
  qkv: Binding;
  /** What forward wrote to y and lse. */
  y: Binding;
  lse: Binding;
  dy: Binding;
  /** Scratch of lse's size: dy·y per query row, written by the first dispatch, read by the second. */
  delta: Binding;
  dqkv: Binding;
}

/** dqkv (=, or += with `accumulate`) from dy: two dispatches, record them in order. */
export function planTiledAttentionBackward(
  gpu: Gpu,
  s: AttentionShape,
  b: TiledAttentionBackwardBuffers,
  accumulate = false,
): Dispatch[] {
  const z = tiledAttentionSizes(s);
  checkBindings(
    'tiled attention backward',
    {
      qkv: [b.qkv, z.qkv],
      y: [b.y, z.y],
      lse: [b.lse, z.rows],
      dy: [b.dy, z.y],
      delta: [b.delta, z.rows],
      dqkv: [b.dqkv, z.qkv],
    },
    { shape: { ...s } },
  );
  const u = attentionUniform(gpu, s, 'tiled');
  const constants = { ...causalConstant(s), ACCUMULATE: accumulate ? 1 : 0 };
  const dq: [number, Binding][] = [
    [0, u],
    [1, b.qkv],
    [2, b.y],
    [3, b.lse],
    [4, b.dy],
    [5, b.delta],
    [6, b.dqkv],
  ];
  const dkv = dq.filter(([i]) => i !== 2);
  return [
    planEntry(gpu, 'attention_tiled', 'backward_dq', dq, groupsOf(s, ROWS_PER_GROUP), constants),
    planEntry(gpu, 'attention_tiled', 'backward_dkv', dkv, groupsOf(s, KEYS_PER_GROUP), constants),
  ];
}
