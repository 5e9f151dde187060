/**
 * 2x2 max-pooling (stride 2, NCHW) on the GPU, forward and backward, with an
 * optional fused ReLU in front. See reference.ts for the exact rules
 * (odd edges dropped, ties to the earlier cell, cell 4 = zeroed by ReLU).
 */
import { type Binding, type Dispatch, type Gpu, linearGroups } from '../../../gpu/gpu.ts';
import { type PoolShape, checkPoolShape, poolSizes } from './reference.ts';
import { checkBindings } from '../../../gpu/kernels/common.ts';

export { type PoolShape, poolSizes, NO_WINNER } from './reference.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('maxpool', { shader: 'maxpool_forward', entryPoints: ['main'] });
defineKernel('maxpoolBackward', { shader: 'maxpool_backward', entryPoints: ['main'] });

const WORKGROUP = 64;

/**
 * y[n, c, h/2, w/2] = max over each 2x2 window of x (of max(x, 0) with `relu`),
 * and argmax (u32, same length as y) = the winning cell, for backward.
 */
export function planMaxPoolForward(
  gpu: Gpu,
  s: PoolShape,
  x: Binding,
  y: Binding,
  argmax: Binding,
  relu = false,
): Dispatch {
  const { oh, ow } = checkPoolShape(s);
  const sz = poolSizes(s);
  checkBindings('maxpool forward', { x: [x, sz.x], y: [y, sz.y], argmax: [argmax, sz.y] }, { shape: { ...s } });
  const params = gpu.uniform(
    [
      ['u32', s.n * s.c],
      ['u32', s.h],
      ['u32', s.w],
      ['u32', oh],
      ['u32', ow],
      ['u32', relu ? 1 : 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'maxpool-forward-shape',
  );
  return gpu.plan('maxpool_forward', [params, x, y, argmax], linearGroups(s.n * s.c * oh * ow, WORKGROUP));
}

/** dx[n, c, h, w]: dy routed to each window's recorded winner, 0 elsewhere. Overwrites dx. */
export function planMaxPoolBackward(gpu: Gpu, s: PoolShape, dy: Binding, argmax: Binding, dx: Binding): Dispatch {
  const { oh, ow } = checkPoolShape(s);
  const sz = poolSizes(s);
  checkBindings('maxpool backward', { dy: [dy, sz.y], argmax: [argmax, sz.y], dx: [dx, sz.x] }, { shape: { ...s } });
  const params = gpu.uniform(
    [
      ['u32', s.n * s.c],
      ['u32', s.h],
      ['u32', s.w],
      ['u32', oh],
      ['u32', ow],
      ['u32', 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'maxpool-backward-shape',
  );
  return gpu.plan('maxpool_backward', [params, dy, argmax, dx], linearGroups(s.n * s.c * s.h * s.w, WORKGROUP));
}
