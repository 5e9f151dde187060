/**
 * Optimizers over a model's flat buffers. What each optimizer is (its state, settings and shader) is
 * defined in src/optimizers/; this file is the one runner of them all: it resolves the settings, keeps
 * the state in GPU buffers of the model's flat layout and records the update. `step()` reads
 * `model.grads` and updates `model.params` in place, so the distributed layer can replace the
 * gradients (allreduce) in between `forwardBackward` and `step`.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Dispatch, Gpu } from '../gpu/gpu.ts';
import { optimizerFields, planOptimizerUpdate } from '../gpu/kernels/optimizers.ts';
import {
  optimizerNamed,
  optimizerNames,
  requireOptimizer,
  resolveSettings,
  settingsItReads,
  type OptimizerDefinition,
  type ResolvedSettings,
  type SettingValue,
} from '../optimizers/index.ts';
import type { Model } from './model.ts';

/** The settings the built-in optimizers take; each one's default is in its definition (src/optimizers/). */
interface BuiltInSettings {
  /** Learning rate (default 0.05 for SGD, 1e-3 for AdamW). */
  lr?: number;
  /** SGD momentum (default 0.9). */
  momentum?: number;
  /** SGD: L2 added to the gradient; AdamW: decoupled decay (default 0 for SGD, 0.01 for AdamW). */
  weightDecay?: number;
  /** The decay rates of AdamW's moments (default [0.9, 0.999]). */
  betas?: readonly [number, number];
  /** AdamW epsilon (default 1e-8). */
  eps?: number;
}

/** An optimizer's settings by name; one defined elsewhere may take others (its definition lists them). */
export type OptimizerSettings = BuiltInSettings & { [setting: string]: SettingValue | undefined };

export type OptimizerSpec = BuiltInSettings & {
  /** A registered optimizer's name (src/optimizers/: 'sgd', 'adamw', …). */
  kind: string;
  [setting: string]: SettingValue | string | undefined;
};

/** The spec with every setting of its optimizer filled in (and only those). */
export interface ResolvedOptimizerSpec {
  kind: string;
  lr: number;
  weightDecay: number;
  [setting: string]: SettingValue | string;
}

/** One named part of a state, read a slice at a time: a reader that hashes or streams it never holds it whole. */
export interface StatePart {
  name: string;
  /** Floats in the part. */
  length: number;
  /** The part's floats from `offset`, as many as `into` holds: `into` itself, filled (or a view of the same values). */
  read(offset: number, into: Float32Array): Promise<Float32Array>;
}

export interface Optimizer {
  readonly kind: string;
  readonly spec: ResolvedOptimizerSpec;
  /** Steps taken so far (restored by importState). */
  readonly stepCount: number;
  /** Applies one update from model.grads to model.params; `lr` overrides the learning rate for this and later steps. */
  step(lr?: number): void;
  /** Optimizer state as named flat arrays (each of the model's flatLength), plus `step` as a 1-element array. */
  exportState(): Promise<Record<string, Float32Array>>;
  importState(state: Record<string, Float32Array>): void;
  /** Optional: exportState's arrays (`step` too) as parts read a slice at a time, in any order. */
  stateParts?(): StatePart[];
  destroy(): void;
}

/** The spec with its optimizer's defaults; refuses an unknown kind and a setting the optimizer does not read. */
export function resolveOptimizerSpec(spec: OptimizerSpec): ResolvedOptimizerSpec {
  const definition = requireOptimizer(spec?.kind, 'optimizer');
  const { kind: _, ...given } = spec;
  return {
    kind: definition.name,
    ...resolveSettings(definition, given, `optimizer ${definition.name}`),
  } as ResolvedOptimizerSpec;
}

function checkModel(model: Model, className: string): void {
  if (!model || typeof model !== 'object' || !model.gpu || !Number.isInteger(model.flatLength)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `new optim.${className}(model, options): the first argument must be a model (createModel's), got ${String(model)}`,
    );
  }
}

function checkOptions(options: unknown, className: string): asserts options is OptimizerSettings {
  if (options === null || typeof options !== 'object')
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `optim.${className}: options must be an object such as { lr: 0.01 }, got ${String(options)}`,
    );
}

/** Any registered optimizer over a model's flat buffers: `new FlatOptimizer(definition, model, options)`. */
export class FlatOptimizer implements Optimizer {
  readonly spec: ResolvedOptimizerSpec;
  stepCount = 0;
  private readonly gpu: Gpu;
  private readonly n: number;
  private readonly uniform: GPUBuffer;
  /** What the uniform holds (or will, in queue order): a step rewrites it only when its values change. */
  private uniformValues: number[];
  private readonly state: Record<string, GPUBuffer>;
  private readonly update: Dispatch[];
  /** `gpu.recordedThrough` when the update was last recorded (-1: never). */
  private recordedAt = -1;

  constructor(
    readonly definition: OptimizerDefinition,
    model: Model,
    options: OptimizerSettings = {},
  ) {
    checkModel(model, definition.className);
    checkOptions(options, definition.className);
    const settings = resolveSettings(definition, options, `optim.${definition.className}`);
    this.spec = { kind: definition.name, ...settings } as ResolvedOptimizerSpec;
    this.gpu = model.gpu;
    this.n = model.flatLength;
    const name = definition.name;
    this.uniformValues = definition.uniform(settings, 1);
    this.uniform = this.gpu.uniform(optimizerFields(this.uniformValues), `${name}-hyper`);
    this.state = Object.fromEntries(definition.state.map((s) => [s, this.gpu.storage(this.n, `${name}-${s}`)]));
    const state = definition.state.map((s) => this.state[s]);
    const buffers = { uniform: this.uniform, param: model.params, grad: model.grads, state };
    this.update = planOptimizerUpdate(this.gpu, definition, buffers, this.n);
  }

  get kind(): string {
    return this.definition.name;
  }

  /** The settings without the kind: what the definition's uniform reads. */
  private get settings(): ResolvedSettings {
    const { kind: _, ...settings } = this.spec;
    return settings as ResolvedSettings;
  }

  step(lr?: number): void {
    if (lr !== undefined) {
      resolveSettings(this.definition, { ...this.settings, lr }, `optimizer ${this.kind}`);
      this.spec.lr = lr;
    }
    this.stepCount++;
    const values = this.definition.uniform(this.settings, this.stepCount);
    if (values.some((v, i) => v !== this.uniformValues[i])) {
      // The uniform's only reader is the update. Once the last one was submitted, the new values may go
      // on the queue ahead of this step's still-unsubmitted forward and backward: no submit of their own.
      const ahead = this.recordedAt < this.gpu.submits;
      this.gpu.writeUniform(this.uniform, optimizerFields(values), ahead);
      this.uniformValues = values;
    }
    this.gpu.record(this.update);
    this.recordedAt = this.gpu.recordedThrough;
  }

  async exportState(): Promise<Record<string, Float32Array>> {
    const out: Record<string, Float32Array> = {};
    for (const [name, buffer] of Object.entries(this.state)) out[name] = await this.gpu.readF32(buffer, 0, this.n);
    out.step = new Float32Array([this.stepCount]);
    return out;
  }

  stateParts(): StatePart[] {
    const parts: StatePart[] = Object.entries(this.state).map(([name, buffer]) => ({
      name,
      length: this.n,
      read: (offset, into) => this.gpu.readF32Into(buffer, offset, into),
    }));
    const step = async (_: number, into: Float32Array) => into.fill(this.stepCount, 0, 1);
    return [...parts, { name: 'step', length: 1, read: step }];
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

/** The options each built-in optimizer takes: what `new optim.AdamW(model, { … })` is given. */
export type SgdOptions = Pick<BuiltInSettings, 'lr' | 'momentum' | 'weightDecay'>;
export type AdamWOptions = Pick<BuiltInSettings, 'lr' | 'betas' | 'eps' | 'weightDecay'>;

/**
 * SGD with momentum over a model's parameters (torch.optim.SGD):
 *   const opt = new optim.SGD(model, { lr: 0.05, momentum: 0.9 });
 * Defaults: lr 0.05, momentum 0.9, weightDecay 0 (L2 added to the gradient).
 */
export class SGD extends FlatOptimizer {
  constructor(model: Model, options: SgdOptions = {}) {
    super(requireOptimizer('sgd', 'optim.SGD'), model, options);
  }
}

/**
 * AdamW over a model's parameters (torch.optim.AdamW):
 *   const opt = new optim.AdamW(model, { lr: 1e-3 });
 * Defaults: lr 1e-3, betas [0.9, 0.999], eps 1e-8, weightDecay 0.01 (decoupled).
 */
export class AdamW extends FlatOptimizer {
  constructor(model: Model, options: AdamWOptions = {}) {
    super(requireOptimizer('adamw', 'optim.AdamW'), model, options);
  }
}

export type OptimizerClass = new (model: Model, options?: OptimizerSettings) => Optimizer;

/** The class of a registered optimizer without a hand-written one: its name is the definition's className. */
function classFor(definition: OptimizerDefinition): OptimizerClass {
  const made = class extends FlatOptimizer {
    constructor(model: Model, options: OptimizerSettings = {}) {
      super(definition, model, options);
    }
  };
  Object.defineProperty(made, 'name', { value: definition.className });
  return made;
}

const HAND_WRITTEN: Record<string, OptimizerClass> = { sgd: SGD, adamw: AdamW };

/**
 * The optimizers by the name the CLI's `--optimizer` and a job's settings give, one per registered
 * definition (src/optimizers/): `new optim.OPTIMIZERS[name](model, { lr })`.
 */
export const OPTIMIZERS: Readonly<Record<string, OptimizerClass>> = Object.fromEntries(
  optimizerNames().map((name) => [name, HAND_WRITTEN[name] ?? classFor(optimizerNamed(name)!)]),
);

/**
 * The optimizer a spec names: what the CLI and the trainers build from `--optimizer NAME`. Keys the
 * named optimizer does not read (the CLI's momentum for AdamW) are dropped.
 */
export function createOptimizer(model: Model, spec: OptimizerSpec): Optimizer {
  const definition = requireOptimizer(spec?.kind, 'optimizer');
  const { kind: _, ...given } = spec;
  const make = OPTIMIZERS[definition.name] ?? classFor(definition);
  return new make(model, settingsItReads(definition, given) as OptimizerSettings);
}
