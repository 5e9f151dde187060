/**
 * Keras-style callbacks for model.fit / model.fitDataset, Horovod's set:
 *
 *   callbacks: [
 *     new BroadcastGlobalVariablesCallback(0),  // everyone starts from rank 0's weights
 *     new MetricAverageCallback(),              // epoch logs averaged over ranks (before callbacks that read them)
 *     new LearningRateWarmupCallback({ baseLr, warmupEpochs: 3 }),
 *     new StopTogetherCallback(),               // last: if one rank stops, all do
 *   ]
 *
 * Besides these, importing this module registers one callback with TF.js
 * that every fit() runs first: after each batch it flushes the model's
 * DistributedOptimizer (averages the batch's gradients over the ring and
 * applies them), because TF.js's minimize() cannot wait for the network.
 */
import type * as tf from '@tensorflow/tfjs-core';
import { Callback, registerCallbackConstructor, type Logs } from '@tensorflow/tfjs-layers';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { allreduce } from '../collectives/allreduce.ts';
import { averageMetrics } from '../distributed/api/broadcast-state.ts';
import { learningRateAt } from '../distributed/api/lr.ts';
import { broadcastOptimizerState, broadcastVariables } from './broadcast.ts';
import { DistributedOptimizer, setLearningRate } from './optimizer.ts';
import { resolveRing, type RingSource } from './ring.ts';

export interface RingCallbackOptions {
  comm?: RingSource;
  timeoutMs?: number;
}

/** Runs in every fit(): flushes a DistributedOptimizer after each batch. Harmless for any other optimizer. */
class FlushDistributedOptimizer extends Callback {
  override async onBatchEnd(): Promise<void> {
    const opt = this.model?.optimizer;
    if (opt instanceof DistributedOptimizer) await opt.flush();
  }
}

// Once per loaded copy of this module (TF.js refuses a constructor registered twice).
const registered = Symbol.for('ringtrain.tfjs.flushCallback');
const globals = globalThis as Record<symbol, unknown>;
if (!globals[registered]) {
  registerCallbackConstructor(0, FlushDistributedOptimizer);
  globals[registered] = true;
}

/** Horovod's BroadcastGlobalVariablesCallback: at the start of training every rank takes `rootRank`'s weights and optimizer state. */
export class BroadcastGlobalVariablesCallback extends Callback {
  constructor(
    readonly rootRank = 0,
    private readonly o: RingCallbackOptions = {},
  ) {
    super();
  }
  override async onTrainBegin(): Promise<void> {
    await broadcastVariables(this.model, this.rootRank, this.o);
    if (this.model.optimizer) await broadcastOptimizerState(this.model.optimizer, this.rootRank, this.o);
  }
}

/** Turns the tensor-valued entries of TF.js logs into numbers (freeing the tensors), in place. */
async function resolveLogs(logs: Logs): Promise<void> {
  const values = logs as Record<string, number | tf.Scalar>;
  for (const key of Object.keys(values)) {
    const v = values[key];
    if (typeof v !== 'number') {
      values[key] = (await v.data())[0];
      v.dispose();
    }
  }
}

/** Horovod's MetricAverageCallback: each epoch's logs (loss, acc, val_*) become their mean over all ranks. Put it before callbacks that read logs. */
export class MetricAverageCallback extends Callback {
  constructor(private readonly o: RingCallbackOptions = {}) {
    super();
  }
  override async onEpochEnd(_epoch: number, logs?: Logs): Promise<void> {
    if (!logs) return;
    await resolveLogs(logs);
    const comm = resolveRing(this.o.comm, 'MetricAverageCallback');
    Object.assign(logs, await averageMetrics(comm, { ...logs }, 1, this.o.timeoutMs));
  }
}

export interface WarmupOptions extends RingCallbackOptions {
  /** The learning rate one rank would use alone; it ramps up to baseLr × size (or stays, with scaleBySize false). */
  baseLr: number;
  /** Length of the ramp, in batches… */
  warmupSteps?: number;
  /** …or in epochs (converted with fit's sample count and batch size). */
  warmupEpochs?: number;
  scaleBySize?: boolean;
  /** 'cosine': after the warm-up the rate anneals to zero by the end of fit (its epochs × batches per epoch). Default 'constant'. */
  decay?: 'constant' | 'cosine';
}

/**
 * Horovod's LearningRateWarmupCallback: a large scaled learning rate is too
 * much for a fresh model, so it grows linearly from baseLr to baseLr × size
 * over the warm-up, then stays, or with `decay: 'cosine'` anneals to zero by
 * the end of fit, so the last epochs settle instead of bouncing around a
 * minimum (src/distributed/api/lr.ts does the arithmetic).
 */
export class LearningRateWarmupCallback extends Callback {
  private step = 0;
  private warmupSteps = 0;
  private totalSteps = 0;
  /** The rate set before the current batch (for tests and logs). */
  lastLr = NaN;

  constructor(private readonly o: WarmupOptions) {
    super();
    if (o.warmupSteps !== undefined && o.warmupEpochs !== undefined) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'LearningRateWarmupCallback: give warmupSteps or warmupEpochs, not both',
      );
    }
  }

  override async onTrainBegin(): Promise<void> {
    this.step = 0;
    // fit() gives samples and batchSize, fitDataset() its batchesPerEpoch as steps.
    const p = this.params as { samples?: number; batchSize?: number; steps?: number; epochs?: number };
    const stepsPerEpoch = (what: string): number => {
      if (p.steps) return p.steps;
      if (!p.samples || !p.batchSize) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `LearningRateWarmupCallback: ${what} needs the number of batches per epoch (model.fit knows it; give fitDataset batchesPerEpoch)`,
        );
      }
      return Math.ceil(p.samples / p.batchSize);
    };
    this.warmupSteps =
      this.o.warmupEpochs !== undefined
        ? Math.round(this.o.warmupEpochs * stepsPerEpoch('warmupEpochs'))
        : (this.o.warmupSteps ?? 0);
    this.totalSteps = this.o.decay === 'cosine' ? (p.epochs ?? 0) * stepsPerEpoch("decay 'cosine'") : 0;
    // A warm-up as long as the whole run leaves nothing to anneal: the rate just ramps.
    if (this.totalSteps <= this.warmupSteps) this.totalSteps = 0;
  }

  override async onBatchBegin(): Promise<void> {
    const size = resolveRing(this.o.comm, 'LearningRateWarmupCallback').size;
    const schedule = {
      baseLr: this.o.baseLr,
      size,
      warmupSteps: this.warmupSteps,
      scaleBySize: this.o.scaleBySize,
      decay: this.totalSteps > 0 ? ('cosine' as const) : ('constant' as const),
      totalSteps: this.totalSteps,
    };
    this.lastLr = learningRateAt(schedule, this.step++);
    setLearningRate(this.model.optimizer, this.lastLr);
  }
}

export interface StopTogetherOptions extends RingCallbackOptions {
  /** Also agree after every batch (one tiny allreduce each), for callbacks that stop mid-epoch. Default: after each epoch only. */
  everyBatch?: boolean;
}

/**
 * When one rank's model.stopTraining turns true (EarlyStopping, a user's
 * condition, a deadline), every rank stops at the same point: otherwise the
 * others would wait in the next allreduce for a rank that has gone. Put it
 * after every callback that may stop training.
 */
export class StopTogetherCallback extends Callback {
  constructor(private readonly o: StopTogetherOptions = {}) {
    super();
  }
  private async agree(): Promise<void> {
    const comm = resolveRing(this.o.comm, 'StopTogetherCallback');
    const any = await allreduce(comm, Int32Array.of(this.model.stopTraining ? 1 : 0), {
      op: 'max',
      name: 'tfjs/stop-training',
      timeoutMs: this.o.timeoutMs,
    });
    if (any[0] > 0) this.model.stopTraining = true;
  }
  override async onBatchEnd(): Promise<void> {
    if (this.o.everyBatch) await this.agree();
  }
  override async onEpochEnd(): Promise<void> {
    await this.agree();
  }
}
