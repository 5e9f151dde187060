/**
 * Activations: ReLU, tanh and geluTanh (GELU's tanh approximation; the exact
 * erf form is the gelu op's own kernel). Backward takes the
 * forward input and updates dy into dx in place. See shaders/activation.wgsl.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { checkDims } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('activation', {
  shader: 'activation',
  entryPoints: [
    'relu_forward',
    'relu_backward',
    'tanh_forward',
    'tanh_backward',
    'gelu_tanh_forward',
    'gelu_tanh_backward',
  ],
});

export const ACTIVATIONS = ['relu', 'tanh', 'geluTanh'] as const;
export type Activation = (typeof ACTIVATIONS)[number];

/** The shader's entry point prefix of each activation. */
const ENTRY: Record<Activation, string> = { relu: 'relu', tanh: 'tanh', geluTanh: 'gelu_tanh' };

export function checkActivation(kind: string): asserts kind is Activation {
  if (!(ACTIVATIONS as readonly string[]).includes(kind)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `unknown activation "${kind}"; use one of ${ACTIVATIONS.join(', ')}`,
      { kind },
    );
  }
}

/** y = f(x), n elements. */
export function planActivationForward(gpu: Gpu, kind: Activation, x: Binding, y: Binding, n: number): Dispatch {
  checkActivation(kind);
  checkDims('activation', { n });
  const dims = gpu.uniform(
    [
      ['u32', n],
      ['u32', 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'act-dims',
  );
  return gpu.plan('activation', [dims, x, y], linearGroups(n, 256), { entryPoint: `${ENTRY[kind]}_forward` });
}

/** dy ← dy · f'(x), in place; x is the forward input. */
export function planActivationBackward(gpu: Gpu, kind: Activation, x: Binding, dy: Binding, n: number): Dispatch {
  checkActivation(kind);
  checkDims('activation', { n });
  const dims = gpu.uniform(
    [
      ['u32', n],
      ['u32', 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'act-dims',
  );
  return gpu.plan('activation', [dims, x, dy], linearGroups(n, 256), { entryPoint: `${ENTRY[kind]}_backward` });
}
