/**
 * Elastic training for a loop of your own on ringtrain's models: Horovod's
 * `hvd.elastic` (State, commit, restore, run), over the elastic sessions
 * init() gives (a job launched with `launch --elastic`, or any job whose
 * settings say `elastic: true`). The TF.js flavour is src/tfjs/elastic.ts.
 *
 *   const state = new elastic.State(session, model, dopt);
 *   await elastic.run(state, async (s) => {
 *     while (s.steps < steps) {
 *       … forwardBackward on this rank's slice of the next s.comm.size × batch examples …
 *       await s.optimizer.step();
 *       s.steps++;
 *       await s.commit();
 *     }
 *   });
 *
 * How a regroup goes. Each commit keeps a copy of the weights, the
 * optimizer's state and the position (epoch, batch, steps, examples) on
 * every rank, then asks the ring whether anyone has heard of a newer
 * membership (a joiner). When a peer dies, the next collective fails with a
 * broken-ring error: every survivor goes back to its last commit, the session
 * re-forms the ring for the job's next membership, the DistributedOptimizer
 * moves onto the new ring, everyone takes the new rank 0's committed state
 * (broadcast), the reset callbacks run, and `run` calls the training function
 * again, which carries on from the position. Ranks may have committed one
 * step apart when the ring broke; the broadcast from rank 0 makes them one.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/communicator.ts';
import { allreduce } from '../collectives/allreduce.ts';
import { broadcast } from '../collectives/broadcast.ts';
import type { Model } from '../engine/model.ts';
import { broadcastOptimizerState, broadcastParameters } from './broadcast-state.ts';
import type { DistributedOptimizer } from './optimizer.ts';
import { MembershipChanged, runElastic, type ElasticRunState, type ElasticSession } from './elastic-run.ts';
export type { ElasticSession } from './elastic-run.ts';
import { parseJobSettings } from './settings.ts';

/** Where training is, the same on every rank after a sync. */
export interface Position {
  /** Epochs completed. */
  epoch: number;
  /** Batches completed in the current epoch. */
  batch: number;
  /** Steps completed in the whole run. */
  steps: number;
  /** Examples the whole ring took in the current epoch (the next step starts after them, whatever the ring's size now). */
  examples: number;
}

interface Snapshot {
  position: Position;
  params: Float32Array;
  optimizer: Record<string, Float32Array>;
}

/**
 * Horovod's TorchState for a ringtrain model: its weights, its optimizer's
 * state and the position, committed in memory on every rank and restored
 * when the ring breaks.
 */
export class State implements Position, ElasticRunState {
  epoch = 0;
  batch = 0;
  steps = 0;
  examples = 0;
  /** How many times the ring re-formed under this state. */
  regroups = 0;
  private committed: Snapshot | null = null;
  private readonly resetCallbacks: (() => void | Promise<void>)[] = [];

  constructor(
    readonly session: ElasticSession,
    readonly model: Model,
    readonly optimizer: DistributedOptimizer,
    private readonly o: { timeoutMs?: number } = {},
  ) {
    if (parseJobSettings(session.job.config.hyperparameters).elastic !== true) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `elastic: job ${session.job.id} is not elastic, so a lost peer would stop it for good; start it with ringtrain launch --elastic (or set the job's elastic setting)`);
    }
  }

  /** The current ring (a new one after every regroup). */
  get comm(): Communicator {
    return this.session.comm;
  }

  /** Runs after every regroup, once the state is rank 0's (Horovod's register_reset_callbacks): e.g. scale the learning rate to the new size. */
  registerResetCallback(fn: () => void | Promise<void>): void {
    this.resetCallbacks.push(fn);
  }

  /** Keeps a copy of the weights, the optimizer state and the position, then re-forms the ring here if a peer has joined. */
  async commit(): Promise<void> {
    await this.save();
    await this.checkHostUpdates();
  }

  /** Keeps a copy of the weights, the optimizer state and the position (in memory, on this rank). */
  async save(): Promise<void> {
    this.committed = { position: this.position(), params: await this.model.readParams(), optimizer: await this.optimizer.optimizer.exportState() };
  }

  /** Back to the last commit (this rank's): what a broken step may have half-applied is undone. */
  restore(): void {
    this.optimizer.resetAccumulation();
    const c = this.committed;
    if (!c) return;
    this.model.writeParams(c.params);
    this.optimizer.optimizer.importState(c.optimizer);
    Object.assign(this, c.position);
  }

  /** Every rank takes rank 0's weights, optimizer state and position (at the start and after each regroup). */
  async sync(): Promise<void> {
    const comm = this.comm;
    const timeoutMs = this.o.timeoutMs;
    const p = this.position();
    const mine = comm.rank === 0 ? Int32Array.of(p.epoch, p.batch, p.steps, p.examples) : new Int32Array(4);
    const got = await broadcast(comm, mine, { root: 0, name: 'elastic/position', timeoutMs });
    await broadcastParameters(comm, this.model, { timeoutMs });
    await broadcastOptimizerState(comm, this.optimizer.optimizer, { timeoutMs });
    // Only now: a sync cut short leaves this rank's position with its own weights.
    [this.epoch, this.batch, this.steps, this.examples] = [got[0], got[1], got[2], got[3]];
  }

  /** Asks the ring for the newest membership any rank has heard of; a newer one than the ring's re-forms it here. */
  async checkHostUpdates(): Promise<void> {
    const { elastic } = this.session;
    const r = await allreduce(this.comm, Int32Array.of(elastic.latestEpoch()), { op: 'max', name: 'elastic/membership', timeoutMs: this.o.timeoutMs });
    if (r[0] > elastic.currentEpoch()) throw new MembershipChanged(r[0]);
  }

  /** Re-forms the ring at `minEpoch` or later; the optimizer must read its ring from the session to follow. */
  async regroup(minEpoch: number): Promise<void> {
    const comm = await this.session.elastic.regroup(minEpoch);
    if (this.optimizer.comm !== comm) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'elastic.run: the DistributedOptimizer still reduces over the old ring; build it over the session (new DistributedOptimizer(session, model, optimizer)), not over session.comm, so it follows the ring as it re-forms',
      );
    }
    this.optimizer.ringReformed();
    this.optimizer.resetAccumulation();
  }

  /** After a regroup: the reset callbacks. */
  async reset(): Promise<void> {
    this.regroups++;
    for (const fn of this.resetCallbacks) await fn();
  }

  private position(): Position {
    return { epoch: this.epoch, batch: this.batch, steps: this.steps, examples: this.examples };
  }
}

/** Horovod's hvd.elastic.run over this State (elastic-run.ts): the DistributedOptimizer, built over the session, follows the re-formed ring. */
export function run<T>(state: State, train: (state: State) => Promise<T>): Promise<T> {
  return runElastic(state, train);
}
