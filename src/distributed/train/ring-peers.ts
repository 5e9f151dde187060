/**
 * A ring's part in the training loop (training-loop.ts): each step's
 * gradients are read back, checked, summed over the ring weighed by each
 * rank's share of the global batch, and applied; the step's loss rides along
 * with that read. The ring, and how it re-forms, is an ElasticRing: after each
 * re-form every rank takes the root's position, weights and optimizer state,
 * and the loop carries on. Shares follow each rank's speed when asked
 * (shares.ts); evaluations average every rank's part of the test set.
 */
import { ErrorCode, isRingtrainError, RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/interface.ts';
import { now, type EventBus } from '../../core/events.ts';
import { broadcast } from '../../collectives/broadcast.ts';
import { countedTargets, type Dataset } from '../../data/dataset.ts';
import { testShard } from '../../data/global-batch.ts';
import type { Model } from '../../engine/model.ts';
import { averageMetrics, broadcastOptimizerState, broadcastParameters } from '../api/broadcast-state.ts';
import { synchronizeReplicas, type LocalSgdOptimizer } from './diloco.ts';
import type { ElasticRing } from '../session/elastic-ring.ts';
import type { DistributedOptimizer, StepResult } from '../api/optimizer.ts';
import { ShareBalancer } from './shares.ts';
import { RoundCounter, type Rounds } from '../observe/timeline.ts';
import { endsRun } from '../session/ring-errors.ts';
import type { StepClock } from './step-clock.ts';
import { DEFAULT_STATE_CHECK_EVERY, hex, readStateDigest, StateAgreement } from '../robust/state-agreement.ts';
import { guardOf } from './train-config.ts';
import { precisionsDiffer, RingOverflow, startCollectiveName } from './mixed-precision.ts';
import type { LoopHandle, Peers, RunRecord, StepScaling, StepUpdate } from './training-loop.ts';
import type { DistributedTrainArgs, DistributedTrainConfig } from './trainer-types.ts';

/** What a ring trains with; trainer.ts builds them and destroys them after. */
export interface RingParts {
  ring: ElasticRing;
  model: Model;
  ringOpt: DistributedOptimizer | LocalSgdOptimizer;
  clock: StepClock;
}

export class RingPeers implements Peers {
  readonly readEvery = 1;
  private readonly config: DistributedTrainConfig;
  private readonly rounds = new RoundCounter();
  private readonly countedBuses = new Set<EventBus>();
  private readonly balancer: ShareBalancer;
  /** This rank's part of the test set (rebuilt whenever the ring re-forms). */
  private shard!: Dataset;
  private loop: LoopHandle | undefined;
  /** The state checks (state-agreement.ts): every `stateCheckEvery` steps and at the end; none for local SGD, whose replicas differ between rounds. */
  private readonly agreement: StateAgreement | undefined;
  private readonly stateCheckEvery: number;
  /** f16-mixed: whether the step overflowed on any rank, agreed at its last pass. */
  private readonly overflow: RingOverflow;

  constructor(
    private readonly args: Pick<DistributedTrainArgs, 'config' | 'test' | 'misbehaviour'>,
    private readonly parts: RingParts,
  ) {
    this.config = args.config;
    this.balancer = new ShareBalancer(this.config.balance ?? 'equal');
    this.countRoundsOn(parts.ring.comm);
    this.stateCheckEvery =
      this.config.syncEvery === undefined ? (this.config.stateCheckEvery ?? DEFAULT_STATE_CHECK_EVERY) : 0;
    const stateParts = {
      model: parts.model,
      optimizer: parts.ringOpt.optimizer,
      timeoutMs: this.config.timeoutMs,
      misbehaviour: args.misbehaviour,
    };
    this.agreement = this.stateCheckEvery > 0 ? new StateAgreement(stateParts) : undefined;
    this.overflow = new RingOverflow(parts.model, this.config.mixPrecisions === true);
    parts.ring.onReformed(async () => {
      parts.ringOpt.ringReformed();
      parts.ringOpt.resetAccumulation();
      this.overflow.reset();
      await this.syncFromRoot();
    });
  }

  get comm(): Communicator {
    return this.parts.ring.comm;
  }

  get rank(): number {
    return this.comm.rank;
  }

  get size(): number {
    return this.comm.size;
  }

  get name(): string {
    return `rank ${this.comm.rank}`;
  }

  get bytesSent(): number {
    return this.comm.stats.bytesSent;
  }

  /** f16-mixed: the steps skipped for an overflow so far, and the loss scale now (undefined in f32). */
  get mixedPrecision(): { skippedSteps: number; lossScale: number } | undefined {
    const scaler = this.parts.model.lossScaler;
    return scaler ? { skippedSteps: scaler.skipped, lossScale: scaler.scale } : undefined;
  }

  get shares(): readonly number[] {
    return this.balancer.shares;
  }

  /** Collectives and negotiations per step, over every step but the first. */
  roundsPerStep(): Rounds | null {
    return this.rounds.perStep();
  }

  /** Replicas start identical: the root's position (a resumed one), weights and optimizer state everywhere. */
  async start(loop: LoopHandle): Promise<void> {
    this.loop = loop;
    await this.syncFromRoot();
  }

  /** Every rank takes the root's position, weights and optimizer state (start, resume, and after the ring re-forms). */
  private async syncFromRoot(): Promise<void> {
    const { comm } = this;
    const loop = this.loop!;
    const timeoutMs = this.config.timeoutMs;
    // Named by this rank's precision where the job lets no peer mix them: ranks that differ fail here, told why.
    const position = await broadcast(comm, comm.rank === 0 ? loop.state.position() : new Int32Array(3), {
      root: 0,
      name: startCollectiveName('training-position', this.config),
      timeoutMs,
    }).catch((err: unknown) => {
      throw precisionsDiffer(err) ?? err;
    });
    await broadcastParameters(comm, this.parts.model, { timeoutMs });
    await broadcastOptimizerState(comm, this.parts.ringOpt.optimizer, { timeoutMs });
    // Only now: a sync cut short leaves this rank's position with its own weights.
    loop.state.takePosition(position);
    // What depends on the ring's size: the loop's global batch and epoch, the shares, this rank's test shard.
    this.balancer.reset(loop.fit(), comm.size);
    this.shard = testShard(this.args.test, comm.rank, comm.size);
  }

  guarded(work: () => Promise<void>): Promise<boolean> {
    return this.parts.ring.guarded(work);
  }

  async membershipChanged(): Promise<void> {
    await this.parts.ring.membershipChanged();
  }

  /** Bytes per gradient bucket, as the ring's reducer decided them once (undefined: read whole; local SGD reduces no gradients). */
  bucketBytes(): number | undefined {
    const { ringOpt } = this.parts;
    return 'reducer' in ringOpt ? ringOpt.reducer.bucketBytes : undefined;
  }

  /** The reducer's buffer, which the buckets are reduced in: read back straight into it. */
  bucketTarget(): Float32Array | undefined {
    const { ringOpt } = this.parts;
    return 'reducer' in ringOpt ? ringOpt.reducer.bucketTarget : undefined;
  }

  /** The ring's step: this rank's gradients read back, weighed by its share, checked, summed, applied. */
  async apply(s: StepUpdate): Promise<StepResult & { scaling?: StepScaling }> {
    const { config, comm } = this;
    const { ringOpt, clock } = this.parts;
    clock.begin(s.computeStart);
    // f16-mixed: a step that overflowed on any rank, in any of its passes, is skipped by all of them before
    // anything is reduced, and the passes it summed are dropped.
    const lastPass = 'reducer' in ringOpt ? ringOpt.reducer.nextPassEndsStep : true;
    const scaling = await this.overflow.agree(comm, lastPass, config.timeoutMs);
    if (scaling?.skipped) {
      ringOpt.resetAccumulation();
      clock.end();
      return { applied: false, bytesSent: 0, scaling };
    }
    // Weighed by this rank's share of the step's counted targets (exactly 1 when shares are equal).
    const weight =
      s.batch.ringTargets > 0
        ? (comm.size * s.targets) / s.batch.ringTargets
        : (comm.size * s.batch.size) / s.globalBatch;
    const r = await ringOpt.step(s.lr, weight, s.step, s.buckets).catch((err: unknown) => {
      const guard = guardOf(config);
      throw guard !== false ? suspectPeersFirst(err, config.verify === true, guard.doubt !== false) : err;
    });
    // Where GPU waits hold the thread (Deno), the update goes to the queue in parts now, the loop turning
    // between them; left for the next step's first write, it went whole (GPT-2 124M at load 35: 14 s silent).
    if (r.applied) await this.submitUpdate();
    // A pass summed locally (backwardPassesPerStep > 1) reduced nothing: all of it was compute.
    if (!r.applied) clock.end();
    return scaling ? { ...r, scaling } : r;
  }

  /**
   * The update to the GPU's queue. Where that waits for it (Deno's parts) the wait is the update's
   * compute, not the ring's: a `gpu-wait` of its own, which the exposed allreduce leaves out.
   */
  private async submitUpdate(): Promise<void> {
    const t = now();
    await this.parts.model.gpu.submitRecorded();
    const { events, rank } = this.comm;
    if (events.active) events.emit({ type: 'gpu-wait', t, rank, what: 'update', ms: now() - t });
  }

  /** The next step's shares (speed: one tiny allgather; counted in the step's time, it is part of its cost), and the step's rounds. */
  async afterStep(examples: number): Promise<void> {
    this.balancer.observe(examples, this.parts.clock.computeMs);
    await this.balancer.rebalance(this.comm, this.config.timeoutMs);
    this.countRoundsOn(this.comm);
    this.rounds.step();
  }

  /**
   * Between steps: the state check whose digests' gather rode beside this step's allreduce is acted on
   * (a minority resynced from the majority's state now); every `stateCheckEvery` steps the state is
   * read and hashed for the next step's allreduce to take the gather along (stateDigestRide); at the
   * end of training the check runs on its own, unless one just judged this step's state
   * (state-agreement.ts).
   */
  async checkState(step: number, end: boolean): Promise<void> {
    const { agreement, comm } = this;
    if (!agreement) return;
    await agreement.judgeRide(comm);
    if (end) {
      if (agreement.agreed?.step !== step) await agreement.check(comm, step);
    } else if (step % this.stateCheckEvery === 0) await agreement.prepare(comm, step);
  }

  /** The digest of this rank's state at `step` (hex): the one the ring agreed on there, else this rank's own. */
  async stateHash(step: number): Promise<string> {
    const agreed = this.agreement?.agreed;
    if (agreed?.step === step) return agreed.hash;
    const { model, ringOpt } = this.parts;
    return hex(await readStateDigest(model, ringOpt.optimizer));
  }

  /** Collectives emit on their communicator's bus, which a re-formed ring replaces: the counter follows. */
  private countRoundsOn(comm: Communicator): void {
    if (this.countedBuses.has(comm.events)) return;
    this.countedBuses.add(comm.events);
    comm.events.on((e) => void (e.rank === this.comm.rank && this.rounds.record(e)));
  }

  /** Local SGD: replicas differ mid-round; end the round so every rank evaluates (and saves) the same weights. */
  async settle(): Promise<void> {
    this.loop!.state.allreduceBytes += (await synchronizeReplicas(this.parts.ringOpt)).bytesSent;
  }

  /**
   * Every rank's part, averaged. A rank whose own part fails still joins the average, with NaN,
   * so that no rank waits for it: it then reports its own error, and the others one that says a
   * peer's evaluation failed (an accuracy is NaN only so: a real one is a finite fraction).
   */
  async evaluate(): Promise<{ accuracy: number; loss: number }> {
    const { shard } = this;
    await this.settle();
    let local: { accuracy: number; loss: number };
    let failure: unknown;
    try {
      local = await this.parts.model.evaluate(shard.inputs, shard.labels);
    } catch (err) {
      if (endsRun(err)) throw err;
      failure = err;
      local = { accuracy: NaN, loss: NaN };
    }
    // Weighed by counted targets (examples for a classifier, characters for the words): the ring's mean is the whole
    // set's. An evaluation is no step: its average is not counted in the steps' rounds.
    this.rounds.setAside = true;
    const avg = await averageMetrics(
      this.comm,
      { accuracy: local.accuracy, loss: local.loss },
      countedTargets(shard.labels),
      this.config.timeoutMs,
    ).finally(() => (this.rounds.setAside = false));
    if (failure !== undefined) throw failure;
    if (Number.isNaN(avg.accuracy)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `rank ${this.rank}: another rank's evaluation failed (its own result says why), so the ring has no metrics for this evaluation; training goes on`,
        { rank: this.rank, peerEvaluationFailed: true },
      );
    }
    return { accuracy: avg.accuracy, loss: avg.loss };
  }
}

/**
 * What a ring's checkpoints record: its position (epoch and the examples the ring took in it,
 * which survive a change of ring size) and how it trained (global batch, size).
 */
export function ringRecord(
  config: DistributedTrainConfig,
  model: Model,
  ring: ElasticRing,
  trainedOn: Record<string, string>,
): RunRecord {
  return {
    // A ring hands out its weights even with nothing left to train: a page shows predictions with them.
    handsOutUntrained: true,
    resume: (state, c) => state.resumeFrom(c),
    describe: (state, globalBatch) => ({
      epoch: state.epoch,
      extra: {
        seed: String(config.seed),
        batch: String(config.batch),
        global_batch: String(globalBatch),
        lr: String(config.lr),
        size: String(ring.comm.size),
        epoch_examples: String(state.epochExamples),
        model_spec: JSON.stringify(model.spec),
        ...trainedOn,
      },
    }),
  };
}

/**
 * A non-finite average after every rank's published norm passed the norm rule (finite, within
 * its ratio): either the sum overflowed, or a peer sent other numbers than it published. Say so
 * instead of blaming the learning rate alone; with verify on, such a peer is named before this.
 */
function suspectPeersFirst(err: unknown, verify: boolean, doubt: boolean): unknown {
  if (!isRingtrainError(err) || err.detail?.diverged !== true || err.detail?.tensor === undefined) return err;
  const head = err.message.replace(/: a rank diverged; lower the learning rate$/, '');
  // A peer that sends its gradient flipped and ×20, and publishes it so, passes both the norm rule
  // and verify, and diverges a job in a few steps: only the doubt rule leaves it out and names it.
  const flip = doubt
    ? ''
    : "; a peer may also have sent large gradients against the others', which the doubt rule (--doubt-rule) leaves out and names";
  const hint = verify
    ? `every rank published a finite gradient and the verified allreduce found no one changing it${flip}; if none did, the sum itself overflowed: lower the learning rate`
    : `every rank published a finite gradient before the sum, so a peer may have sent other numbers than it published: run the job with verify (--verify) to name it${flip}; if none did, the sum overflowed: lower the learning rate`;
  return new RingtrainError(err.code, `${head}: ${hint}`, err.detail);
}
