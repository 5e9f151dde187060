/**
 * Elementwise activations as ops: relu, tanh, geluTanh (GELU's tanh
 * approximation, as in GPT-2 and nn.GELU(approximate='tanh')). Backward runs
 * in place on gradOut (dy ← dy·f'(x)), reading the forward input x; see
 * shaders/activation.wgsl.
 */
import { type Activation, planActivationBackward, planActivationForward } from './kernel.ts';
import { defineOp, type Op, requireF32 } from '../../op.ts';
import { apply, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const GELU_C = 0.044715;

const math: Record<Activation, { f: (x: number) => number; df: (x: number) => number }> = {
  relu: { f: (x) => Math.max(x, 0), df: (x) => (x > 0 ? 1 : 0) },
  tanh: { f: Math.tanh, df: (x) => 1 - Math.tanh(x) ** 2 },
  geluTanh: {
    f: (x) => 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + GELU_C * x ** 3))),
    df: (x) => {
      const t = Math.tanh(SQRT_2_OVER_PI * (x + GELU_C * x ** 3));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * GELU_C * x * x);
    },
  },
};

function activationOp(kind: Activation, name: string): Op<Record<string, never>> {
  const { f, df } = math[kind];
  return defineOp<Record<string, never>>({
    name,
    inPlaceBackward: true,
    // Backward is f'(x)·dy: the output is free after its last forward reader.
    backwardReads: () => ({ inputs: [0], output: false }),
    shape([x], _attrs, info) {
      requireF32(info, name, [x]);
      return { shape: x };
    },
    plan(ctx) {
      const n = ctx.inputShapes[0].reduce((a, b) => a * b, 1);
      const forward = [planActivationForward(ctx.gpu, kind, ctx.input(0), ctx.output(), n)];
      const dy = ctx.gradOut();
      return {
        forward,
        backward: dy && ctx.gradIn(0) ? [planActivationBackward(ctx.gpu, kind, ctx.input(0), dy, n)] : [],
      };
    },
    cpu: {
      forward: ([x]) => x.map(f),
      backward: ([x], _s, _a, _y, dy) => [dy.map((g, i) => g * df(x[i]))],
    },
  });
}

export const reluOp = activationOp('relu', 'relu');
export const tanhOp = activationOp('tanh', 'tanh');
export const geluTanhOp = activationOp('geluTanh', 'geluTanh');

// The functional forms, for `forward` methods (nn.F).
export const relu = (x: Tensor): Tensor => apply(reluOp, [x], {});
export const tanh = (x: Tensor): Tensor => apply(tanhOp, [x], {});
/** GELU, tanh approximation. */
export const geluTanh = (x: Tensor): Tensor => apply(geluTanhOp, [x], {});

export class ReLU extends Module {
  forward(x: Tensor): Tensor {
    return relu(x);
  }
}

export class Tanh extends Module {
  forward(x: Tensor): Tensor {
    return tanh(x);
  }
}
