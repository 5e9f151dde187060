/**
 * relu, tanh and geluTanh (src/nn/ops/activation): gradchecks against the f64
 * oracle and finite differences, and the kernels, forward and in-place
 * backward, against f64 math over inputs in [-6, 6] (tanh saturation, GELU's
 * tails).
 */
import type { Gpu } from '../../../src/gpu/gpu.ts';
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { geluTanhOp, reluOp, tanhOp } from '../../../src/nn/ops/activation/index.ts';
import {
  planActivationBackward,
  planActivationForward,
  type Activation,
} from '../../../src/nn/ops/activation/kernel.ts';
import { draws, type OracleCase, scoped } from '../../oracles/oracle-case.ts';
import { maxAbsDiff } from '../../oracles/reference.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: reluOp, label: 'x[300]', inputs: [s(300)] },
  { op: tanhOp, label: 'x[4,70]', inputs: [s(4, 70)] },
  { op: geluTanhOp, label: 'x[4,70]', inputs: [s(4, 70)] },
];

const { rand } = draws('activation');

const GELU_K = Math.sqrt(2 / Math.PI);
/** The activations and their derivatives in f64, for the kernel cases (the op's `cpu` half keeps its own, unexported). */
const activationRef = {
  relu: { f: (x: number) => Math.max(x, 0), df: (x: number) => (x > 0 ? 1 : 0) },
  tanh: { f: Math.tanh, df: (x: number) => 1 - Math.tanh(x) ** 2 },
  geluTanh: {
    f: (x: number) => 0.5 * x * (1 + Math.tanh(GELU_K * (x + 0.044715 * x ** 3))),
    df: (x: number) => {
      const t = Math.tanh(GELU_K * (x + 0.044715 * x ** 3));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_K * (1 + 3 * 0.044715 * x * x);
    },
  },
};

export const ORACLE_CASES: OracleCase[] = (['relu', 'tanh', 'geluTanh'] as Activation[]).flatMap((kind) =>
  [1, 7, 513, 4099].map((n) => ({
    name: `${kind} forward+backward n=${n}`,
    run: (gpu: Gpu) =>
      scoped(gpu, async (t) => {
        // Wide range: exercises tanh saturation and GELU's tails.
        const x = rand(n, 6);
        const dy = rand(n);
        const xb = t(gpu.upload(x));
        const y = t(gpu.storage(n));
        const d = t(gpu.upload(dy));
        gpu.record([planActivationForward(gpu, kind, xb, y, n), planActivationBackward(gpu, kind, xb, d, n)]);
        const fwd = maxAbsDiff(await gpu.readF32(y, 0, n), Array.from(x, activationRef[kind].f));
        const bwd = maxAbsDiff(
          await gpu.readF32(d, 0, n),
          Array.from(x, (v, i) => dy[i] * activationRef[kind].df(v)),
        );
        return { maxAbsErr: Math.max(fwd, bwd), tol: 1e-5 };
      }),
  })),
);
