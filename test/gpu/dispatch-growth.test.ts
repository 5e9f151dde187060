/**
 * Kernels whose work grows with the batch must spread it over workgroups
 * that grow with it: a reduction over the batch done by one or a few
 * workgroups (a bias gradient walking every row in one invocation per
 * column) costs time linear in the batch on a GPU, however many
 * multiprocessors it has, while CPU adapters (2 threads) hide it.
 *
 * For each model, one training step (forward, backward, optimizer) is
 * recorded at batch 64 and at batch 1024 and its dispatches captured; per
 * kernel label, when the bytes bound grow at least 4×, the workgroups must
 * grow at least 4× too. Nothing is submitted: the queue's submit is stubbed
 * while the step records, so the check costs planning only. And since only
 * the planner's choices are checked (labels, grids, bindings), matmul_wide,
 * whose pipelines take SwiftShader tens of seconds each to compile, is
 * replaced by a stand-in with the same bindings and constants.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import myModel from '../../examples/my-model.ts';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { modelFromFactory, type ModelFactory } from '../../src/engine/define.ts';
import type { Model } from '../../src/engine/model.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { trainStepDeferred } from '../../src/engine/train-step.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import { registerShaders, shaderSource } from '../../src/gpu/shaders.ts';
import type { Dispatch, Gpu } from '../../src/gpu/gpu.ts';
import { planBiasGrad, planBiasGradSteps } from '../../src/gpu/kernels/bias.ts';
import { DeferredScalars } from '../../src/gpu/readback.ts';

type Captured = Pick<Dispatch, 'label' | 'workgroups' | 'boundBytes'>;

export interface LabelTotals {
  dispatches: number;
  workgroups: number;
  boundBytes: number;
}

export function totalsByLabel(dispatches: readonly Captured[]): Map<string, LabelTotals> {
  const out = new Map<string, LabelTotals>();
  for (const d of dispatches) {
    const t = out.get(d.label) ?? { dispatches: 0, workgroups: 0, boundBytes: 0 };
    t.dispatches++;
    t.workgroups += d.workgroups[0] * d.workgroups[1] * d.workgroups[2];
    t.boundBytes += d.boundBytes;
    out.set(d.label, t);
  }
  return out;
}

/** One line per kernel whose bound bytes grow ≥ factor× from `small` to `large` while its workgroups grow less. */
export function growthViolations(small: readonly Captured[], large: readonly Captured[], factor = 4): string[] {
  const a = totalsByLabel(small);
  const b = totalsByLabel(large);
  const bad: string[] = [];
  for (const [label, big] of b) {
    const s = a.get(label);
    if (!s || big.boundBytes < factor * s.boundBytes) continue;
    if (big.workgroups < factor * s.workgroups) {
      bad.push(
        `${label}: bound bytes ${s.boundBytes} -> ${big.boundBytes} (${(big.boundBytes / s.boundBytes).toFixed(1)}x) but workgroups ${s.workgroups} -> ${big.workgroups} (${(big.workgroups / s.workgroups).toFixed(1)}x)`,
      );
    }
  }
  return bad;
}

/**
 * matmul_wide's interface (its override constants, Dims and bindings, read from
 * the real shader, so the two cannot drift) with an entry point that does no
 * work: compiles in milliseconds where the real one takes 90 s per model on SwiftShader.
 */
function wideStandIn(real: string): string {
  const declarations = real.split('\n').filter((line) => /^(override |struct Dims |@group\(0\))/.test(line));
  return `${declarations.join('\n')}
@compute @workgroup_size(16)
fn main() {
  if (TRANS_A && TRANS_B && HAS_BIAS && RELU && dims.M == 0u) { C[0] = A[0] + B[0] + bias[0]; }
}
`;
}

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
  registerShaders({ matmul_wide: wideStandIn(shaderSource('matmul_wide')) });
});
afterAll(() => gpu?.destroy());

/** Runs `record` with the queue's submit stubbed and returns the dispatches it recorded. */
function captureUnsubmitted(record: () => void): Dispatch[] {
  const queue = gpu.device.queue as GPUQueue & { submit: GPUQueue['submit'] };
  const submit = queue.submit;
  queue.submit = () => undefined;
  const capture = gpu.capture();
  try {
    record();
    gpu.flush();
  } finally {
    capture.stop();
    queue.submit = submit;
  }
  return [...capture.dispatches];
}

interface Workload {
  make(): Model;
  /** Inputs and labels of one step at `batch`. */
  batch(model: Model, batch: number): { x: Float32Array; y: Int32Array };
}

function images(inputSize: number, classes: number) {
  return (_model: Model, batch: number) => {
    const u = seededUniform(batch);
    return {
      x: Float32Array.from({ length: batch * inputSize }, () => u()),
      y: Int32Array.from({ length: batch }, () => Math.floor(u() * classes)),
    };
  };
}

const WORKLOADS: Record<string, Workload> = {
  mlp: { make: () => createModel(gpu, { kind: 'mlp' }), batch: images(784, 10) },
  cnn: { make: () => createModel(gpu, { kind: 'cnn' }), batch: images(784, 10) },
  'model file (examples/my-model.ts)': {
    make: () => modelFromFactory(gpu, myModel as unknown as ModelFactory, { name: 'my-model' }),
    batch: images(784, 10),
  },
  transformer: {
    make: () => createModel(gpu, { kind: 'transformer' }),
    // batch = words per step; each word is `context` positions of ids with next-id targets.
    batch: (_model, batch) => {
      const u = seededUniform(batch);
      const context = 32;
      const x = Float32Array.from({ length: batch * context }, () => 1 + Math.floor(u() * 26));
      const y = Int32Array.from({ length: batch * context }, () => Math.floor(u() * 27));
      return { x, y };
    },
  },
};

function stepDispatches(w: Workload, model: Model, batch: number): Dispatch[] {
  const optimizer = createOptimizer(model, { kind: 'adamw', lr: 1e-3 });
  const sink = new DeferredScalars(gpu);
  const { x, y } = w.batch(model, batch);
  try {
    return captureUnsubmitted(() => trainStepDeferred(model, optimizer, x, y, sink));
  } finally {
    sink.destroy();
  }
}

describe('workgroups grow with the batch', () => {
  it('the check flags a serial reduction (one invocation per column walking every row) and passes the row tree', () => {
    const cols = 64;
    const plan = (rows: number, serial: boolean): Dispatch[] => {
      const dy = gpu.storage(rows * cols, 'dy');
      const db = gpu.storage(cols, 'db');
      return serial ? [planBiasGrad(gpu, dy, db, rows, cols)] : planBiasGradSteps(gpu, dy, db, rows, cols);
    };
    const flagged = growthViolations(plan(64, true), plan(1024, true));
    expect(flagged).toHaveLength(1);
    expect(flagged[0]).toMatch(/^bias:bias_grad: bound bytes \d+ -> \d+ .* but workgroups 1 -> 1 /);
    expect(growthViolations(plan(64, false), plan(1024, false))).toEqual([]);
  });

  for (const [name, w] of Object.entries(WORKLOADS)) {
    it(`${name}: every kernel whose bound bytes grow 4x from batch 64 to 1024 has 4x the workgroups`, () => {
      const model = w.make();
      try {
        const small = stepDispatches(w, model, 64);
        const large = stepDispatches(w, model, 1024);
        expect(small.length).toBeGreaterThan(0);
        const table = [...totalsByLabel(large)].map(([label, t]) => {
          const s = totalsByLabel(small).get(label);
          return `${label}: ${s?.dispatches ?? 0}/${t.dispatches} dispatches, ${s?.workgroups ?? 0}/${t.workgroups} workgroups`;
        });
        if (process.env.DISPATCH_TABLE) console.log(`${name} (batch 64 / 1024)\n  ${table.join('\n  ')}`);
        expect(
          growthViolations(small, large),
          `${name}: kernels whose work grows with the batch on a fixed number of workgroups`,
        ).toEqual([]);
      } finally {
        model.destroy();
      }
    }, 120_000);
  }
});
