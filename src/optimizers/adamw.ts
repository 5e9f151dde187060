/**
 * AdamW (Loshchilov & Hutter; torch.optim.AdamW): Adam with decoupled weight decay. shaders/adamw.wgsl.
 * The bias corrections 1 - beta^t change every step, so the uniform carries them, computed here in
 * f64 and rounded once to f32.
 */
import { defineOptimizer } from './registry.ts';

export const ADAMW_OPTIMIZER = defineOptimizer({
  name: 'adamw',
  className: 'AdamW',
  summary: 'AdamW (decoupled weight decay)',
  shader: 'adamw',
  state: ['m', 'v'],
  settings: {
    lr: { default: 1e-3, min: 0, max: Infinity, help: 'learning rate' },
    betas: { default: [0.9, 0.999], min: 0, max: 1, help: 'decay rates of the first and second moments' },
    eps: { default: 1e-8, min: 0, max: Infinity, help: 'added to the root of the second moment' },
    weightDecay: { default: 0.01, min: 0, max: Infinity, help: 'decoupled weight decay' },
  },
  uniform: (s, step) => {
    const [beta1, beta2] = s.betas;
    const bc1 = 1 - Math.pow(beta1, step);
    const bc2 = 1 - Math.pow(beta2, step);
    return [s.lr, beta1, beta2, s.eps, s.weightDecay, bc1, bc2];
  },
  commandLineLr: 0.002,
});
