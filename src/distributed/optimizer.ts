/**
 * DistributedOptimizer: Horovod's wrapper, over our flat buffers. After each
 * forward/backward it reads the model's flat gradient buffer, averages it
 * over every rank with a fused ring-allreduce, writes it back and lets the
 * wrapped optimizer step. Because every rank starts from the same weights
 * (broadcastParameters) and applies the same averaged gradient, the weights
 * stay identical on every rank without ever being sent again.
 *
 * With backwardPassesPerStep = k, gradients of k passes are summed locally
 * and the allreduce runs once every k passes (fewer, larger messages: the
 * knob for slow links).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/communicator.ts';
import { allreduceFused, DEFAULT_FUSION_THRESHOLD_BYTES } from '../collectives/fusion.ts';
import type { Compression, ReduceOp } from '../collectives/types.ts';
import type { Model } from '../engine/model.ts';
import type { Optimizer } from '../engine/optimizer.ts';

export interface DistributedOptimizerOptions {
  /** 'fp16' sends gradients as float16 (half the bytes). Default 'none'. */
  compression?: Compression;
  /** Local passes whose gradients are summed before one allreduce. Default 1. */
  backwardPassesPerStep?: number;
  /** 'average' (default) or 'sum' over ranks. */
  op?: Extract<ReduceOp, 'average' | 'sum'>;
  /** Fusion buffer size in bytes; tensors beyond it go in further collectives. */
  fusionThresholdBytes?: number;
  /** A rank silent this long fails the step (ms). */
  timeoutMs?: number;
}

export interface StepResult {
  /** True when this call averaged gradients and updated the weights. */
  applied: boolean;
  /** Payload bytes this rank put on the wire for the allreduce (0 when not applied). */
  bytesSent: number;
}

export class DistributedOptimizer {
  readonly compression: Compression;
  readonly backwardPassesPerStep: number;
  readonly op: 'average' | 'sum';
  readonly fusionThresholdBytes: number;
  private readonly timeoutMs: number | undefined;
  private accumulated: Float32Array | null = null;
  private passes = 0;

  constructor(
    private comm: Communicator,
    readonly model: Model,
    readonly optimizer: Optimizer,
    options: DistributedOptimizerOptions = {},
  ) {
    this.compression = options.compression ?? 'none';
    this.backwardPassesPerStep = options.backwardPassesPerStep ?? 1;
    this.op = options.op ?? 'average';
    this.fusionThresholdBytes = options.fusionThresholdBytes ?? DEFAULT_FUSION_THRESHOLD_BYTES;
    this.timeoutMs = options.timeoutMs;
    if (!Number.isInteger(this.backwardPassesPerStep) || this.backwardPassesPerStep < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `backwardPassesPerStep must be a positive integer, got ${options.backwardPassesPerStep}`);
    }
    if (this.op !== 'average' && this.op !== 'sum') {
      throw new RingtrainError(ErrorCode.InvalidArgument, `DistributedOptimizer op must be 'average' or 'sum', got '${String(this.op)}'`);
    }
  }

  /** Swaps the communicator (elastic training re-forms the ring with new members). */
  setCommunicator(comm: Communicator): void {
    this.comm = comm;
  }

  /**
   * Call after model.forwardBackward(). Every backwardPassesPerStep-th call
   * averages the summed gradients over all ranks and steps the optimizer.
   */
  async step(lr?: number): Promise<StepResult> {
    const grads = await this.model.readGrads();
    if (this.backwardPassesPerStep > 1) {
      if (!this.accumulated) this.accumulated = new Float32Array(grads.length);
      const acc = this.accumulated;
      for (let i = 0; i < grads.length; i++) acc[i] += grads[i];
      this.passes++;
      if (this.passes < this.backwardPassesPerStep) return { applied: false, bytesSent: 0 };
    }
    const local = this.accumulated ?? grads;
    const before = this.comm.stats.bytesSent;
    const reduced = await this.allreduceGradients(local);
    this.model.writeGrads(reduced);
    this.optimizer.step(lr);
    if (this.accumulated) {
      this.accumulated.fill(0);
      this.passes = 0;
    }
    return { applied: true, bytesSent: this.comm.stats.bytesSent - before };
  }

  /** Drops gradients summed so far (after a failed step, before retrying it). */
  resetAccumulation(): void {
    this.accumulated?.fill(0);
    this.passes = 0;
  }

  private async allreduceGradients(flat: Float32Array): Promise<Float32Array> {
    // One named tensor per layer entry: negotiation checks names and shapes,
    // and fusion packs them back into as few collectives as the threshold allows.
    const tensors = this.model.layout.map((e) => ({ name: e.name, data: flat.subarray(e.offset, e.offset + e.length) }));
    const passes = this.backwardPassesPerStep;
    const results = await allreduceFused(this.comm, tensors, {
      op: this.op,
      compression: this.compression,
      thresholdBytes: this.fusionThresholdBytes,
      // Summed passes become their mean here, so one step of k passes equals one pass over k batches.
      prescale: passes > 1 ? 1 / passes : undefined,
      timeoutMs: this.timeoutMs,
    });
    const out = new Float32Array(flat.length); // padding between tensors stays zero
    this.model.layout.forEach((e, i) => {
      const r = results[i] as Float32Array;
      checkFinite(e.name, r);
      out.set(r, e.offset);
    });
    return out;
  }
}

function checkFinite(name: string, data: Float32Array): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `the averaged gradient of '${name}' holds ${data[i]} at index ${i}: a rank diverged; lower the learning rate`, { tensor: name, index: i });
    }
  }
}
