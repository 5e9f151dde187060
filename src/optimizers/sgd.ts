/** SGD with momentum, PyTorch's form (torch.optim.SGD): weight decay is L2 folded into the gradient. shaders/sgd.wgsl. */
import { defineOptimizer } from './registry.ts';

export const SGD_OPTIMIZER = defineOptimizer({
  name: 'sgd',
  className: 'SGD',
  summary: 'SGD with momentum (L2 weight decay on the gradient)',
  shader: 'sgd',
  state: ['velocity'],
  settings: {
    lr: { default: 0.05, min: 0, max: Infinity, help: 'learning rate' },
    momentum: { default: 0.9, min: 0, max: 1, help: 'momentum' },
    weightDecay: { default: 0, min: 0, max: Infinity, help: 'L2 weight decay, added to the gradient' },
  },
  uniform: (s) => [s.lr, s.momentum, s.weightDecay],
});
