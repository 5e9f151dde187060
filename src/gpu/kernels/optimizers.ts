/**
 * The one runner of every optimizer's update (src/optimizers/: each defines its shader, state and
 * uniform): binding 0 the uniform, 1 the parameters, 2 the gradients, 3… the state buffers. The
 * hyperparameters live in the uniform, which the caller rewrites each step (`gpu.writeUniform`), so
 * the planned dispatches are reused.
 *
 * A flat buffer may be bigger than one binding (a 40M-parameter model's 160 MB
 * against lavapipe's 128 MiB maxStorageBufferBindingSize): the update is then
 * one dispatch per slice of at most `gpu.maxBindingBytes`, every buffer bound
 * over the same words, all sharing the one uniform. Each element's update
 * reads only its own words, so the slices give the same bits as one dispatch.
 * Each shader takes its length from the bound range (arrayLength), not the uniform.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { optimizerNamed, optimizerNames, type OptimizerDefinition } from '../../optimizers/index.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu, type UniformField } from '../gpu.ts';
import { checkDims, rowSlices, subRange } from './common.ts';
import { defineKernel } from './registry.ts';

/** Registers an optimizer's shader as a kernel (what warmUp compiles); the same entry again is a no-op. */
export function defineOptimizerKernel(definition: OptimizerDefinition): void {
  defineKernel(definition.shader, { shader: definition.shader, entryPoints: ['main'] });
}

// The optimizers the registry holds as this file loads; one defined later registers when planned.
for (const name of optimizerNames()) defineOptimizerKernel(optimizerNamed(name)!);

/** A uniform's fields from an optimizer's `uniform(...)` values: every field an f32. */
export function optimizerFields(values: readonly number[]): UniformField[] {
  return values.map((v) => ['f32', v]);
}

/** The update of `definition` over every slice of `n` words of the flat buffers (one dispatch each). */
export function planOptimizerUpdate(
  gpu: Gpu,
  definition: OptimizerDefinition,
  buffers: { uniform: GPUBuffer; param: Binding; grad: Binding; state: readonly Binding[] },
  n: number,
): Dispatch[] {
  const key = definition.shader;
  if (buffers.state.length !== definition.state.length)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${key}: the optimizer keeps ${definition.state.length} state buffers (${definition.state.join(', ')}), got ${buffers.state.length}`,
    );
  defineOptimizerKernel(definition);
  checkDims(key, { n });
  const flat = [buffers.param, buffers.grad, ...buffers.state];
  return rowSlices(gpu, n, 1, `${key}: the flat buffers`).map(({ start, count }) =>
    gpu.plan(key, [buffers.uniform, ...flat.map((b) => subRange(b, start, count))], linearGroups(count, 256)),
  );
}
