/**
 * Compiles a job's kernels before this peer takes its place in the ring.
 *
 * Some runtimes build a compute pipeline synchronously (Deno's wgpu, and
 * Dawn's createComputePipeline under Node: the event loop stops while the
 * software adapter compiles a shader), and the transformer's first step builds
 * dozens of them: a peer doing that inside the ring answers no link heartbeat
 * for many seconds, and the others drop it as gone. So a throwaway copy of the
 * model takes one training step and one evaluation first; the Gpu keeps the
 * pipelines, and the real model reuses them. Before the ring the peer still
 * answers the signaling server's heartbeats, so where the runtime can build a
 * pipeline without blocking (Gpu.compileAhead), it does.
 */
import type { Dataset } from '../data/dataset.ts';
import { gatherExamples } from '../data/dataset.ts';
import { createModel, createOptimizer } from '../engine/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { modelSpecFor } from './model-fit.ts';
import type { LocalTrainConfig } from './train-local.ts';

/** Largest evaluation chunk GraphModel.evaluate uses (the matmul it picks may depend on the rows). */
const EVAL_CHUNK = 500;

export async function warmUpKernels(gpu: Gpu, config: LocalTrainConfig, train: Dataset, test: Dataset): Promise<void> {
  // Pipelines are built off the event loop where the runtime can (Dawn's createComputePipelineAsync):
  // the step is tried again, on a fresh throwaway model, after each pipeline it was missing.
  await gpu.compileAhead(() => stepOnce(gpu, config, train, test));
}

async function stepOnce(gpu: Gpu, config: LocalTrainConfig, train: Dataset, test: Dataset): Promise<void> {
  const model = createModel(gpu, modelSpecFor(config, train));
  const optimizer = createOptimizer(model, { kind: config.optimizer, lr: config.lr, momentum: config.momentum, weightDecay: config.weightDecay });
  try {
    const n = Math.min(config.batch, train.count);
    const batch = gatherExamples(train, Uint32Array.from({ length: n }, (_, i) => i));
    await model.forwardBackward(batch.inputs, batch.labels, n);
    optimizer.step();
    const m = Math.min(EVAL_CHUNK, test.count);
    const held = gatherExamples(test, Uint32Array.from({ length: m }, (_, i) => i));
    await model.evaluate(held.inputs, held.labels);
  } finally {
    optimizer.destroy();
    model.destroy();
  }
}
