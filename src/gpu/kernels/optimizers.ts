/**
 * Optimizer update kernels over flat buffers. Hyperparameters live in a
 * uniform buffer the caller rewrites each step (`gpu.writeUniform`), so the
 * planned dispatches are reused. See shaders/sgd.wgsl and shaders/adamw.wgsl.
 *
 * A flat buffer may be bigger than one binding (a 40M-parameter model's 160 MB
 * against lavapipe's 128 MiB maxStorageBufferBindingSize): the update is then
 * one dispatch per slice of at most `gpu.maxBindingBytes`, every buffer bound
 * over the same words, all sharing the one uniform. Each element's update
 * reads only its own words, so the slices give the same bits as one dispatch.
 * Each shader takes its length from the bound range (arrayLength), not the uniform.
 */
import { linearGroups, type Binding, type Dispatch, type Gpu, type UniformField } from '../gpu.ts';
import { checkDims, rowSlices, subRange } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('sgd', { shader: 'sgd', entryPoints: ['main'] });
defineKernel('adamw', { shader: 'adamw', entryPoints: ['main'] });

export interface SgdHyper {
  lr: number;
  momentum: number;
  weightDecay: number;
}

export function sgdFields(h: SgdHyper): UniformField[] {
  return [
    ['f32', h.lr],
    ['f32', h.momentum],
    ['f32', h.weightDecay],
  ];
}

/** The same elementwise update over every slice of `n` words of the flat buffers (one dispatch each). */
function planSliced(gpu: Gpu, key: string, uniform: GPUBuffer, flat: Binding[], n: number): Dispatch[] {
  checkDims(key, { n });
  return rowSlices(gpu, n, 1, `${key}: the flat buffers`).map(({ start, count }) =>
    gpu.plan(key, [uniform, ...flat.map((b) => subRange(b, start, count))], linearGroups(count, 256)),
  );
}

export function planSgd(
  gpu: Gpu,
  uniform: GPUBuffer,
  param: Binding,
  grad: Binding,
  velocity: Binding,
  n: number,
): Dispatch[] {
  return planSliced(gpu, 'sgd', uniform, [param, grad, velocity], n);
}

export interface AdamwHyper {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 1-based step number, for bias correction. */
  step: number;
}

export function adamwFields(h: AdamwHyper): UniformField[] {
  return [
    ['f32', h.lr],
    ['f32', h.beta1],
    ['f32', h.beta2],
    ['f32', h.eps],
    ['f32', h.weightDecay],
    ['f32', 1 - Math.pow(h.beta1, h.step)],
    ['f32', 1 - Math.pow(h.beta2, h.step)],
  ];
}

export function planAdamw(
  gpu: Gpu,
  uniform: GPUBuffer,
  param: Binding,
  grad: Binding,
  m1: Binding,
  m2: Binding,
  n: number,
): Dispatch[] {
  return planSliced(gpu, 'adamw', uniform, [param, grad, m1, m2], n);
}
