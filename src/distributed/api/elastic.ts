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
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/communicator.ts';
import { broadcast } from '../../collectives/broadcast.ts';
import type { Model } from '../../engine/model.ts';
import { broadcastOptimizerState, broadcastParameters } from './broadcast-state.ts';
import type { DistributedOptimizer } from './optimizer.ts';
import { ElasticState, runElastic, type ElasticSession } from './elastic-run.ts';
export type { ElasticSession } from './elastic-run.ts';

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
export class State extends ElasticState implements Position {
  epoch = 0;
  batch = 0;
  steps = 0;
  examples = 0;
  private committed: Snapshot | null = null;

  constructor(
    session: ElasticSession,
    readonly model: Model,
    readonly optimizer: DistributedOptimizer,
    private readonly o: { timeoutMs?: number } = {},
  ) {
    super(session, { timeoutMs: o.timeoutMs, agreementName: 'elastic/membership' });
  }

  /** The current ring (a new one after every regroup; the session's own). */
  get comm(): Communicator {
    return this.ring.comm;
  }

  /** Keeps a copy of the weights, the optimizer state and the position (in memory, on this rank). */
  async save(): Promise<void> {
    this.committed = {
      position: this.position(),
      params: await this.model.readParams(),
      optimizer: await this.optimizer.optimizer.exportState(),
    };
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

  /** The optimizer must read its ring from the session (given the session or a ring the session formed) to follow the re-formed one. */
  protected override reformed(): void {
    if (this.optimizer.comm !== this.ring.comm) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'elastic.run: the DistributedOptimizer still reduces over the old ring, a communicator this session did not form; build it over the session (new DistributedOptimizer(session, model, optimizer)) so it follows the ring as it re-forms',
      );
    }
    this.optimizer.ringReformed();
    this.optimizer.resetAccumulation();
  }

  private position(): Position {
    return { epoch: this.epoch, batch: this.batch, steps: this.steps, examples: this.examples };
  }
}

/** Horovod's hvd.elastic.run over this State (elastic-run.ts): the DistributedOptimizer, built over the session, follows the re-formed ring. */
export function run<T>(state: State, train: (state: State) => Promise<T>): Promise<T> {
  return runElastic(state, train);
}
