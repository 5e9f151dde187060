/** The pointwise primitives exp and rsqrt, forward and backward. See shaders/unary.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('unary', {
  shader: 'unary',
  entryPoints: ['exp_forward', 'exp_backward', 'rsqrt_forward', 'rsqrt_backward'],
});

export type UnaryKind = 'exp' | 'rsqrt';

function dims(gpu: Gpu, n: number, eps: number): GPUBuffer {
  checkDims('unary', { n });
  return gpu.uniform(
    [
      ['u32', n],
      ['f32', eps],
      ['u32', 0],
      ['u32', 0],
    ],
    'unary-dims',
  );
}

/** y = f(x) over n elements; `eps` is rsqrt's ε (1/√(x + ε)). */
export function planUnaryForward(gpu: Gpu, kind: UnaryKind, x: Binding, y: Binding, n: number, eps = 0): Dispatch {
  checkBindings(`${kind} forward`, { x: [x, n], y: [y, n] }, { n });
  return planEntry(
    gpu,
    'unary',
    `${kind}_forward`,
    [
      [0, dims(gpu, n, eps)],
      [1, x],
      [2, y],
    ],
    linearGroups(n, 256),
  );
}

/** dx dy · f'(x), from the forward output y. */
export function planUnaryBackward(
  gpu: Gpu,
  kind: UnaryKind,
  y: Binding,
  dy: Binding,
  dx: Binding,
  n: number,
): Dispatch {
  checkBindings(`${kind} backward`, { y: [y, n], dy: [dy, n], dx: [dx, n] }, { n });
  return planEntry(
    gpu,
    'unary',
    `${kind}_backward`,
    [
      [0, dims(gpu, n, 0)],
      [2, y],
      [3, dy],
      [4, dx],
    ],
    linearGroups(n, 256),
  );
}
