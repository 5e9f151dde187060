/**
 * Elastic TF.js training: Horovod's `hvd.elastic` for Keras, over ringtrain's
 * elastic sessions (a job launched with `launch --elastic`, or any job whose
 * config says `elastic: true`).
 *
 *   const state = new hvd.elastic.ModelState(model);
 *   state.registerResetCallback(() => opt.setLearningRate(lr * session.size));
 *   await hvd.elastic.run(state, async () => {
 *     while (state.epoch < epochs) {
 *       const [xs, ys] = hvd.shardTensors([x, y], { skip: state.epochExamples });
 *       await model.fit(xs, ys, { initialEpoch: state.epoch, epochs: state.epoch + 1, batchSize,
 *         callbacks: [new hvd.elastic.CommitStateCallback(state)] });
 *     }
 *   });
 *
 * How a regroup goes. Each commit keeps a copy of the weights, the optimizer
 * state and the position (epoch, batch, examples taken) on every rank, then
 * asks the ring whether anyone has heard of a newer membership (a joiner).
 * When a peer dies, the next collective fails with a broken-ring error: every
 * survivor goes back to its last commit, the session re-forms the ring for
 * the job's next membership, and everyone takes the new rank 0's committed
 * state (broadcast), then `run` calls the training function again. When a
 * peer joins, the ring re-forms at the commit that noticed it, with nothing to
 * undo. Ranks may have committed one step apart when the ring broke (one
 * finished the collective, another did not); the broadcast from rank 0 makes
 * them one again.
 *
 * TF.js's fit cannot start mid-epoch, so the training function is called
 * again with the position to resume from: `state.epoch` (fit's initialEpoch)
 * and `state.epochExamples`, the examples the whole ring took this epoch
 * (shardTensors' `skip` leaves them out and shards the rest over the new
 * size). With fit's `shuffle: false` the skipped examples are exactly those
 * taken; with its default shuffle each rank took a random part of its shard,
 * and the skip keeps the epoch's length right (as Horovod for Keras does by
 * shortening the epoch) rather than the exact examples.
 */
import * as tf from '@tensorflow/tfjs-core';
import { Callback, type LayersModel, type Logs } from '@tensorflow/tfjs-layers';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { broadcast } from '../collectives/broadcast.ts';
import { ElasticState, runElastic, type ElasticSession } from '../distributed/api/elastic-run.ts';
export type { ElasticSession } from '../distributed/api/elastic-run.ts';
import { broadcastOptimizerState, broadcastVariables } from './broadcast.ts';
import { DistributedOptimizer, type NamedTensor } from './optimizer.ts';
import { currentRingSource } from './ring.ts';

export interface ModelStateOptions {
  /** The session; the one init() set up when omitted. */
  session?: ElasticSession;
  timeoutMs?: number;
}

/** The position of training, all of it on every rank; broadcast from rank 0 after each regroup. */
interface Position {
  epoch: number;
  batch: number;
  epochExamples: number;
  steps: number;
}

interface Snapshot {
  position: Position;
  weights: tf.Tensor[];
  optimizer: NamedTensor[];
}

function sessionOf(given: ElasticSession | undefined): ElasticSession {
  const s = given ?? currentRingSource();
  const hooks = (s as Partial<ElasticSession> | null)?.elastic;
  if (!s || !hooks || !(s as Partial<ElasticSession>).job || !(s as Partial<ElasticSession>).settings) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'elastic: no elastic session; call init() from ringtrain/tfjs first (a bare communicator cannot re-form), or pass { session }',
    );
  }
  // Whether the job is elastic at all, ElasticState checks.
  return s as ElasticSession;
}

/**
 * Horovod's KerasState for a TF.js LayersModel: the model's weights, its
 * optimizer's state and the position, committed in memory and restored when
 * the ring breaks.
 */
export class ModelState extends ElasticState implements Position {
  /** Epochs completed. */
  epoch = 0;
  /** Batches completed in the current epoch (at whatever ring size they ran). */
  batch = 0;
  /** Examples the whole ring took in the current epoch: shardTensors' `skip` when the epoch resumes. */
  epochExamples = 0;
  /** Batches completed in the whole run. */
  steps = 0;
  private committed: Snapshot | null = null;

  constructor(
    readonly model: LayersModel,
    private readonly o: ModelStateOptions = {},
  ) {
    super(sessionOf(o.session), { timeoutMs: o.timeoutMs, agreementName: 'tfjs/elastic-membership' });
  }

  /** Keeps a copy of the weights, the optimizer state and the position (in memory, on this rank). */
  async save(): Promise<void> {
    const weights = this.model.getWeights().map((w) => tf.keep(w.clone()));
    const optimizer = this.model.optimizer ? await this.model.optimizer.getWeights() : [];
    // getWeights hands out the optimizer's own variables beside fresh tensors: copy them all, free only the fresh ones.
    const copies = optimizer.map((w) => ({ name: w.name, tensor: tf.keep(w.tensor.clone()) }));
    tf.dispose(optimizer.map((w) => w.tensor).filter((t) => !(t instanceof tf.Variable)));
    this.dropCommitted();
    this.committed = { position: this.position(), weights, optimizer: copies };
  }

  /** Back to the last commit (this rank's): what a broken step may have half-applied is undone. */
  async restore(): Promise<void> {
    const opt = this.model.optimizer;
    if (opt instanceof DistributedOptimizer) opt.reset();
    const c = this.committed;
    if (!c) return;
    this.model.setWeights(c.weights);
    // The optimizer makes variables of what it is given: hand it copies, keep the commit.
    if (opt && c.optimizer.length > 0) {
      const copies = c.optimizer.map((w) => ({ name: w.name, tensor: w.tensor.clone() }));
      await opt.setWeights(copies);
      tf.dispose(copies.map((w) => w.tensor));
    }
    Object.assign(this, c.position);
  }

  /** Every rank takes rank 0's weights, optimizer state and position (at the start and after each regroup). */
  async sync(): Promise<void> {
    const comm = this.ring.comm;
    const timeoutMs = this.o.timeoutMs;
    const p = this.position();
    const mine = comm.rank === 0 ? Int32Array.of(p.epoch, p.batch, p.epochExamples, p.steps) : new Int32Array(4);
    const got = await broadcast(comm, mine, { root: 0, name: 'tfjs/elastic-position', timeoutMs });
    await broadcastVariables(this.model, 0, { comm, timeoutMs });
    if (this.model.optimizer) await broadcastOptimizerState(this.model.optimizer, 0, { comm, timeoutMs });
    // Only now: a sync cut short leaves this rank's position with its own weights.
    [this.epoch, this.batch, this.epochExamples, this.steps] = [got[0], got[1], got[2], got[3]];
  }

  /** Frees the committed copies (after training). */
  dispose(): void {
    this.dropCommitted();
  }

  private position(): Position {
    return { epoch: this.epoch, batch: this.batch, epochExamples: this.epochExamples, steps: this.steps };
  }

  private dropCommitted(): void {
    if (!this.committed) return;
    tf.dispose([...this.committed.weights, ...this.committed.optimizer.map((w) => w.tensor)]);
    this.committed = null;
  }
}

export interface CommitOptions {
  /** Commit after every this many batches (and always after an epoch's last). Default 1. */
  batchesPerCommit?: number;
}

/**
 * Horovod's CommitStateCallback, UpdateBatchStateCallback and
 * UpdateEpochStateCallback in one: after each batch (once the
 * DistributedOptimizer has applied it) the position moves on, and the state
 * is committed. An epoch's last batch ends the epoch in the state at once, so
 * a ring that breaks in the epoch's end callbacks resumes at the next epoch.
 */
export class CommitStateCallback extends Callback {
  private readonly every: number;

  constructor(
    private readonly state: ModelState,
    o: CommitOptions = {},
  ) {
    super();
    this.every = o.batchesPerCommit ?? 1;
    if (!Number.isInteger(this.every) || this.every < 1) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `CommitStateCallback: batchesPerCommit must be a whole number ≥ 1, got ${this.every}`,
      );
    }
  }

  override async onBatchEnd(batch: number, logs?: Logs): Promise<void> {
    const s = this.state;
    const p = this.params as { samples?: number; batchSize?: number; steps?: number };
    const size = typeof logs?.size === 'number' ? logs.size : (p.batchSize ?? 0);
    s.batch++;
    s.steps++;
    s.epochExamples += size * s.ring.comm.size;
    const batchesInEpoch = p.steps ?? (p.samples && p.batchSize ? Math.ceil(p.samples / p.batchSize) : Infinity);
    const last = batch + 1 >= batchesInEpoch;
    if (last) {
      s.epoch++;
      s.batch = 0;
      s.epochExamples = 0;
    }
    if (last || s.steps % this.every === 0) await s.commit();
  }
}

/** Horovod's hvd.elastic.run over this ModelState (elastic-run.ts, the same loop as the native State's). */
export function run<T>(state: ModelState, train: (state: ModelState) => Promise<T>): Promise<T> {
  return runElastic(state, train);
}
