/** `optim`: the optimizers over a model's flat buffers, and the learning-rate schedules of data-parallel training. */
/**
 * The optimizers, PyTorch's way: `new optim.AdamW(model, { lr: 1e-3 })`,
 * `new optim.SGD(model, { lr: 0.05, momentum: 0.9 })`. OPTIMIZERS holds a class for every optimizer
 * src/optimizers/ defines (`new optim.OPTIMIZERS[name](model, { lr })`): the table the CLI's
 * `--optimizer` looks them up in; createOptimizer(model, { kind }) builds through it.
 */
export {
  AdamW,
  SGD,
  OPTIMIZERS,
  createOptimizer,
  resolveOptimizerSpec,
  type AdamWOptions,
  type SgdOptions,
  type Optimizer,
  type OptimizerSpec,
} from '../engine/optimizer.ts';
export { learningRateAt, validateLrSchedule, type LrSchedule } from '../distributed/api/lr.ts';
