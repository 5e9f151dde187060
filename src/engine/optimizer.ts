/**
 * Optimizers over a model's flat buffers: SGD with momentum and AdamW, with
 * their state (velocity; first and second moments) in GPU buffers of the same
 * flat layout. `step()` reads `model.grads` and updates `model.params` in
 * place, so the distributed layer can replace the gradients (allreduce) in
 * between `forwardBackward` and `step`.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Dispatch, Gpu } from '../gpu/gpu.ts';
import { adamwFields, planAdamw, planSgd, sgdFields } from '../gpu/kernels/optimizers.ts';
import type { Model } from './model.ts';

export interface OptimizerSpec {
  kind: 'sgd' | 'adamw';
  /** Learning rate (default 0.05 for SGD, 1e-3 for AdamW). */
  lr?: number;
  /** SGD momentum (default 0.9). */
  momentum?: number;
  /** SGD: L2 added to the gradient; AdamW: decoupled decay (default 0 for SGD, 0.01 for AdamW). */
  weightDecay?: number;
  /** AdamW betas (default [0.9, 0.999]). */
  betas?: [number, number];
  /** AdamW epsilon (default 1e-8). */
  eps?: number;
}

export interface Optimizer {
  readonly kind: 'sgd' | 'adamw';
  readonly spec: Required<OptimizerSpec>;
  /** Steps taken so far (restored by importState). */
  readonly stepCount: number;
  /** Applies one update from model.grads to model.params; `lr` overrides the learning rate for this and later steps. */
  step(lr?: number): void;
  /** Optimizer state as named flat arrays (each of the model's flatLength), plus `step` as a 1-element array. */
  exportState(): Promise<Record<string, Float32Array>>;
  importState(state: Record<string, Float32Array>): void;
  destroy(): void;
}

function finite(name: string, v: number, min: number, max = Infinity): void {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `optimizer: ${name} must be a number in [${min}, ${max}], got ${String(v)}`,
      { [name]: v },
    );
  }
}

export function resolveOptimizerSpec(spec: OptimizerSpec): Required<OptimizerSpec> {
  if (spec?.kind !== 'sgd' && spec?.kind !== 'adamw') {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `optimizer: kind must be 'sgd' or 'adamw', got ${String(spec?.kind)}`,
    );
  }
  const adam = spec.kind === 'adamw';
  const s: Required<OptimizerSpec> = {
    kind: spec.kind,
    lr: spec.lr ?? (adam ? 1e-3 : 0.05),
    momentum: spec.momentum ?? 0.9,
    weightDecay: spec.weightDecay ?? (adam ? 0.01 : 0),
    betas: spec.betas ?? [0.9, 0.999],
    eps: spec.eps ?? 1e-8,
  };
  finite('lr', s.lr, 0);
  finite('momentum', s.momentum, 0, 1);
  finite('weightDecay', s.weightDecay, 0);
  finite('betas[0]', s.betas[0], 0, 1);
  finite('betas[1]', s.betas[1], 0, 1);
  finite('eps', s.eps, 0);
  return s;
}

/** The options each optimizer takes (OptimizerSpec without the kind): what `new optim.AdamW(model, { … })` is given. */
export type SgdOptions = Pick<OptimizerSpec, 'lr' | 'momentum' | 'weightDecay'>;
export type AdamWOptions = Pick<OptimizerSpec, 'lr' | 'betas' | 'eps' | 'weightDecay'>;

const OPTION_NAMES: Record<OptimizerSpec['kind'], readonly string[]> = {
  sgd: ['lr', 'momentum', 'weightDecay'],
  adamw: ['lr', 'betas', 'eps', 'weightDecay'],
};

/** Refuses a key that the optimizer does not read (`momentum` given to AdamW would otherwise do nothing, silently). */
function checkOptionNames(kind: OptimizerSpec['kind'], options: object, className: string): void {
  if (options === null || typeof options !== 'object')
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${className}: options must be an object such as { lr: 0.01 }, got ${String(options)}`,
    );
  const unknown = Object.keys(options).filter((k) => !OPTION_NAMES[kind].includes(k));
  if (unknown.length > 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${className} takes ${OPTION_NAMES[kind].join(', ')}; it does not read ${unknown.join(', ')}`,
      { unknown },
    );
  }
}

function checkModel(model: Model, className: string): void {
  if (!model || typeof model !== 'object' || !model.gpu || !Number.isInteger(model.flatLength)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `new optim.${className}(model, options): the first argument must be a model (createModel's), got ${String(model)}`,
    );
  }
}

class FlatOptimizer implements Optimizer {
  readonly spec: Required<OptimizerSpec>;
  stepCount = 0;
  private readonly gpu: Gpu;
  private readonly n: number;
  private readonly uniform: GPUBuffer;
  private readonly state: Record<string, GPUBuffer>;
  private readonly update: Dispatch[];
  /** `gpu.submits` when the update was last recorded (-1: never). */
  private recordedAt = -1;

  constructor(
    private readonly model: Model,
    spec: OptimizerSpec,
  ) {
    this.spec = resolveOptimizerSpec(spec);
    this.gpu = model.gpu;
    this.n = model.flatLength;
    const n = this.n;
    if (this.kind === 'sgd') {
      this.uniform = this.gpu.uniform(sgdFields(this.spec), 'sgd-hyper');
      this.state = { velocity: this.gpu.storage(n, 'sgd-velocity') };
      this.update = planSgd(this.gpu, this.uniform, model.params, model.grads, this.state.velocity, n);
    } else {
      this.uniform = this.gpu.uniform(adamwFields(this.adamHyper(1)), 'adamw-hyper');
      this.state = { m: this.gpu.storage(n, 'adamw-m'), v: this.gpu.storage(n, 'adamw-v') };
      this.update = planAdamw(this.gpu, this.uniform, model.params, model.grads, this.state.m, this.state.v, n);
    }
  }

  get kind(): 'sgd' | 'adamw' {
    return this.spec.kind;
  }

  private adamHyper(step: number) {
    const s = this.spec;
    return { lr: s.lr, beta1: s.betas[0], beta2: s.betas[1], eps: s.eps, weightDecay: s.weightDecay, step };
  }

  step(lr?: number): void {
    if (lr !== undefined) {
      finite('lr', lr, 0);
      this.spec.lr = lr;
    }
    this.stepCount++;
    // The uniform's only reader is the update. Once the last one was submitted, the new values may go
    // on the queue ahead of this step's still-unsubmitted forward and backward: no submit of their own.
    const ahead = this.recordedAt < this.gpu.submits;
    // SGD's hyperparameters only change with lr; AdamW's bias correction changes every step.
    if (this.kind === 'adamw') this.gpu.writeUniform(this.uniform, adamwFields(this.adamHyper(this.stepCount)), ahead);
    else if (lr !== undefined) this.gpu.writeUniform(this.uniform, sgdFields(this.spec), ahead);
    this.gpu.record(this.update);
    this.recordedAt = this.gpu.submits;
  }

  async exportState(): Promise<Record<string, Float32Array>> {
    const out: Record<string, Float32Array> = {};
    for (const [name, buffer] of Object.entries(this.state)) out[name] = await this.gpu.readF32(buffer, 0, this.n);
    out.step = new Float32Array([this.stepCount]);
    return out;
  }

  importState(state: Record<string, Float32Array>): void {
    for (const name of Object.keys(this.state)) {
      const v = state[name];
      if (!(v instanceof Float32Array) || v.length !== this.n) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `${this.kind} state "${name}" must be a Float32Array of ${this.n} floats (the model's flatLength), got ${v instanceof Float32Array ? v.length : typeof v}`,
          { name, expected: this.n },
        );
      }
    }
    const step = state.step?.[0] ?? 0;
    if (!Number.isInteger(step) || step < 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `optimizer state "step" must be a non-negative integer, got ${step}`,
      );
    for (const [name, buffer] of Object.entries(this.state)) this.gpu.write(buffer, state[name]);
    this.stepCount = step;
  }

  destroy(): void {
    if (this.gpu.alive) this.gpu.flush();
    for (const b of Object.values(this.state)) b.destroy();
    this.uniform.destroy();
  }
}

/**
 * SGD with momentum over a model's parameters (torch.optim.SGD):
 *   const opt = new optim.SGD(model, { lr: 0.05, momentum: 0.9 });
 * Defaults: lr 0.05, momentum 0.9, weightDecay 0 (L2 added to the gradient).
 */
export class SGD extends FlatOptimizer {
  constructor(model: Model, options: SgdOptions = {}) {
    checkModel(model, 'SGD');
    checkOptionNames('sgd', options, 'optim.SGD');
    super(model, { ...options, kind: 'sgd' });
  }
}

/**
 * AdamW over a model's parameters (torch.optim.AdamW):
 *   const opt = new optim.AdamW(model, { lr: 1e-3 });
 * Defaults: lr 1e-3, betas [0.9, 0.999], eps 1e-8, weightDecay 0.01 (decoupled).
 */
export class AdamW extends FlatOptimizer {
  constructor(model: Model, options: AdamWOptions = {}) {
    checkModel(model, 'AdamW');
    checkOptionNames('adamw', options, 'optim.AdamW');
    super(model, { ...options, kind: 'adamw' });
  }
}

/** The optimizers by the name the CLI's `--optimizer` and a job's settings give. */
export const OPTIMIZERS = { sgd: SGD, adamw: AdamW } as const;

/**
 * The optimizer a spec names, through OPTIMIZERS: what the CLI and the trainers build from
 * `--optimizer NAME`. Keys the named optimizer does not read (the CLI's momentum for AdamW) are dropped.
 */
export function createOptimizer(model: Model, spec: OptimizerSpec): Optimizer {
  const kind = spec?.kind;
  if (kind !== 'sgd' && kind !== 'adamw') resolveOptimizerSpec(spec); // throws the message that names the kinds
  const options = Object.fromEntries(
    OPTION_NAMES[kind]
      .filter((k) => spec[k as keyof OptimizerSpec] !== undefined)
      .map((k) => [k, spec[k as keyof OptimizerSpec]]),
  );
  return new OPTIMIZERS[kind](model, options);
}
