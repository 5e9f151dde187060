/** `optim`: the optimizers over a model's flat buffers, and the learning-rate schedules of data-parallel training. */
export { createOptimizer, resolveOptimizerSpec, type Optimizer, type OptimizerSpec } from '../engine/optimizer.ts';
export { learningRateAt, validateLrSchedule, type LrSchedule } from '../distributed/lr.ts';
