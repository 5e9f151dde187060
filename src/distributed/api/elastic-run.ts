/**
 * Horovod's hvd.elastic.run, once for every framework: the native State
 * (elastic.ts) and ringtrain/tfjs's ModelState both drive their training
 * through it. A state syncs from rank 0, trains, and when the ring breaks
 * (a peer died) or a commit sees a newer membership (a peer joined), it is
 * restored where needed, the ring re-forms, and training is called again.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/interface.ts';
import { ElasticRing } from '../session/elastic-ring.ts';
import { isBroken } from '../session/ring-errors.ts';
import type { JobSettings } from '../../job/settings.ts';
import type { ElasticHooks } from '../train/trainer-types.ts';
import { compareEpochs, epochAfter, formatEpoch, type RingEpoch } from '../session/ring-epoch.ts';

/** What elastic training needs of init()'s Session: the current ring, the membership hooks, the job and its settings. */
export interface ElasticSession {
  readonly comm: Communicator;
  readonly elastic: ElasticHooks;
  readonly job: { readonly id: string };
  /** The job's settings, parsed once by the session (whether the job is elastic at all). */
  readonly settings: Pick<JobSettings, 'membership'>;
}

/** Thrown by a commit that saw a newer membership (a peer joined): the ring re-forms there, with nothing to undo. */
export class MembershipChanged extends Error {
  constructor(readonly epoch: RingEpoch) {
    super(`the job's membership moved on to ${formatEpoch(epoch)}; the ring re-forms at this commit`);
  }
}

/** What elastic.run asks of a framework's state. */
export interface ElasticRunState {
  readonly session: Pick<ElasticSession, 'elastic'>;
  /** Every rank takes rank 0's weights, optimizer state and position. */
  sync(): Promise<void>;
  /** After a regroup, once synced: the user's reset callbacks. */
  reset(): Promise<void>;
  /** Back to the last commit (a broken step may have half-applied). */
  restore(): void | Promise<void>;
  /** Re-forms the ring at membership epoch `minEpoch` or later, and moves what trains onto it. */
  regroup(minEpoch: RingEpoch): Promise<void>;
}

/**
 * What every framework's elastic state shares: the ring it trains on (an
 * ElasticRing over the session), commit = save + ask the ring for a newer
 * membership, regroup, and the reset callbacks. A framework says how to save,
 * restore and sync its model, and what moves onto a re-formed ring.
 */
export abstract class ElasticState implements ElasticRunState {
  /** How many times the ring re-formed under this state. */
  regroups = 0;
  /** The ring this state trains on, and how it re-forms: the native trainer's ElasticRing. */
  readonly ring: ElasticRing;
  private readonly resetCallbacks: (() => void | Promise<void>)[] = [];

  /** `agreementName`: the membership agreement's collective, the same on every rank of a job. */
  constructor(
    readonly session: ElasticSession,
    o: { timeoutMs?: number; agreementName: string },
  ) {
    if (!session.settings.membership.elastic) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `elastic: job ${session.job.id} is not elastic, so a lost peer would stop it for good; start it with ringtrain launch --elastic (or set the job's elastic setting)`,
      );
    }
    this.ring = new ElasticRing(session.comm, session.elastic, {
      bus: session.comm.events,
      timeoutMs: o.timeoutMs,
      agreementName: o.agreementName,
    });
  }

  abstract save(): Promise<void>;
  abstract restore(): void | Promise<void>;
  abstract sync(): Promise<void>;

  /** After the ring re-formed, before the sync: moves what trains onto `this.ring`. */
  protected reformed(): void {}

  /** Runs after every regroup, once the state is rank 0's (Horovod's register_reset_callbacks): e.g. scale the learning rate to the new size. */
  registerResetCallback(fn: () => void | Promise<void>): void {
    this.resetCallbacks.push(fn);
  }

  /** Keeps a copy of the weights, the optimizer state and the position, then re-forms the ring here if a peer has joined. */
  async commit(): Promise<void> {
    await this.save();
    await this.checkHostUpdates();
  }

  /** Asks the ring for the newest membership any rank has heard of; a newer one than the ring's re-forms it here. */
  async checkHostUpdates(): Promise<void> {
    const agreed = await this.ring.agreedEpoch();
    if (compareEpochs(agreed, this.session.elastic.currentEpoch()) > 0) throw new MembershipChanged(agreed);
  }

  async regroup(minEpoch: RingEpoch): Promise<void> {
    await this.ring.regroup(minEpoch);
    this.reformed();
  }

  async reset(): Promise<void> {
    this.regroups++;
    for (const fn of this.resetCallbacks) await fn();
  }
}

/**
 * Syncs `state` from rank 0, then calls `train`; when the ring breaks or a
 * peer joins, re-forms it, takes rank 0's committed state, runs the reset
 * callbacks and calls `train` again, until it returns. Errors other than a
 * broken ring (a bad argument, a diverged loss) are thrown as they are.
 */
export async function runElastic<S extends ElasticRunState, T>(state: S, train: (state: S) => Promise<T>): Promise<T> {
  const { elastic } = state.session;
  let regrouped = false;
  for (;;) {
    let minEpoch: RingEpoch;
    try {
      await state.sync();
      // The reset callbacks run once the state is rank 0's: they see the new size and the position.
      if (regrouped) await state.reset();
      regrouped = false;
      return await train(state);
    } catch (err) {
      if (err instanceof MembershipChanged) minEpoch = err.epoch;
      else if (isBroken(err)) {
        await state.restore();
        minEpoch = epochAfter(elastic.currentEpoch());
      } else throw err;
    }
    await state.regroup(minEpoch);
    regrouped = true;
  }
}
