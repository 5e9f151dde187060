/** One single-peer training step: forward, backward, update. Returns the batch's mean loss. */
import type { Model } from './model.ts';
import type { Optimizer } from './optimizer.ts';

export async function trainStep(model: Model, optimizer: Optimizer, x: Float32Array, labels: ArrayLike<number>, lr?: number): Promise<number> {
  const loss = await model.forwardBackward(x, labels);
  optimizer.step(lr);
  return loss;
}
