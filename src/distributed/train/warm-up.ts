/**
 * Builds a peer's model before the peer takes its place in the ring, with
 * every kernel its steps and evaluations use compiled.
 *
 * Some runtimes build a compute pipeline synchronously (Deno's wgpu, and
 * Dawn's createComputePipeline under Node: the event loop stops while the
 * software adapter compiles a shader), and the transformer's first step builds
 * dozens of them: a peer doing that inside the ring answers no link heartbeat
 * for many seconds, and the others drop it as gone. So the model the peer will
 * train, and its optimizer, are made here, inside Gpu.compileAhead, which
 * builds each missing pipeline without blocking (the peer still answers the
 * signaling server's heartbeats) and throws away what an attempt that hit one
 * had made. The trainer then takes the model and optimizer over: one model in
 * memory, never a throwaway copy per missing pipeline.
 */
import { useMixedPrecision } from './mixed-precision.ts';
import type { Dataset } from '../../data/dataset.ts';
import { createModelInPieces, createOptimizer, type Model, type Optimizer, useMicroBatch } from '../../engine/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { modelSpecFor } from './model-fit.ts';
import type { LocalTrainConfig } from './config-types.ts';

/** A model and its optimizer made for a config, their kernels compiled: the trainer's to use and destroy. */
export interface PreparedTraining {
  model: Model;
  optimizer: Optimizer;
}

export async function prepareTraining(
  gpu: Gpu,
  config: LocalTrainConfig,
  train: Dataset,
  test: Dataset,
): Promise<PreparedTraining> {
  // Its weights are drawn with the loop turning (GPT-2 124M: 43 s of drawing at load 24 was 43 s of silence).
  const model = await gpu.compileAhead(() => createModelInPieces(gpu, modelSpecFor(config, train)));
  try {
    await eventLoopTurn();
    const optimizer = await gpu.compileAhead(() =>
      createOptimizer(model, {
        kind: config.optimizer,
        lr: config.lr,
        momentum: config.momentum,
        weightDecay: config.weightDecay,
      }),
    );
    // The step's plan is the micro-batch's when one splits it: that is the one to compile.
    useMicroBatch(model, config.microBatch, config.batch);
    if (config.precision === 'f16-mixed') useMixedPrecision(model);
    // One plan per attempt: a plan is kept only once it is whole, and an abandoned attempt destroys only what it made.
    for (const makePlan of model.plansFor?.(Math.min(config.batch, train.count), test.count) ?? []) {
      await eventLoopTurn();
      await gpu.compileAhead(makePlan);
    }
    return { model, optimizer };
  } catch (err) {
    model.destroy();
    throw err;
  }
}

/**
 * Lets timers and sockets run (the server's pings, answered). Under Deno a GPU wait or a pipeline
 * build holds the thread, and a promise it resolves at once lets the next piece start without
 * the event loop ever turning: the warm-up of GPT-2 124M answered nothing for 57 s and the server
 * dropped the worker (15 s of silence). Between pieces, the loop turns.
 */
function eventLoopTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
