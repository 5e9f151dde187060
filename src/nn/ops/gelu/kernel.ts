/** GELU, exact erf form (PyTorch's nn.GELU default), forward and backward. See shaders/gelu.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { accumulateConstant, checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('gelu', { shader: 'gelu', entryPoints: ['forward', 'backward'] });

function dims(gpu: Gpu, n: number): GPUBuffer {
  checkDims('gelu', { n });
  return gpu.uniform(
    [
      ['u32', n],
      ['u32', 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'gelu-dims',
  );
}

/** y = x · Φ(x), n elements. */
export function planGeluForward(gpu: Gpu, x: Binding, y: Binding, n: number): Dispatch {
  checkBindings('gelu forward', { x: [x, n], y: [y, n] }, { n });
  return planEntry(
    gpu,
    'gelu',
    'forward',
    [
      [0, dims(gpu, n)],
      [1, x],
      [2, y],
    ],
    linearGroups(n, 256),
  );
}

/** dx (=, or += with `accumulate`) dy · GELU'(x); x is the forward input. */
export function planGeluBackward(
  gpu: Gpu,
  x: Binding,
  dy: Binding,
  dx: Binding,
  n: number,
  accumulate = false,
): Dispatch {
  checkBindings('gelu backward', { x: [x, n], dy: [dy, n], dx: [dx, n] }, { n });
  return planEntry(
    gpu,
    'gelu',
    'backward',
    [
      [0, dims(gpu, n)],
      [1, x],
      [3, dy],
      [4, dx],
    ],
    linearGroups(n, 256),
    accumulateConstant(accumulate),
  );
}
