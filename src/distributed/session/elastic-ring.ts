/**
 * The ring a rank trains on, and how it re-forms: the part of Horovod's
 * `hvd.elastic.State` that is about membership, shared by the native trainer
 * (ring-peers.ts) and ringtrain/tfjs's elastic state (src/tfjs/elastic.ts),
 * as Horovod's serves every framework.
 *
 * It holds the communicator, the one place a trainer and its optimizer read
 * it from (CurrentRing), so a re-formed ring is seen by both at once. When a
 * collective fails because the ring broke (a peer left, a rank stalled), or
 * when the ranks agree that a newer membership exists (a peer joined), it asks
 * the membership hooks for the next ring and then runs the callbacks
 * registered with `onReformed`, in order: the trainer's optimizer drops what
 * belonged to the old ring, and every rank takes the root's state. A ring that
 * is not elastic never re-forms: the error that broke it is thrown as it is.
 */
import type { Communicator } from '../../comm/interface.ts';
import { allreduce } from '../../collectives/allreduce.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now, type EventBus } from '../../core/events.ts';
import { isBroken, lostRanksOf } from './ring-errors.ts';
import type { GradientCheck } from '../reduce/gradient-check.ts';
import type { ElasticHooks } from '../train/trainer-types.ts';
import { compareEpochs, epochAfter, epochFromAgreement, epochToAgreement, type RingEpoch } from './ring-epoch.ts';

/** Whatever holds the ring's communicator now; an elastic ring replaces it when it re-forms. */
export interface CurrentRing {
  readonly comm: Communicator;
}

/**
 * Which holder each communicator came from (a session records every ring it forms). Code given
 * `session.comm` rather than the session then still follows the ring when it re-forms: holding the
 * communicator alone, an optimizer would reduce over a ring that is gone (issue 35).
 */
const holders = new WeakMap<Communicator, CurrentRing>();

/** Records that `comm` is `holder`'s current ring, so that currentRing(comm) follows the holder. */
export function recordRingHolder(comm: Communicator, holder: CurrentRing): void {
  holders.set(comm, holder);
}

/** A communicator as a CurrentRing: its holder when it came from one (a session), else fixed; a holder as it is. */
export function currentRing(ring: Communicator | CurrentRing): CurrentRing {
  if (typeof (ring as Communicator).send !== 'function') return ring as CurrentRing;
  return holders.get(ring as Communicator) ?? { comm: ring as Communicator };
}

export interface ElasticRingOptions {
  /** Where `peer-lost` is told (the trainer's bus, which may be the first communicator's). */
  bus: EventBus;
  /** A rank silent this long fails the membership agreement (ms). */
  timeoutMs?: number;
  /** The name of the collective that agrees on the membership (every rank of a job uses the same). */
  agreementName?: string;
}

export class ElasticRing implements CurrentRing {
  private current: Communicator;
  /** A membership agreement started beside a step's gradient allreduce, with the ring it runs on. */
  private pending?: { comm: Communicator; answer: Promise<{ epoch: RingEpoch } | { error: unknown }> };
  private readonly reformedCallbacks: ((comm: Communicator) => void | Promise<void>)[] = [];

  /** `hooks`: the session's membership; absent, the ring is fixed. */
  constructor(
    comm: Communicator,
    private readonly hooks: ElasticHooks | undefined,
    private readonly o: ElasticRingOptions,
  ) {
    this.current = comm;
  }

  get comm(): Communicator {
    return this.current;
  }

  get elastic(): boolean {
    return this.hooks !== undefined;
  }

  /** Runs after every re-form, in the order registered (Horovod's reset callbacks). */
  onReformed(fn: (comm: Communicator) => void | Promise<void>): void {
    this.reformedCallbacks.push(fn);
  }

  /**
   * Runs `fn`; when the ring breaks under elastic training, re-forms it and answers false instead
   * of throwing. The failed collective applied nothing, so there is nothing to undo here.
   */
  async guarded(fn: () => Promise<void>): Promise<boolean> {
    try {
      await fn();
      return true;
    } catch (err) {
      if (!this.hooks || !isBroken(err)) throw err;
      this.o.bus.emit({
        type: 'peer-lost',
        t: now(),
        rank: this.current.rank,
        peer: lostRanksOf(err)[0] ?? -1,
        reason: err.message,
      });
      // Wait for the server's next membership and carry on without the lost peer.
      await this.regroup(epochAfter(this.hooks.currentEpoch()));
      return false;
    }
  }

  /**
   * The newest membership epoch any rank has heard of (one tiny allreduce on the current ring):
   * every rank gets the same answer, so all of them re-form at the same point or none does.
   */
  async agreedEpoch(): Promise<RingEpoch> {
    const r = await allreduce(this.current, new Int32Array([epochToAgreement(this.membership().latestEpoch())]), {
      op: 'max',
      name: this.o.agreementName ?? 'membership-epoch',
      timeoutMs: this.o.timeoutMs,
    });
    return epochFromAgreement(r[0]);
  }

  /**
   * The membership agreement as a check beside the gradient allreduce (an elastic ring's; a fixed
   * ring has none): its one-number allreduce starts with the step's collectives, and the next
   * membershipChanged reads its answer, so a steady elastic step waits for one collective fewer.
   * Every rank starts it at the same point of the same step, so every rank reads the same answer;
   * a rank that hears of a newer membership after it started is counted at the next step's.
   */
  get agreementCheck(): GradientCheck | undefined {
    if (!this.hooks) return undefined;
    return {
      // It only starts the agreement beside the sum: it reads no gradient.
      readsOnly: true,
      before: () => this.startAgreement(),
      digest: () => ({ add() {}, finish: () => this.startAgreement() }),
    };
  }

  private startAgreement(): void {
    const answer = this.agreedEpoch().then(
      (epoch) => ({ epoch }),
      (error: unknown) => ({ error }),
    );
    this.pending = { comm: this.current, answer };
  }

  /**
   * Between steps: re-forms the ring when any rank has heard of a newer membership; true when the
   * ring changed. Reads the agreement the step started beside its allreduce (agreementCheck), or,
   * when none ran on this ring (a pass that reduced nothing, a ring re-formed since), agrees now.
   */
  async membershipChanged(): Promise<boolean> {
    const hooks = this.hooks;
    if (!hooks) return false;
    const pending = this.pending?.comm === this.current ? this.pending : undefined;
    this.pending = undefined;
    let agreed = hooks.currentEpoch();
    const agree = async () => {
      if (!pending) return void (agreed = await this.agreedEpoch());
      const answer = await pending.answer;
      if ('error' in answer) throw answer.error;
      agreed = answer.epoch;
    };
    if (!(await this.guarded(agree))) return true;
    if (compareEpochs(agreed, hooks.currentEpoch()) <= 0) return false;
    await this.regroup(agreed);
    return true;
  }

  /** Closes the current ring, builds the one of the newest membership with epoch >= minEpoch, and runs the re-form callbacks. */
  async regroup(minEpoch: RingEpoch): Promise<void> {
    this.current = await this.membership().regroup(minEpoch);
    for (const fn of this.reformedCallbacks) await fn(this.current);
  }

  private membership(): ElasticHooks {
    if (!this.hooks)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        "this ring has no membership hooks, so it cannot re-form; build the ElasticRing with the session's elastic hooks (session.elastic)",
      );
    return this.hooks;
  }
}
