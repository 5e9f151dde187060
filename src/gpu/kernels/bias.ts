/** Bias add (in place) and bias gradient (column sum). See shaders/bias.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { planColumnSum, type Scratch } from './reduce-rows.ts';
import { checkDims } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('bias', { shader: 'bias', entryPoints: ['add_bias', 'bias_grad'] });

/** y[r, c] += bias[c] for a rows×cols matrix, in place. */
export function planAddBias(gpu: Gpu, y: Binding, bias: Binding, rows: number, cols: number): Dispatch {
  checkDims('addBias', { rows, cols });
  const dims = gpu.uniform(
    [
      ['u32', rows],
      ['u32', cols],
      ['u32', 0],
      ['u32', 0],
    ],
    'bias-dims',
  );
  return gpu.plan('bias', [dims, bias, y], linearGroups(rows * cols, 256), { entryPoint: 'add_bias' });
}

/**
 * dBias[c] = Σ_r dy[r, c] as a tree of row chunks over the whole GPU
 * (reduce-rows.ts); what the ops use.
 */
export function planBiasGradSteps(
  gpu: Gpu,
  dy: Binding,
  dBias: Binding,
  rows: number,
  cols: number,
  scratch?: Scratch,
): Dispatch[] {
  checkDims('biasGrad', { rows, cols });
  return planColumnSum(gpu, dy, dBias, { rows, cols }, scratch);
}

/**
 * dBias[c] = Σ_r dy[r, c] in one dispatch, one invocation per column walking
 * every row: a serial reduction whose workgroups do not grow with the rows.
 * Kept for the hand-wired MLP benchmark fixture; the ops use planBiasGradSteps.
 */
export function planBiasGrad(gpu: Gpu, dy: Binding, dBias: Binding, rows: number, cols: number): Dispatch {
  checkDims('biasGrad', { rows, cols });
  const dims = gpu.uniform(
    [
      ['u32', rows],
      ['u32', cols],
      ['u32', 0],
      ['u32', 0],
    ],
    'bias-dims',
  );
  return gpu.plan('bias', [dims, dy, dBias], linearGroups(cols, 64), { entryPoint: 'bias_grad' });
}
