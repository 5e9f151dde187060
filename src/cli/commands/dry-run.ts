/**
 * `train --dry-run`: builds the model, its optimizer and the plan of one
 * training step at --batch on a planning-only Gpu (src/gpu/planning-device.ts)
 * that has the real adapter's limits, and reports what that would hold on the
 * GPU, without training. A plan that the adapter refuses (a buffer past
 * maxBufferSize, a binding no kernel can split) fails here with the same
 * message training would give.
 */
import { createModel, createOptimizer, type ModelSpec, useMicroBatch } from '../../engine/index.ts';
import { GraphModel } from '../../engine/graph-model.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { planningGpu } from '../../gpu/planning-device.ts';
import type { TrainOptions } from '../options/train-options.ts';

/** What `planned_gpu_bytes` adds up, in the JSON line itself so that nobody reads more into it. */
export const COUNTED =
  'every GPU buffer created before the first step: parameters and gradients (flat, 256-byte aligned), optimizer state, ' +
  'and the training step at --batch (activations, activation gradients, kernel scratch, loss head, uniforms; ' +
  'with --micro-batch, the plan of one pass at the micro-batch and the second flat gradient its passes add from); ' +
  'the step lends each buffer on after its last reader (made once, kept across steps), so this is also the peak; the end-of-run evaluation plan and read-back staging are not counted';

export interface DryRunReport {
  dry_run: true;
  model: string;
  params: number;
  batch: number;
  /** Examples per forward-backward pass (--micro-batch); null: the whole batch in one pass. */
  micro_batch: number | null;
  precision: 'f32' | 'f16-mixed';
  planned_gpu_bytes: number;
  planned_gpu_buffers: number;
  planned_gpu_bytes_by_part: { parameters_and_gradients: number; optimizer_state: number; training_step: number };
  largest_buffer: { label: string; bytes: number } | null;
  counted: string;
  runtime: string;
  adapter: string;
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number };
}

type DryRunOptions = Pick<
  TrainOptions,
  'model' | 'batch' | 'optimizer' | 'lr' | 'momentum' | 'weightDecay' | 'microBatch'
> &
  Partial<Pick<TrainOptions, 'precision'>>;

/** Plans the model `spec`, its optimizer and one training step on a planning-only twin of `gpu`; `gpu` itself allocates nothing. */
export function planDryRun(gpu: Gpu, spec: ModelSpec, opts: DryRunOptions): DryRunReport {
  const planner = planningGpu(gpu);
  const bytes = () => planner.pool.createdBytes;
  const model = createModel(planner, spec);
  const afterModel = bytes();
  createOptimizer(model, { kind: opts.optimizer, lr: opts.lr, momentum: opts.momentum, weightDecay: opts.weightDecay });
  const afterOptimizer = bytes();
  useMicroBatch(model, opts.microBatch, opts.batch);
  // f16-mixed plans the linear layers' f16 copies (and refuses here, as training would, without shader-f16).
  if (opts.precision === 'f16-mixed' && model instanceof GraphModel) model.useMixedPrecision();
  if (model instanceof GraphModel) model.planTrainingStep(opts.batch);
  return {
    dry_run: true,
    model: opts.model,
    params: model.paramCount,
    batch: opts.batch,
    micro_batch: opts.microBatch ?? null,
    precision: opts.precision ?? 'f32',
    planned_gpu_bytes: bytes(),
    planned_gpu_buffers: planner.pool.allocations,
    planned_gpu_bytes_by_part: {
      parameters_and_gradients: afterModel,
      optimizer_state: afterOptimizer - afterModel,
      training_step: bytes() - afterOptimizer,
    },
    largest_buffer: planner.pool.largest,
    counted: COUNTED,
    runtime: gpu.info.runtime,
    adapter: gpu.info.description,
    limits: {
      maxStorageBufferBindingSize: gpu.limits.maxStorageBufferBindingSize,
      maxBufferSize: gpu.limits.maxBufferSize,
    },
  };
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/** The report for a person (without --json). */
export function dryRunLines(r: DryRunReport): string[] {
  const p = r.planned_gpu_bytes_by_part;
  return [
    `dry run: ${r.model}, ${r.params} parameters, batch ${r.batch}${r.micro_batch ? ` in passes of ${r.micro_batch}` : ''}: ${mib(r.planned_gpu_bytes)} in ${r.planned_gpu_buffers} GPU buffers`,
    `  parameters and gradients ${mib(p.parameters_and_gradients)}, optimizer state ${mib(p.optimizer_state)}, training step ${mib(p.training_step)}` +
      (r.largest_buffer ? `; largest buffer ${r.largest_buffer.label} ${mib(r.largest_buffer.bytes)}` : ''),
    `  ${r.runtime} on ${r.adapter}: maxStorageBufferBindingSize ${mib(r.limits.maxStorageBufferBindingSize)}, maxBufferSize ${mib(r.limits.maxBufferSize)}`,
    `  counted: ${r.counted}`,
  ];
}
