/**
 * RMSNorm (src/nn/ops/rmsnorm), composed of mul, mean and rsqrt: a gradcheck
 * of the composition (GPU against the primitives' f64 oracles, and those
 * against finite differences), and the composition's f64 run against
 * RMSNorm's closed form written out here, forward and backward, so that the
 * composition is checked to be RMSNorm and not only self-consistent.
 */
import type { Gpu } from '../../../src/gpu/gpu.ts';
import { runCpu } from '../../../src/nn/cpu.ts';
import { RMSNorm, rmsNorm } from '../../../src/nn/ops/rmsnorm/index.ts';
import { Graph } from '../../../src/nn/tensor.ts';
import type { OracleCase } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

/** y = x · r · w with r = (mean(x²) + ε)^−½ per row; dx_j = r·w_j·dy_j − r³·x_j/C · Σ_c dy_c·w_c·x_c; dw_c = Σ_rows dy_c·x_c·r. */
function rmsNormRef(x: Float64Array, w: Float64Array, dy: Float64Array, cols: number, eps: number) {
  const rows = x.length / cols;
  const y = new Float64Array(x.length);
  const dx = new Float64Array(x.length);
  const dw = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const row = (c: number) => r * cols + c;
    let ms = 0;
    for (let c = 0; c < cols; c++) ms += x[row(c)] ** 2 / cols;
    const inv = 1 / Math.sqrt(ms + eps);
    let dot = 0;
    for (let c = 0; c < cols; c++) dot += dy[row(c)] * w[c] * x[row(c)];
    for (let c = 0; c < cols; c++) {
      y[row(c)] = x[row(c)] * inv * w[c];
      dx[row(c)] = inv * w[c] * dy[row(c)] - (inv ** 3 * x[row(c)] * dot) / cols;
      dw[c] += dy[row(c)] * x[row(c)] * inv;
    }
  }
  return { y, dx, dw };
}

function seeded(n: number, seed: number, offset = 0): Float64Array {
  let s = seed;
  return Float64Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1 + offset);
}

const maxDiff = (a: Float64Array, b: Float64Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

export const CASES: OpCase[] = [
  {
    op: ([x, w]) => rmsNorm(x, w, 1e-5),
    name: 'rmsNorm',
    label: 'x[6,16] w[16], eps 1e-5',
    inputs: [{ shape: [6, 16] }, { shape: [16] }],
  },
  {
    op: ([x]) => rmsNorm(x),
    name: 'rmsNorm',
    label: 'x[2,3,5], no weight, default eps',
    inputs: [{ shape: [2, 3, 5] }],
  },
];

export const ORACLE_CASES: OracleCase[] = [
  {
    name: 'rmsNorm: the composition of primitives equals the closed form, forward and backward (f64)',
    run: async (_gpu: Gpu) => {
      const [rows, cols, eps] = [7, 12, 1e-5];
      const graph = new Graph();
      const x = graph.input([rows, cols], { requiresGrad: true });
      const w = graph.input([cols], { requiresGrad: true });
      const y = rmsNorm(x, w, eps);
      const [xv, wv, dy] = [seeded(rows * cols, 7), seeded(cols, 11, 1), seeded(rows * cols, 13)];
      const run = runCpu(
        graph.nodes,
        new Map([
          [x, xv],
          [w, wv],
        ]),
        [y, dy],
      );
      const want = rmsNormRef(xv, wv, dy, cols, eps);
      const err = Math.max(
        maxDiff(run.values.get(y)!, want.y),
        maxDiff(run.grads.get(x)!, want.dx),
        maxDiff(run.grads.get(w)!, want.dw),
      );
      // The layer records the same ops, with its weight [cols] as the last factor.
      const layerGraph = new Graph();
      const layer = new RMSNorm(cols, eps);
      layer.call(layerGraph.input([rows, cols]));
      const sameOps =
        JSON.stringify(layerGraph.nodes.map((n) => [n.op.name, n.attrs])) ===
        JSON.stringify(graph.nodes.map((n) => [n.op.name, n.attrs]));
      return { maxAbsErr: sameOps && layer.weight.shape.join() === String(cols) ? err : Infinity, tol: 1e-12 };
    },
  },
];
