/**
 * Local SGD / DiLoCo for slow links: every rank takes `syncEvery` (H) steps
 * with its own inner optimizer on its own data, sending nothing; then the ring
 * averages how far each rank moved from the shared starting point (the outer
 * gradient, anchor − params) and an outer SGD with Nesterov momentum moves
 * the anchor by it. Every rank ends the round with the same new anchor as its
 * weights. Traffic is one parameter-sized allreduce per H steps instead of
 * one gradient-sized allreduce per step (and int8 quarters that again, with
 * error feedback so that no part of any delta is lost).
 *
 * With H = 1, outer lr 1, no outer momentum and inner SGD without momentum,
 * a round is exactly one synchronous SGD step: anchor − mean(lr·g_r).
 *
 * The outer state (anchor, momentum, inner steps taken this round) travels
 * with the inner optimizer's state as `outer.*` keys of one Optimizer, so the
 * trainer's broadcast (a joiner gets it), checkpoint and resume carry it
 * without knowing about it.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/interface.ts';
import { allreduceInPlace } from '../../collectives/allreduce.ts';
import { DEFAULT_FUSION_THRESHOLD_BYTES } from '../../collectives/fusion.ts';
import type { Compression } from '../../collectives/codecs/types.ts';
import type { Model } from '../../engine/model.ts';
import type { Optimizer } from '../../engine/optimizer.ts';
import { DistributedOptimizer, type DistributedOptimizerOptions, type StepResult } from '../api/optimizer.ts';
import { currentRing, type CurrentRing } from '../session/elastic-ring.ts';
import type { LocalSgdConfig } from './config-types.ts';

export const DEFAULT_OUTER_LR = 0.7;
export const DEFAULT_OUTER_MOMENTUM = 0.9;
const ANCHOR = 'outer.anchor';
const MOMENTUM = 'outer.momentum';
const INNER_STEPS = 'outer.inner_steps';

export interface LocalSgdOptions {
  syncEvery: number;
  outerLr?: number;
  outerMomentum?: number;
  /** What the ring sends for the delta: 'int8' adds error feedback. */
  compression?: Compression;
  fusionThresholdBytes?: number;
  timeoutMs?: number;
}

/** Checks the settings; throws InvalidArgument naming the bad one. */
export function localSgdSettings(
  o: LocalSgdOptions,
): Required<Omit<LocalSgdOptions, 'timeoutMs'>> & { timeoutMs: number | undefined } {
  const s = {
    syncEvery: o.syncEvery,
    outerLr: o.outerLr ?? DEFAULT_OUTER_LR,
    outerMomentum: o.outerMomentum ?? DEFAULT_OUTER_MOMENTUM,
    compression: o.compression ?? 'none',
    fusionThresholdBytes: o.fusionThresholdBytes ?? DEFAULT_FUSION_THRESHOLD_BYTES,
    timeoutMs: o.timeoutMs,
  };
  if (!Number.isInteger(s.syncEvery) || s.syncEvery < 1)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `syncEvery (--sync-every) must be a whole number of steps >= 1, got ${o.syncEvery}`,
    );
  if (!(s.outerLr > 0) || !Number.isFinite(s.outerLr))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `outerLr (--outer-lr) must be a finite number > 0, got ${o.outerLr}`,
    );
  if (!(s.outerMomentum >= 0 && s.outerMomentum < 1))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `outerMomentum (--outer-momentum) must be in [0, 1), got ${o.outerMomentum}`,
    );
  return s;
}

/**
 * The ring side of local SGD: the same surface as DistributedOptimizer
 * (step, ringReformed, resetAccumulation) plus `synchronize()`, which the
 * trainer calls before it evaluates or saves so that replicas agree then.
 */
export class LocalSgdOptimizer {
  readonly settings: ReturnType<typeof localSgdSettings>;
  /** The inner optimizer with the outer state added to its exported state. */
  readonly optimizer: Optimizer;
  private anchor: Float32Array | null = null;
  private momentum: Float32Array;
  private delta: Float32Array;
  private residual: Float32Array | null = null;
  private innerSteps = 0;
  /** The ring: a communicator of its own, or a holder that an elastic trainer re-forms (elastic-ring.ts). */
  private readonly ring: CurrentRing;

  constructor(
    ring: Communicator | CurrentRing,
    readonly model: Model,
    readonly inner: Optimizer,
    options: LocalSgdOptions,
  ) {
    this.ring = currentRing(ring);
    this.settings = localSgdSettings(options);
    this.momentum = new Float32Array(model.flatLength);
    this.delta = new Float32Array(model.flatLength);
    if (this.settings.compression === 'int8' || this.settings.compression.startsWith('topk:'))
      this.residual = new Float32Array(model.flatLength);
    this.optimizer = this.stateCarrier();
  }

  private get comm(): Communicator {
    return this.ring.comm;
  }

  /** After the ring re-formed with new members (elastic training). */
  ringReformed(): void {
    // The residual belongs to positions this rank sent in the old ring.
    this.residual?.fill(0);
  }

  /** Nothing is accumulated between calls (the round's progress lives in the weights). */
  resetAccumulation(): void {}

  /** Inner steps taken since the last outer step. */
  get stepsThisRound(): number {
    return this.innerSteps;
  }

  /** One inner step (after forwardBackward); every syncEvery-th also the outer step. */
  async step(lr?: number): Promise<StepResult> {
    await this.ensureAnchor();
    this.inner.step(lr);
    this.innerSteps++;
    if (this.innerSteps < this.settings.syncEvery) return { applied: false, bytesSent: 0 };
    return this.outerStep();
  }

  /** Ends the round early when it has begun (before an evaluation or a checkpoint): replicas are equal afterwards. */
  async synchronize(): Promise<StepResult> {
    if (this.innerSteps === 0) return { applied: false, bytesSent: 0 };
    return this.outerStep();
  }

  private async ensureAnchor(): Promise<Float32Array> {
    // Before the first step every rank holds the root's weights (broadcast), so they are the first anchor.
    if (!this.anchor) this.anchor = await this.model.readParams();
    return this.anchor;
  }

  private async outerStep(): Promise<StepResult> {
    const anchor = await this.ensureAnchor();
    const params = await this.model.readParams();
    const delta = this.delta;
    for (let i = 0; i < delta.length; i++) delta[i] = anchor[i] - params[i];
    const before = this.comm.stats.bytesSent;
    await allreduceInPlace(this.comm, delta, {
      name: `outer delta (${this.model.layout.length} tensors, ${delta.length} floats)`,
      op: 'average',
      compression: this.settings.compression,
      errorFeedback: this.residual ?? undefined,
      chunkBytes: this.settings.fusionThresholdBytes,
      timeoutMs: this.settings.timeoutMs,
    });
    for (let i = 0; i < delta.length; i++) {
      if (!Number.isFinite(delta[i])) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `the averaged outer delta holds ${delta[i]} at index ${i}: a rank diverged during its inner steps; lower --lr or --sync-every`,
          { index: i, diverged: true },
        );
      }
    }
    // Only now, with the average in hand, does the state change: a failed allreduce leaves the round as it was.
    const { outerLr, outerMomentum: mu } = this.settings;
    const m = this.momentum;
    for (let i = 0; i < delta.length; i++) {
      m[i] = mu * m[i] + delta[i];
      // Nesterov: step along the gradient plus the momentum it leads to.
      anchor[i] -= outerLr * (delta[i] + mu * m[i]);
    }
    this.model.writeParams(anchor);
    this.innerSteps = 0;
    return { applied: true, bytesSent: this.comm.stats.bytesSent - before };
  }

  /** An Optimizer whose state is the inner one's plus outer.*: what broadcasts and checkpoints carry. */
  private stateCarrier(): Optimizer {
    const self = this;
    const inner = this.inner;
    return {
      get kind() {
        return inner.kind;
      },
      get spec() {
        return inner.spec;
      },
      get stepCount() {
        return inner.stepCount;
      },
      step: (lr?: number) => inner.step(lr),
      async exportState() {
        const state = await inner.exportState();
        state[ANCHOR] = (await self.ensureAnchor()).slice();
        state[MOMENTUM] = self.momentum.slice();
        state[INNER_STEPS] = new Float32Array([self.innerSteps]);
        return state;
      },
      importState(state: Record<string, Float32Array>) {
        const n = self.model.flatLength;
        for (const key of [ANCHOR, MOMENTUM]) {
          if (!(state[key] instanceof Float32Array) || state[key].length !== n) {
            throw new RingtrainError(
              ErrorCode.InvalidArgument,
              `local SGD state "${key}" must be ${n} floats (the model's flatLength), got ${state[key] instanceof Float32Array ? state[key].length : 'none'}; a checkpoint of synchronous training cannot resume with --sync-every`,
              { name: key },
            );
          }
        }
        const k = state[INNER_STEPS]?.[0] ?? 0;
        if (!Number.isInteger(k) || k < 0)
          throw new RingtrainError(
            ErrorCode.InvalidArgument,
            `local SGD state "${INNER_STEPS}" must be a whole number >= 0, got ${k}`,
          );
        inner.importState(Object.fromEntries(Object.entries(state).filter(([key]) => !key.startsWith('outer.'))));
        self.anchor = state[ANCHOR].slice();
        self.momentum = state[MOMENTUM].slice();
        self.innerSteps = k;
      },
      destroy: () => inner.destroy(),
    };
  }
}

/** What trains on the ring: local SGD when the config has syncEvery, else synchronous DistributedOptimizer. */
export function ringOptimizer(
  comm: Communicator | CurrentRing,
  model: Model,
  inner: Optimizer,
  config: LocalSgdConfig & DistributedOptimizerOptions,
): DistributedOptimizer | LocalSgdOptimizer {
  const common = {
    compression: config.compression,
    fusionThresholdBytes: config.fusionThresholdBytes,
    timeoutMs: config.timeoutMs,
  };
  if (config.syncEvery === undefined)
    return new DistributedOptimizer(comm, model, inner, {
      ...common,
      backwardPassesPerStep: config.backwardPassesPerStep,
      checks: config.checks,
      aggregation: config.aggregation,
      overlap: config.overlap,
    });
  if ((config.backwardPassesPerStep ?? 1) !== 1)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      '--backward-passes does not combine with --sync-every (local SGD already sends rarely); drop one',
    );
  return new LocalSgdOptimizer(comm, model, inner, {
    ...common,
    syncEvery: config.syncEvery,
    outerLr: config.outerLr,
    outerMomentum: config.outerMomentum,
  });
}

/** Ends a local SGD round early (before evaluating or saving); nothing to do for synchronous training. */
export function synchronizeReplicas(o: DistributedOptimizer | LocalSgdOptimizer): Promise<StepResult> {
  return o instanceof LocalSgdOptimizer ? o.synchronize() : Promise.resolve({ applied: false, bytesSent: 0 });
}
