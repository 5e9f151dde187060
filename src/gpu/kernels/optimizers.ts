/**
 * Optimizer update kernels over flat buffers. Hyperparameters live in a
 * uniform buffer the caller rewrites each step (`gpu.writeUniform`), so the
 * planned dispatch is reused. See shaders/sgd.wgsl and shaders/adamw.wgsl.
 */
import { linearGroups, type Binding, type Dispatch, type Gpu, type UniformField } from '../gpu.ts';
import { checkDims } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('sgd', { shader: 'sgd', entryPoints: ['main'] });
defineKernel('adamw', { shader: 'adamw', entryPoints: ['main'] });

export interface SgdHyper {
  lr: number;
  momentum: number;
  weightDecay: number;
}

export function sgdFields(n: number, h: SgdHyper): UniformField[] {
  return [['u32', n], ['f32', h.lr], ['f32', h.momentum], ['f32', h.weightDecay]];
}

export function planSgd(gpu: Gpu, uniform: GPUBuffer, param: Binding, grad: Binding, velocity: Binding, n: number): Dispatch {
  checkDims('sgd', { n });
  return gpu.plan('sgd', [uniform, param, grad, velocity], linearGroups(n, 256));
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

export function adamwFields(n: number, h: AdamwHyper): UniformField[] {
  return [
    ['u32', n], ['f32', h.lr], ['f32', h.beta1], ['f32', h.beta2], ['f32', h.eps], ['f32', h.weightDecay],
    ['f32', 1 - Math.pow(h.beta1, h.step)], ['f32', 1 - Math.pow(h.beta2, h.step)],
  ];
}

export function planAdamw(gpu: Gpu, uniform: GPUBuffer, param: Binding, grad: Binding, m1: Binding, m2: Binding, n: number): Dispatch {
  checkDims('adamw', { n });
  return gpu.plan('adamw', [uniform, param, grad, m1, m2], linearGroups(n, 256));
}
