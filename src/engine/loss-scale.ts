/**
 * Dynamic loss scaling for --precision f16-mixed. The loss's gradient is
 * multiplied by S before backward, so that small activation gradients stay
 * above f16's smallest values in the f16 matmuls; the parameters' gradients are
 * multiplied by 1/S after it, so the optimizer sees the true gradient. Where a
 * value passed f16's range (a cast raised the flag) or a gradient came out inf
 * or NaN (the unscale raised it), the step's update is skipped and counted and S
 * halves; after `growthInterval` clean steps in a row S doubles, so S settles
 * just under where it overflows.
 *
 * The flag is read every step: one GPU wait per step, which a step on a CPU
 * adapter does not notice and a GPU step pays (Deno's ~11 ms poll); reading it
 * a few steps behind would need the optimizers' shaders to skip on the GPU.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Binding, Dispatch, Gpu } from '../gpu/gpu.ts';
import { planLossScale } from '../gpu/kernels/loss-scale.ts';

export interface LossScaleOptions {
  /** S at the first step (default 2¹⁶, as PyTorch's GradScaler). */
  initialScale?: number;
  /** Clean steps in a row after which S doubles (default 200: a 1,000-step run grows S a few times). */
  growthInterval?: number;
}

export const DEFAULT_INITIAL_SCALE = 2 ** 16;
export const DEFAULT_GROWTH_INTERVAL = 200;
/** S never grows past f32's range of safe products nor shrinks to nothing (a model whose forward overflows f16 at S = 1 skips every step: the floor keeps that visible as skipped steps, not as a NaN). */
const MAX_SCALE = 2 ** 64;
const MIN_SCALE = 2 ** -24;

export class LossScaler {
  /** [S, 1/S], read by the seed and unscale kernels. */
  readonly scaleBuffer: GPUBuffer;
  /** One word: 1 where this step overflowed. Zeroed at each step's start. */
  readonly flag: GPUBuffer;
  readonly growthInterval: number;
  private current: number;
  private clean = 0;
  private skippedSteps = 0;
  private written = NaN;

  constructor(
    private readonly gpu: Gpu,
    options: LossScaleOptions = {},
  ) {
    const initial = options.initialScale ?? DEFAULT_INITIAL_SCALE;
    const growth = options.growthInterval ?? DEFAULT_GROWTH_INTERVAL;
    if (!(initial >= MIN_SCALE && initial <= MAX_SCALE) || !Number.isInteger(growth) || growth < 1) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `loss scaling: initialScale must be from 2^-24 to 2^64 and growthInterval a whole number >= 1; got ${initial} and ${growth}`,
        { initialScale: initial, growthInterval: growth },
      );
    }
    this.current = initial;
    this.growthInterval = growth;
    this.scaleBuffer = gpu.storage(2, 'loss-scale');
    this.flag = gpu.storage(1, 'loss-scale/overflow');
  }

  /** S now: what the next step's loss gradient is multiplied by. */
  get scale(): number {
    return this.current;
  }

  /** Steps whose update was skipped for an overflow, so far. */
  get skipped(): number {
    return this.skippedSteps;
  }

  /** Multiplies the loss's gradient (`words` values) by S: recorded after the loss head, before backward. */
  planSeed(dOutput: Binding, words: number): Dispatch[] {
    return planLossScale(this.gpu, 'seed', dOutput, words, { scale: this.scaleBuffer, flag: this.flag });
  }

  /** Multiplies the gradients by 1/S and raises the flag at a non-finite one: recorded after backward. */
  planUnscale(grads: Binding, words: number): Dispatch[] {
    return planLossScale(this.gpu, 'unscale', grads, words, { scale: this.scaleBuffer, flag: this.flag });
  }

  /** Before a step is recorded: clears the flag and writes S where it changed (queue writes keep the call order). */
  beginStep(): void {
    this.gpu.write(this.flag, new Uint32Array(1));
    if (this.written === this.current) return;
    this.gpu.write(this.scaleBuffer, Float32Array.from([this.current, 1 / this.current]));
    this.written = this.current;
  }

  /** After the step's backward: whether its update may be applied (no overflow); adjusts S either way. */
  async endStep(): Promise<boolean> {
    return this.settle(await this.readOverflow());
  }

  /** After the step's backward: whether this process's step overflowed (one GPU wait). */
  async readOverflow(): Promise<boolean> {
    const [overflowed] = await this.gpu.readU32(this.flag, 0, 1);
    return overflowed !== 0;
  }

  /**
   * Counts the step as skipped (`overflowed`) or clean and adjusts S: what a ring calls with the overflow its
   * ranks agreed on, so that every rank skips the same steps and keeps the same S. Returns whether to apply it.
   */
  settle(overflowed: boolean): boolean {
    if (overflowed) {
      this.skippedSteps++;
      this.clean = 0;
      this.current = Math.max(MIN_SCALE, this.current / 2);
      return false;
    }
    if (++this.clean >= this.growthInterval) {
      this.clean = 0;
      this.current = Math.min(MAX_SCALE, this.current * 2);
    }
    return true;
  }

  destroy(): void {
    this.scaleBuffer.destroy();
    this.flag.destroy();
  }
}
