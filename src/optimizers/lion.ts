/**
 * Lion (Chen et al. 2023): the sign of an interpolation of momentum and gradient, with decoupled
 * weight decay and one state buffer (AdamW keeps two). Every coordinate moves by lr, so its lr is
 * about a tenth of AdamW's and its weight decay larger. shaders/lion.wgsl.
 */
import { defineOptimizer } from './registry.ts';

export const LION_OPTIMIZER = defineOptimizer({
  name: 'lion',
  className: 'Lion',
  summary: 'Lion (sign of interpolated momentum, decoupled weight decay)',
  shader: 'lion',
  state: ['m'],
  settings: {
    lr: { default: 1e-4, min: 0, max: Infinity, help: 'learning rate (each coordinate moves by it)' },
    betas: { default: [0.9, 0.99], min: 0, max: 1, help: 'interpolation for the update, decay of the momentum' },
    weightDecay: { default: 0, min: 0, max: Infinity, help: 'decoupled weight decay' },
  },
  uniform: (s) => [s.lr, s.betas[0], s.betas[1], s.weightDecay],
});
