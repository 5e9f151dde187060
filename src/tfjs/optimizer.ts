/**
 * DistributedOptimizer for TensorFlow.js: wraps any tf.train.Optimizer so
 * that the gradients TF.js computes are averaged over the ring before the
 * wrapped optimizer applies them. Every rank starts from the same weights
 * (broadcastVariables) and applies the same averaged gradient, so the
 * replicas stay identical.
 *
 * TF.js calls applyGradients synchronously from inside minimize(), and an
 * allreduce has to wait for the network, so the work is split in two:
 * applyGradients packs the gradients into one flat tensor (fixed variable
 * order) and keeps it; flush() reads it back, allreduces it (one fused
 * collective) and applies the average. model.fit and model.fitDataset flush
 * on their own (callbacks.ts registers a callback that does it after every
 * batch); a custom loop calls `await opt.minimizeAsync(f)` or `await flush()`.
 */
import * as tf from '@tensorflow/tfjs-core';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/communicator.ts';
import { allreduceFused } from '../collectives/fusion.ts';
import type { Compression } from '../collectives/codecs/types.ts';
import { GradientAccumulator } from '../distributed/reduce/accumulator.ts';
import { reduceSettings, type GradientReducerOptions } from '../distributed/reduce/settings.ts';
import { agreeOnLayout, type VariableSpec } from './layout.ts';
import { resolveRing, type RingSource } from './ring.ts';

export interface DistributedOptimizerOptions extends GradientReducerOptions {
  /** The ring; the one init() set up when omitted. */
  comm?: RingSource;
}

interface PendingGradients {
  layout: VariableSpec[];
  /** All gradients, flattened and concatenated in layout order (kept out of tf.tidy). */
  packed: tf.Tensor1D;
}

/** tfjs-core's NamedTensor, which its index does not export. */
export interface NamedTensor {
  name: string;
  tensor: tf.Tensor;
}

type GradientList = tf.NamedTensorMap | NamedTensor[];

function asList(grads: GradientList): NamedTensor[] {
  return Array.isArray(grads) ? grads : Object.keys(grads).map((name) => ({ name, tensor: grads[name] }));
}

/** Sets an optimizer's learning rate, whatever its kind (SGD has a setter; the others keep a field). */
export function setLearningRate(optimizer: tf.Optimizer, lr: number): void {
  const o = optimizer as unknown as { setLearningRate?: (lr: number) => void; learningRate?: unknown };
  if (typeof o.setLearningRate === 'function') o.setLearningRate(lr);
  else if (typeof o.learningRate === 'number') o.learningRate = lr;
  else
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot set the learning rate of a ${optimizer.getClassName()} optimizer: it has no learningRate`,
    );
}

const BRAND = Symbol.for('ringtrain.tfjs.DistributedOptimizer');

export class DistributedOptimizer extends tf.Optimizer {
  static get className(): string {
    return 'DistributedOptimizer';
  }
  /**
   * tf.Optimizer answers instanceof by duck typing (any object with minimize,
   * computeGradients and applyGradients), and subclasses inherit that: without
   * this, every TF.js optimizer would pass for a DistributedOptimizer.
   */
  static override [Symbol.hasInstance](instance: unknown): boolean {
    return typeof instance === 'object' && instance !== null && (instance as Record<symbol, unknown>)[BRAND] === true;
  }
  private readonly [BRAND] = true;
  readonly compression: Compression;
  readonly backwardPassesPerStep: number;
  readonly op: 'average' | 'sum';
  private readonly fusionThresholdBytes: number;
  private readonly timeoutMs: number | undefined;
  private readonly ring: RingSource | undefined;
  private pending: PendingGradients | null = null;
  /** Sums backward passes as this library's reducer does (backwardPassesPerStep). */
  private readonly accumulator: GradientAccumulator;
  /** The communicator whose ranks were seen to agree on the layout (an elastic regroup makes a new one). */
  private checkedComm: Communicator | null = null;

  constructor(
    readonly optimizer: tf.Optimizer,
    options: DistributedOptimizerOptions = {},
  ) {
    super();
    if (!(optimizer instanceof tf.Optimizer)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'DistributedOptimizer wraps a TF.js optimizer: pass e.g. tf.train.sgd(0.01)',
      );
    }
    this.ring = options.comm;
    const settings = reduceSettings(options);
    this.compression = settings.compression;
    this.backwardPassesPerStep = settings.backwardPassesPerStep;
    this.op = settings.op;
    this.fusionThresholdBytes = settings.fusionThresholdBytes;
    this.timeoutMs = settings.timeoutMs;
    this.accumulator = new GradientAccumulator(this.backwardPassesPerStep);
    if (this.compression !== 'none' && this.compression !== 'fp16') {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `unknown compression '${String(this.compression)}'; use 'none' or 'fp16'`,
      );
    }
  }

  /** The communicator this optimizer averages over right now. */
  get comm(): Communicator {
    return resolveRing(this.ring, 'DistributedOptimizer');
  }

  /** True when gradients wait for flush(). */
  get hasPending(): boolean {
    return this.pending !== null;
  }

  /** Keeps the gradients for flush(); called by TF.js from minimize() (model.fit does). */
  override applyGradients(variableGradients: GradientList): void {
    if (this.pending) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'DistributedOptimizer: the previous gradients were never averaged; after model.trainOnBatch or optimizer.minimize call `await optimizer.flush()` (or use minimizeAsync; model.fit does it for you)',
      );
    }
    const list = asList(variableGradients);
    if (list.length === 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'DistributedOptimizer: no gradients to apply (the loss depends on no trainable variable)',
      );
    const layout: VariableSpec[] = [];
    for (const g of list) {
      if (!g.tensor)
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `DistributedOptimizer: variable '${g.name}' has no gradient; the loss does not depend on it`,
        );
      if (g.tensor.dtype !== 'float32')
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `DistributedOptimizer: the gradient of '${g.name}' is ${g.tensor.dtype}; only float32 gradients are averaged`,
        );
      layout.push({ name: g.name, shape: [...g.tensor.shape], dtype: g.tensor.dtype });
    }
    // One tensor, one read-back in flush(); keep() lets it outlive minimize()'s tidy scope.
    const packed = tf.keep(tf.tidy(() => tf.concat(list.map((g) => tf.reshape(g.tensor, [-1])) as tf.Tensor1D[])));
    this.pending = { layout, packed };
  }

  /** Averages the kept gradients over the ring and applies them. Resolves to false while backward passes are still being summed. */
  async flush(): Promise<boolean> {
    const pending = this.pending;
    if (!pending) return false;
    this.pending = null;
    let local: Float32Array;
    try {
      local = (await pending.packed.data()) as Float32Array;
    } finally {
      pending.packed.dispose();
    }
    const comm = this.comm;
    if (this.checkedComm !== comm) {
      await agreeOnLayout(comm, pending.layout, 'DistributedOptimizer', this.timeoutMs);
      this.checkedComm = comm;
    }
    const summed = this.accumulator.add(local);
    if (!summed) return false;
    const averaged = await this.allreduce(comm, pending.layout, summed);
    this.accumulator.reset();
    const grads = tf.tidy(() =>
      averaged.map((data, i) => ({
        name: pending.layout[i].name,
        tensor: tf.keep(tf.tensor(data, pending.layout[i].shape, 'float32')),
      })),
    );
    try {
      this.optimizer.applyGradients(grads);
    } finally {
      tf.dispose(grads.map((g) => g.tensor));
    }
    return true;
  }

  /** minimize() for custom loops: computes the gradients of `f`, averages them over the ring, applies them. */
  async minimizeAsync(f: () => tf.Scalar, returnCost = false, varList?: tf.Variable[]): Promise<tf.Scalar | null> {
    const cost = this.minimize(f, true, varList);
    try {
      await this.flush();
    } catch (err) {
      cost?.dispose();
      throw err;
    }
    if (returnCost) return cost;
    cost?.dispose();
    return null;
  }

  /** Drops kept and summed gradients (after a failed step, before retrying it). */
  reset(): void {
    this.pending?.packed.dispose();
    this.pending = null;
    this.accumulator.reset();
  }

  setLearningRate(lr: number): void {
    setLearningRate(this.optimizer, lr);
  }

  private async allreduce(comm: Communicator, layout: VariableSpec[], flat: Float32Array): Promise<Float32Array[]> {
    // Names by position: TF.js numbers its variable names per process, so ranks may differ there.
    let offset = 0;
    const tensors = layout.map((v, i) => {
      const n = v.shape.reduce((a, b) => a * b, 1);
      const data = flat.subarray(offset, offset + n);
      offset += n;
      return { name: `tfjs/${i}`, data };
    });
    const results = (await allreduceFused(comm, tensors, {
      op: this.op,
      compression: this.compression,
      thresholdBytes: this.fusionThresholdBytes,
      // k summed passes become their mean, so one update of k passes equals one pass over k batches.
      prescale: this.accumulator.prescale,
      timeoutMs: this.timeoutMs,
    })) as Float32Array[];
    results.forEach((r, i) => {
      for (let j = 0; j < r.length; j++) {
        if (!Number.isFinite(r[j])) {
          throw new RingtrainError(
            ErrorCode.InvalidArgument,
            `the averaged gradient of '${layout[i].name}' holds ${r[j]} at index ${j}: a rank diverged; lower the learning rate`,
            { tensor: layout[i].name, index: j },
          );
        }
      }
    });
    return results;
  }

  override getWeights(): Promise<NamedTensor[]> {
    return this.optimizer.getWeights();
  }

  override setWeights(weightValues: NamedTensor[]): Promise<void> {
    return this.optimizer.setWeights(weightValues);
  }

  override get iterations(): number {
    return this.optimizer.iterations;
  }

  override dispose(): void {
    this.reset();
    this.optimizer.dispose();
    super.dispose();
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      optimizer: this.optimizer.getClassName(),
      ...this.optimizer.getConfig(),
      compression: this.compression,
      backwardPassesPerStep: this.backwardPassesPerStep,
    };
  }
}
