/**
 * GraphModel: any `Module` as a `Model` (model.ts), so the trainers,
 * optimizers, checkpoints and allreduce train it without knowing what it is.
 *
 * The module's parameters, named by their path, become the layout: one
 * contiguous f32 `params` buffer and one `grads` buffer in the same order,
 * each tensor at a PARAM_ALIGN offset, initialised from the model's seed in
 * layout order. For each batch size the module's forward is traced once
 * into a graph, compiled into a plan (src/nn/plan.ts) and kept: after the
 * first step of a given batch size no GPU buffer is created, and a step is
 * one upload, one recording of forward + loss head + backward, and one
 * 8-byte read of the loss.
 *
 * Modes: `forwardBackward` traces the module in train mode, `predict` and
 * `evaluate` in eval mode (Dropout the identity), whatever modes the module
 * was left in, so an evaluation never depends on a mask and never advances
 * one. An evaluation's plan is the forward and the loss head alone (no
 * gradient buffer), in chunks sized to the adapter's binding limit and
 * EVAL_PLAN_BYTES, unless a training plan of its batch size computes the same
 * graph (a model without dropout): then that one serves both.
 */
import { layoutHash } from '../checkpoint/checkpoint.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { BufferRange, Dispatch, Gpu } from '../gpu/gpu.ts';
import { DeferredScalars } from '../gpu/readback.ts';
import { crossEntropy, type Loss, RESULT_CORRECT, RESULT_LOSS } from '../nn/loss.ts';
import type { Module } from '../nn/module.ts';
import type { Step } from '../nn/op.ts';
import { compilePlan, type Plan, recordSteps } from '../nn/plan.ts';
import { drawInitialWeights, drawInitialWeightsInPieces } from './initial-weights.ts';
import { type DType, Graph, type Parameter, shapeText, sizeOf, type Tensor } from '../nn/tensor.ts';
import { recordDeferredLoss } from './train-step.ts';
import { type LossScaleOptions, LossScaler } from './loss-scale.ts';
import { type BucketRange, DEFAULT_BUCKET_BYTES, type GradientBucket, planBuckets } from './grad-buckets.ts';
import { type EvalResult, type Model, type ModelIdentity, PARAM_ALIGN, type ParamEntry } from './model.ts';
import { checkMicroBatchValue, GradientAccumulation, passesOf, passWeights } from './micro-batch.ts';

export interface GraphModelOptions {
  identity: ModelIdentity;
  module: Module;
  /** One sample's shape, e.g. [784] or [1, 28, 28]. */
  inputShape: number[];
  /** Element type of the input: 'u32' for indices (token ids), which must then be integers ≥ 0. */
  inputDType?: DType;
  /** Width of the module's output (its last dimension). */
  classes: number;
  seed: number;
  loss?: Loss;
  /**
   * Training's graph when the module computes its loss itself (an output head fused with the loss, whose
   * logits are never whole): called in train mode with the input and the targets ([batch · positions]
   * u32, as `loss.encodeTargets` packs them), it returns the mean loss [1], or null to train through
   * the module's output and `loss`. Evaluation and prediction always use the output and `loss`.
   */
  fusedLoss?: (input: Tensor, targets: Tensor) => Tensor | null;
  /**
   * Make the weights zero and leave drawing them from `seed` to `drawInitialWeights`, which lets the
   * event loop turn while it draws (createModelInPieces): nothing may use the model before it ends.
   */
  drawLater?: boolean;
}

/** How a model is made, beside what it is: `drawLater` (createModelInPieces). */
export type ModelMaking = Pick<GraphModelOptions, 'drawLater'>;

interface BatchPlan {
  plan: Plan;
  input: Tensor;
  output: Tensor;
  rows: number;
  targets: BufferRange;
  targetScratch: Int32Array;
  inputScratch: Uint32Array | null;
  results: GPUBuffer;
  forward: Step[];
  head: Step[];
  backward: Step[];
  /** forward, head and backward in one list, made once: what every training step records. */
  step: Step[];
  /** Gradient buckets by bucket size, with the steps recorded before each one's read-back (forward and head before the first). */
  buckets: Map<number, BucketCut>;
  /** The GPU buffers made for this plan: the largest one's bytes and all of them together. */
  bytes: { largest: number; total: number };
  /** A micro-batch's plan (it writes its gradients into a scratch): how its passes add into the model's. */
  accumulation?: GradientAccumulation;
  /** Under f16-mixed, a micro-batch's plan: the step's one unscale and overflow check, after its last pass's add. */
  unscaleAfterPasses?: Dispatch[];
  /** Under f16-mixed training, the loss gradient's scaling by S (after the head, before backward); else empty. */
  seed: Dispatch[];
}

/** A plan's gradient buckets, the steps recorded before each one's read-back, and under f16-mixed each one's unscale. */
interface BucketCut {
  ranges: BucketRange[];
  pieces: Step[][];
  unscales?: Dispatch[][];
}

/** A step whose batch is uploaded: the plan its (last) pass runs, where its loss lands, and its passes. */
interface LoadedStep {
  p: BatchPlan;
  results: GPUBuffer;
  /** Passes of a micro-batched step (1: one pass at the batch). */
  passes: number;
}

/**
 * Most samples an evaluation plans at once, whatever the memory: past a few hundred a chunk
 * gains no speed on any adapter seen, and the plan of each chunk size is kept.
 */
export const MAX_EVAL_CHUNK = 500;
/**
 * GPU bytes an evaluation's plan may hold (unless one sample needs more): evaluating costs a
 * fraction of training's memory, which on a CPU adapter is the process's RAM. 64 MiB still holds
 * tens of windows of a small transformer, enough work per chunk to keep a GPU busy.
 */
export const EVAL_PLAN_BYTES = 64 * 1024 * 1024;

/**
 * Whether every input passes `rejectInput`'s check, in one tight loop with no
 * branch per element (a batch of 256 images is 200,704 floats, checked every
 * step): x·0 is 0 for a finite x and NaN for NaN or ±Infinity. For indices,
 * an integer ≥ 0 below 2³² is its own unsigned 32-bit value; a larger one
 * only sends the caller to the exact check.
 */
export function allValid(x: Float32Array, indices: boolean): boolean {
  if (!indices) {
    // Four sums, so the adds do not wait on one another.
    let a = 0,
      b = 0,
      c = 0,
      d = 0;
    const n = x.length - (x.length % 4);
    for (let i = 0; i < n; i += 4) {
      a += x[i] * 0;
      b += x[i + 1] * 0;
      c += x[i + 2] * 0;
      d += x[i + 3] * 0;
    }
    for (let i = n; i < x.length; i++) a += x[i] * 0;
    return a + b + c + d === 0;
  }
  let ok = true;
  for (let i = 0; i < x.length; i++) ok = ok && x[i] >>> 0 === x[i];
  return ok;
}

/** A plan's kind: a training step's, an evaluation's, or a training pass at the micro-batch (micro-batch.ts). */
type Mode = 'train' | 'eval' | 'micro';

const wholeBuffer = (buffer: GPUBuffer): BufferRange => ({ buffer, offset: 0, size: buffer.size });

/** What a traced graph computes, independent of tensor ids: two traces with equal signatures plan alike. */
function graphSignature(graph: Graph, output: Tensor): string {
  const local = new Map<Tensor, string>();
  const name = (t: Tensor): string => {
    let n = local.get(t);
    if (n === undefined) {
      n = t.kind === 'param' ? `p:${t.param?.name}` : `${t.kind}${local.size}`;
      local.set(t, n);
    }
    return n;
  };
  const parts = graph.nodes.map(
    (n) =>
      `${n.op.name}(${n.inputs.map((t) => `${name(t)}${shapeText(t.shape)}`).join(',')})${JSON.stringify(n.attrs)}=${name(n.output)}`,
  );
  return `${parts.join(';')}->${name(output)}`;
}

export function layoutOf(named: [string, Parameter][]): {
  layout: ParamEntry[];
  paramCount: number;
  flatLength: number;
} {
  const layout: ParamEntry[] = [];
  let offset = 0;
  let paramCount = 0;
  for (const [name, p] of named) {
    const length = sizeOf(p.shape);
    layout.push({ name, shape: [...p.shape], offset, length });
    paramCount += length;
    offset += Math.ceil(length / PARAM_ALIGN) * PARAM_ALIGN;
  }
  return { layout, paramCount, flatLength: Math.max(offset, PARAM_ALIGN) };
}

export class GraphModel implements Model {
  readonly identity: ModelIdentity;
  readonly layoutHash: string;
  readonly spec: { kind: string } & Record<string, unknown>;
  readonly module: Module;
  readonly inputShape: number[];
  readonly inputSize: number;
  readonly classes: number;
  /** Output rows (loss targets) per sample: 1 for a classifier, the context length for a sequence model. */
  readonly positions: number;
  readonly layout: readonly ParamEntry[];
  readonly paramCount: number;
  readonly flatLength: number;
  readonly params: GPUBuffer;
  readonly grads: GPUBuffer;
  readonly loss: Loss;
  readonly inputDType: DType;
  private readonly fusedLoss?: GraphModelOptions['fusedLoss'];
  private readonly entries = new Map<Parameter, ParamEntry>();
  /** The parameters in layout order. */
  private readonly parameters: Parameter[];
  /** Plans by batch size and mode (`32/train`, `500/eval`); an evaluation whose graph equals training's holds the training plan. */
  private readonly plans = new Map<string, BatchPlan & { signature: string }>();
  private readonly owned: GPUBuffer[] = [];
  /** The evaluation plans' shared, never-read output gradient (evalHeadGradient). */
  private headGradient?: GPUBuffer;
  /** Samples per forward-backward pass when a step is split (setMicroBatch); undefined: one pass per step. */
  private microBatch?: number;
  /** Where micro-batch passes write their gradients before they are added into `grads` (made with the first such plan). */
  private microGrads?: GPUBuffer;

  /** Gathers evaluate()'s per-chunk results, so an evaluation waits for the GPU once. */
  private evalSink?: DeferredScalars;
  /** Set by useMixedPrecision: the plans compute the linear layers in f16-mixed and scale the loss. */
  private scaler?: LossScaler;
  /** The seed of weights not drawn yet (GraphModelOptions.drawLater). */
  private undrawnSeed?: number;

  constructor(
    readonly gpu: Gpu,
    o: GraphModelOptions,
  ) {
    // Made up front, so no evaluation allocates a GPU buffer after warm-up.
    this.evalSink = new DeferredScalars(gpu, 16);
    this.identity = { name: o.identity.name, options: { ...o.identity.options } };
    this.spec = { kind: o.identity.name, ...o.identity.options };
    this.module = o.module;
    this.inputShape = [...o.inputShape];
    this.inputSize = sizeOf(o.inputShape);
    this.inputDType = o.inputDType ?? 'f32';
    this.classes = o.classes;
    this.loss = o.loss ?? crossEntropy;
    this.fusedLoss = o.fusedLoss;
    o.module.nameTree();
    const named = o.module.namedParameters();
    if (named.length === 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `model ${o.identity.name} has no parameters: give its module Parameters or layers that hold some`,
      );
    const { layout, paramCount, flatLength } = layoutOf(named);
    this.layout = layout;
    this.paramCount = paramCount;
    this.flatLength = flatLength;
    this.layoutHash = layoutHash(layout);
    named.forEach(([, p], i) => this.entries.set(p, layout[i]));
    this.parameters = named.map(([, p]) => p);
    // Trace one sample now, in both modes: a wrong shape anywhere in forward fails here, naming the layer.
    this.positions = this.trace(1, 'train').rows;
    this.trace(1, 'eval');

    if (flatLength * 4 > gpu.limits.maxBufferSize) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `model ${o.identity.name}: its ${paramCount} parameters need a flat buffer of ${flatLength * 4} bytes, more than this adapter's maxBufferSize of ${gpu.limits.maxBufferSize}; use a smaller model (fewer layers, a smaller width or vocabulary)`,
        { size: flatLength * 4, max: gpu.limits.maxBufferSize, params: paramCount },
      );
    }
    if (o.drawLater) {
      this.undrawnSeed = o.seed;
      this.params = this.own(gpu.storage(flatLength, `${o.identity.name}-params`));
    } else {
      const init = drawInitialWeights(this.parameters, layout, flatLength, o.seed);
      this.params = this.own(gpu.upload(init, `${o.identity.name}-params`));
    }
    this.grads = this.own(gpu.storage(flatLength, `${o.identity.name}-grads`));
  }

  get kind(): string {
    return this.identity.name;
  }

  /** Draws the weights a model made with `drawLater` left undrawn, turning the event loop every ~100 ms; the same numbers as the constructor's. */
  async drawInitialWeights(): Promise<void> {
    if (this.undrawnSeed === undefined) return;
    const seed = this.undrawnSeed;
    this.writeParams(await drawInitialWeightsInPieces(this.parameters, this.layout, this.flatLength, seed));
    this.undrawnSeed = undefined;
  }

  get lossScaler(): LossScaler | undefined {
    return this.scaler;
  }

  useMixedPrecision(options: LossScaleOptions = {}): void {
    const refuse = (why: string, detail: object) =>
      new RingtrainError(ErrorCode.InvalidArgument, `--precision f16-mixed: ${why}`, {
        precision: 'f16-mixed',
        ...detail,
      });
    if (!this.gpu.hasShaderF16)
      throw refuse(
        `this adapter (${this.gpu.info.description}) does not offer the WebGPU feature 'shader-f16' it needs; use --precision f32, or an adapter that has it (on a machine without a GPU, Deno's lavapipe: --runtime deno; most GPUs do)`,
        { feature: 'shader-f16', adapter: this.gpu.info.description },
      );
    if (this.plans.size > 0) throw refuse('choose the precision before the first step or evaluation', {});
    if (this.scaler) return;
    this.scaler = new LossScaler(this.gpu, options);
    this.own(this.scaler.scaleBuffer);
    this.own(this.scaler.flag);
  }

  private own(buffer: GPUBuffer): GPUBuffer {
    this.owned.push(buffer);
    return buffer;
  }

  /** Runs `record` with the module in `mode` (a micro-batch pass trains); its own flags are put back afterwards: the mode is the call's, not state left on the module. */
  private inMode<T>(mode: Mode, record: () => T): T {
    const modules = this.module.modules();
    const before = modules.map((m) => m.training);
    try {
      this.module.train(mode !== 'eval');
      return record();
    } finally {
      modules.forEach((m, i) => (m.training = before[i]));
    }
  }

  private trace(batch: number, mode: Mode): { graph: Graph; input: Tensor; output: Tensor; rows: number } {
    const graph = new Graph();
    const input = graph.input([batch, ...this.inputShape], { dtype: this.inputDType });
    const output = this.inMode(mode, () => this.module.call(input));
    const last = output.shape[output.shape.length - 1];
    if (last !== this.classes || output.shape[0] !== batch) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `model ${this.identity.name}: forward returned ${shapeText(output.shape)} for input ${shapeText(input.shape)}; it must return [batch, …, ${this.classes}] (batch first, ${this.classes} outputs last)`,
        { output: [...output.shape], input: [...input.shape], classes: this.classes },
      );
    }
    return { graph, input, output, rows: output.size / last / batch };
  }

  /** Training's graph ending in the module's own loss (`fusedLoss`), or null when it has none for this batch. */
  private traceFusedLoss(batch: number): { graph: Graph; input: Tensor; output: Tensor; targets: Tensor } | null {
    if (!this.fusedLoss) return null;
    const graph = new Graph();
    const input = graph.input([batch, ...this.inputShape], { dtype: this.inputDType });
    const targets = graph.input([batch * this.positions], { dtype: 'u32' });
    const output = this.inMode('train', () => this.fusedLoss!(input, targets));
    return output ? { graph, input, output, targets } : null;
  }

  /**
   * The plan of a batch size in a mode. A training plan holds backward too; an evaluation's holds
   * the forward and the loss head alone (no gradient buffer), unless the training plan of that
   * batch size computes the same graph: then it serves both, and evaluating allocates nothing.
   */
  private plan(batch: number, mode: Mode): BatchPlan {
    const key = `${batch}/${mode}`;
    let p = this.plans.get(key);
    if (p) return p;
    // Training and a micro-batch pass end in the module's own loss where it has one for this batch.
    const fused = mode !== 'eval' ? this.traceFusedLoss(batch) : null;
    const { graph, input, output } = fused ?? this.trace(batch, mode);
    const signature = graphSignature(graph, output);
    const trained =
      mode === 'eval' ? (this.plans.get(`${batch}/train`) ?? this.plans.get(`${batch}/micro`)) : undefined;
    if (trained && trained.signature === signature) {
      this.plans.set(key, trained);
      return trained;
    }
    const made: GPUBuffer[] = [];
    const own = (b: GPUBuffer): GPUBuffer => (made.push(b), this.own(b));
    const microGrads =
      mode === 'micro' ? (this.microGrads ?? own(this.gpu.storage(this.flatLength, 'micro-batch/grads'))) : undefined;
    const plan = compilePlan(
      this.gpu,
      graph.nodes,
      [output],
      { params: this.params, grads: microGrads ?? this.grads, entry: (param) => this.entries.get(param)! },
      { gradients: mode !== 'eval', f16Mixed: this.scaler ? { overflow: this.scaler.flag } : undefined },
    );
    for (const b of plan.buffers) own(b);
    const rows = batch * this.positions;
    const targets = fused ? plan.value(fused.targets) : wholeBuffer(own(this.gpu.storage(rows, 'targets')));
    const results = own(this.gpu.storage(4, 'results'));
    const unread = mode === 'eval' ? this.evalHeadGradient(rows, own) : undefined;
    const dOutput = unread ?? plan.grad(output);
    if (!dOutput)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `model ${this.identity.name}: its output does not depend on any parameter`,
      );
    const head = fused
      ? this.fusedLossHead(plan.value(output), dOutput, results, own)
      : this.loss.plan(this.gpu, {
          output: plan.value(output),
          dOutput,
          targets: targets.buffer,
          results,
          rows,
          classes: this.classes,
          scratch: (words, label) => own(this.gpu.storage(words, `${this.loss.name}/${label}`)),
        });
    p = {
      plan,
      input,
      output,
      rows,
      targets,
      targetScratch: new Int32Array(rows),
      inputScratch: this.inputDType === 'u32' ? new Uint32Array(batch * this.inputSize) : null,
      results,
      forward: plan.forward,
      head,
      backward: plan.backward,
      signature,
      seed: mode !== 'eval' && this.scaler ? this.scaler.planSeed(dOutput, fused ? 1 : rows * this.classes) : [],
      step: [...plan.forward, ...head],
      buckets: new Map(),
      bytes: { largest: Math.max(...made.map((b) => b.size)), total: made.reduce((sum, b) => sum + b.size, 0) },
    };
    p.step.push(...p.seed, ...plan.backward, ...this.unscaleAfterBackward(mode));
    if (microGrads) {
      const buffers = { grads: this.grads, scratch: microGrads, passResults: results, flatLength: this.flatLength };
      p.accumulation = new GradientAccumulation(this.gpu, buffers, (words, label) =>
        own(this.gpu.storage(words, label)),
      );
      p.unscaleAfterPasses = this.scaler?.planUnscale(this.grads, this.flatLength);
    }
    this.plans.set(key, p);
    // Kept only now: a plan that threw half-way (Gpu.compileAhead destroys what it made) leaves nothing behind.
    if (unread) this.headGradient = unread.buffer;
    if (microGrads) this.microGrads = microGrads;
    return p;
  }

  /** f16-mixed training's unscale of the gradients; a micro-batch pass leaves its scaled gradient to the step's accumulation, which unscales once after its last pass. */
  private unscaleAfterBackward(mode: Mode): Dispatch[] {
    return mode === 'train' && this.scaler ? this.scaler.planUnscale(this.grads, this.flatLength) : [];
  }

  /** The head of a graph that ends in its own loss: the loss into results, and ∂loss/∂loss = 1 as backward's seed. */
  private fusedLossHead(
    loss: BufferRange,
    seed: BufferRange,
    results: GPUBuffer,
    own: (b: GPUBuffer) => GPUBuffer,
  ): Step[] {
    const one = own(this.gpu.upload(Float32Array.of(1), 'loss-seed'));
    return [
      { copy: { src: loss, dst: { buffer: results, offset: RESULT_LOSS * 4, size: 4 }, bytes: 4 } },
      { copy: { src: { buffer: one, offset: 0, size: 4 }, dst: seed, bytes: 4 } },
    ];
  }

  /**
   * Where an evaluation's loss head writes the output's gradient, which nothing reads (the head's
   * kernels write it as they compute the loss): one buffer, grown to the largest chunk's rows.
   */
  private evalHeadGradient(rows: number, own: (b: GPUBuffer) => GPUBuffer): BufferRange {
    const bytes = rows * this.classes * 4;
    const buffer =
      this.headGradient && this.headGradient.size >= bytes
        ? this.headGradient
        : own(this.gpu.storage(rows * this.classes, 'eval/unread-d-output'));
    return { buffer, offset: 0, size: bytes };
  }

  /**
   * How many samples an evaluation plans at once: as many as fit both the adapter's binding limit
   * (every buffer of a plan grows with its batch, so one sample's largest buffer times the chunk
   * must fit) and EVAL_PLAN_BYTES, measured on the plan of one sample; at least one, at most `most`.
   */
  private evalChunk(most: number): number {
    const one = this.plan(1, 'eval').bytes;
    const byBinding = Math.floor(this.gpu.maxBindingBytes / one.largest);
    const byMemory = Math.floor(EVAL_PLAN_BYTES / one.total);
    return Math.max(1, Math.min(most, byBinding, byMemory));
  }

  /** Plans the training step for `batch` (buffers, dispatches) without recording it: what `train --dry-run` sizes. */
  planTrainingStep(batch: number): void {
    const micro = this.microPasses(batch);
    if (micro) micro.p.accumulation!.plan(micro.passes);
    else this.plan(batch, 'train');
  }

  /**
   * Splits each training step of more than `microBatch` samples into passes of `microBatch` that
   * add into `grads` on the GPU (micro-batch.ts); undefined: one pass per step. A step's batch must
   * then be a multiple of it.
   */
  setMicroBatch(microBatch: number | undefined): void {
    if (microBatch !== undefined) checkMicroBatchValue(microBatch);
    this.microBatch = microBatch;
  }

  /** The plan at the micro-batch and the passes of a step of `batch`, when the micro-batch splits it. */
  private microPasses(batch: number): { p: BatchPlan; passes: number } | undefined {
    if (this.microBatch === undefined) return undefined;
    const passes = passesOf(batch, this.microBatch);
    return passes > 1 ? { p: this.plan(this.microBatch, 'micro'), passes } : undefined;
  }

  private checkBatch(what: string, x: Float32Array, batch: number): void {
    if (!(x instanceof Float32Array)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: x must be a Float32Array of batch×${this.inputSize} floats`,
      );
    }
    if (!Number.isInteger(batch) || batch < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: batch must be a positive integer, got ${batch}`, {
        batch,
      });
    }
    if (x.length !== batch * this.inputSize) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: x has ${x.length} floats but batch ${batch} × inputSize ${this.inputSize} = ${batch * this.inputSize}; pass [batch, ${this.inputShape.join(', ')}] row-major`,
        { got: x.length, batch, inputSize: this.inputSize },
      );
    }
  }

  private load(p: BatchPlan, x: Float32Array, targets?: ArrayLike<number>): void {
    // GPUs swallow NaN silently (max(NaN, 0) is 0 on most), so catch it here.
    if (!allValid(x, p.inputScratch !== null)) this.rejectInput(x, p.inputScratch !== null);
    const v = p.plan.value(p.input);
    if (p.inputScratch) {
      p.inputScratch.set(x);
      this.gpu.write(v.buffer, p.inputScratch, v.offset);
    } else this.gpu.write(v.buffer, x, v.offset);
    if (targets) {
      const packed = this.loss.encodeTargets(targets, p.rows, this.classes, p.targetScratch);
      this.gpu.write(p.targets.buffer, packed, p.targets.offset);
    }
  }

  /** Throws naming the first input that is not finite (or, for indices, not an integer ≥ 0). */
  private rejectInput(x: Float32Array, indices: boolean): void {
    for (let i = 0; i < x.length; i++) {
      const bad = !Number.isFinite(x[i]) || (indices && !(Number.isInteger(x[i]) && x[i] >= 0));
      if (bad) {
        const sample = Math.floor(i / this.inputSize);
        const want = indices ? 'integers ≥ 0 (indices)' : 'finite numbers';
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `input x[${i}] (sample ${sample}, feature ${i % this.inputSize}) is ${x[i]}; inputs must be ${want}: check the data`,
          { index: i, sample },
        );
      }
    }
  }

  /**
   * Checks and uploads the batch. Split into micro-batches, every pass but the last is recorded
   * here with its add; the last is uploaded. Its `results` hold the mean loss once the steps have run.
   */
  private loadStep(x: Float32Array, labels: ArrayLike<number>, batch: number): LoadedStep {
    this.checkBatch('forwardBackward', x, batch);
    if (labels.length !== batch * this.positions) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `forwardBackward: ${labels.length} labels for batch ${batch} (${this.positions} per sample)`,
        { labels: labels.length, batch },
      );
    }
    const micro = this.microPasses(batch);
    if (!micro) {
      const p = this.plan(batch, 'train');
      this.load(p, x, labels);
      this.scaler?.beginStep();
      return { p, results: p.results, passes: 1 };
    }
    const { p, passes } = micro;
    const accumulation = p.accumulation!;
    // The whole batch is checked before any pass runs, so a bad sample never leaves a step half-summed.
    if (!allValid(x, p.inputScratch !== null)) this.rejectInput(x, p.inputScratch !== null);
    accumulation.writeWeights(passes, passWeights(labels, passes));
    this.scaler?.beginStep();
    const [samples, rows] = [batch / passes, p.rows];
    for (let k = 0; k < passes; k++) {
      const inputs = x.subarray(k * samples * this.inputSize, (k + 1) * samples * this.inputSize);
      this.load(p, inputs, Array.prototype.slice.call(labels, k * rows, (k + 1) * rows) as number[]);
      if (k === passes - 1) break;
      recordSteps(this.gpu, p.step);
      this.gpu.record(accumulation.afterPass(passes, k));
    }
    return { p, results: accumulation.results, passes };
  }

  /** Uploads the batch and records forward, loss head and backward (of every pass); returns where the loss lands. */
  private recordStep(x: Float32Array, labels: ArrayLike<number>, batch: number): GPUBuffer {
    const s = this.loadStep(x, labels, batch);
    recordSteps(this.gpu, s.p.step);
    if (s.passes > 1)
      this.gpu.record([...s.p.accumulation!.afterPass(s.passes, s.passes - 1), ...(s.p.unscaleAfterPasses ?? [])]);
    return s.results;
  }

  forwardBackwardDeferred(
    x: Float32Array,
    labels: ArrayLike<number>,
    batch = (labels?.length ?? 0) / this.positions,
    sink: DeferredScalars,
  ): void {
    recordDeferredLoss(this.gpu, sink, this.recordStep(x, labels, batch), RESULT_LOSS * 4);
  }

  /**
   * forwardBackwardDeferred in pieces: after the backward step that finishes each gradient bucket
   * (grad-buckets.ts) the work so far is submitted and that bucket's read-back starts, so on a GPU
   * bucket k comes back while bucket k+1 still computes. The loss is recorded after the whole
   * backward and rides on the last bucket's read.
   */
  forwardBackwardBuckets(
    x: Float32Array,
    labels: ArrayLike<number>,
    batch = (labels?.length ?? 0) / this.positions,
    sink: DeferredScalars,
    bucketBytes = DEFAULT_BUCKET_BYTES,
    into?: Float32Array,
  ): GradientBucket[] {
    if (into) this.checkFlat('forwardBackwardBuckets', into);
    const { p, results, passes } = this.loadStep(x, labels, batch);
    const { ranges, pieces, unscales } = this.bucketsOf(p, bucketBytes);
    // Micro-batched, the last pass's gradient is added into each bucket's range as backward finishes it.
    const adds = passes > 1 ? p.accumulation!.bucketSteps(passes, bucketBytes, ranges) : undefined;
    return ranges.map((b, i) => {
      recordSteps(this.gpu, pieces[i]);
      if (adds) this.gpu.record(adds[i]);
      // f16-mixed: a bucket leaves unscaled (a ring sums true gradients), its overflow raising the step's flag.
      if (unscales) this.gpu.record(unscales[i]);
      if (i === ranges.length - 1) {
        if (passes > 1) this.gpu.record(p.accumulation!.lastLoss(passes));
        recordDeferredLoss(this.gpu, sink, results, RESULT_LOSS * 4);
      }
      const ready = into
        ? this.gpu.readF32Into(this.grads, b.offset, into.subarray(b.offset, b.offset + b.length))
        : this.gpu.readF32(this.grads, b.offset, b.length);
      // A caller that fails before awaiting every bucket must not leave a rejection unhandled.
      ready.catch(() => {});
      return { offset: b.offset, length: b.length, ready };
    });
  }

  /** The plan's buckets of `bucketBytes`, cut once (grad-buckets.ts), and the steps recorded before each read-back. */
  gradientBuckets(batch: number, bucketBytes = DEFAULT_BUCKET_BYTES): readonly BucketRange[] {
    return this.bucketsOf(this.microPasses(batch)?.p ?? this.plan(batch, 'train'), bucketBytes).ranges;
  }

  private bucketsOf(p: BatchPlan, bucketBytes: number): BucketCut {
    let cut = p.buckets.get(bucketBytes);
    if (cut) return cut;
    const ranges = planBuckets(this.layout, this.flatLength, bucketBytes, (i) =>
      p.plan.gradFinalAfter(this.parameters[i]),
    );
    // The last bucket's piece takes the rest of backward (an input's gradient, say), so the step is recorded whole.
    const ends = ranges.map((b, i) => (i === ranges.length - 1 ? p.backward.length : b.after));
    const pieces = ends.map((end, i) => [
      ...(i === 0 ? [...p.forward, ...p.head, ...p.seed] : []),
      ...p.backward.slice(i === 0 ? 0 : ends[i - 1], end),
    ]);
    const range = (b: BucketRange) => ({ buffer: this.grads, offset: b.offset * 4, size: b.length * 4 });
    const unscales = this.scaler ? ranges.map((b) => this.scaler!.planUnscale(range(b), b.length)) : undefined;
    p.buckets.set(bucketBytes, (cut = { ranges, pieces, unscales }));
    return cut;
  }

  async forwardBackward(
    x: Float32Array,
    labels: ArrayLike<number>,
    batch = (labels?.length ?? 0) / this.positions,
  ): Promise<number> {
    const results = this.recordStep(x, labels, batch);
    const [loss] = await this.gpu.readF32(results, RESULT_LOSS, 1);
    if (!Number.isFinite(loss)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the loss is ${loss}: training diverged or the input holds NaN/Infinity; lower the learning rate or check the data`,
        { loss },
      );
    }
    return loss;
  }

  async predict(x: Float32Array, batch = x.length / this.inputSize): Promise<Float32Array> {
    this.checkBatch('predict', x, batch);
    const p = this.plan(batch, 'eval');
    this.load(p, x);
    recordSteps(this.gpu, p.forward);
    const out = p.plan.value(p.output);
    return this.gpu.readF32(out.buffer, (out.offset ?? 0) / 4, p.rows * this.classes);
  }

  plansFor(batch: number, evaluated: number): (() => void)[] {
    const chunk = () => this.evalChunk(Math.min(MAX_EVAL_CHUNK, evaluated));
    const evaluation =
      evaluated < 1
        ? []
        : [
            () => void this.plan(1, 'eval'),
            () => void this.plan(chunk(), 'eval'),
            () => void (evaluated % chunk() > 0 && this.plan(evaluated % chunk(), 'eval')),
          ];
    return [() => this.planTrainingStep(batch), ...evaluation];
  }

  /** The metrics over `x` in chunks of `chunk` samples (default: as many as the adapter's limits and EVAL_PLAN_BYTES allow, evalChunk). */
  async evaluate(x: Float32Array, labels: ArrayLike<number>, chunk?: number): Promise<EvalResult> {
    const n = labels.length / this.positions;
    this.checkBatch('evaluate', x, n);
    chunk ??= this.evalChunk(Math.min(MAX_EVAL_CHUNK, n));
    // Every chunk's [mean loss, correct] is copied aside as it is computed; one wait reads them all.
    const sink = this.evalSink!;
    await sink.collect(); // nothing should be pending; never mix an earlier call's values in
    const counts: number[] = [];
    for (let start = 0; start < n; start += chunk) {
      const b = Math.min(chunk, n - start);
      const p = this.plan(b, 'eval');
      const rows = b * this.positions;
      const targets: number[] = Array.prototype.slice.call(
        labels,
        start * this.positions,
        start * this.positions + rows,
      );
      // A chunk's inputs are written in queue order, which submits every chunk recorded before it at
      // once; where waits hold the thread (Deno) the last wait would then hold it for the whole
      // evaluation (a worker silent past the server's heartbeats). Submitted in parts instead.
      if (start > 0) await this.gpu.submitRecorded();
      this.load(p, x.subarray(start * this.inputSize, (start + b) * this.inputSize), targets);
      recordSteps(this.gpu, [...p.forward, ...p.head]);
      const encoder = this.gpu.commandEncoder();
      sink.record(encoder, p.results, RESULT_LOSS * 4);
      sink.record(encoder, p.results, RESULT_CORRECT * 4);
      // A chunk's loss is its mean over the targets the loss counts (not −1, the ignore index): weigh it by them.
      counts.push(targets.reduce((k, t) => (t >= 0 ? k + 1 : k), 0));
    }
    const values = await sink.collect();
    let lossSum = 0;
    let correct = 0;
    let counted = 0;
    counts.forEach((here, i) => {
      lossSum += here > 0 ? values[2 * i] * here : 0;
      correct += values[2 * i + 1];
      counted += here;
    });
    return { accuracy: correct / counted, loss: lossSum / counted };
  }

  private checkFlat(what: string, values: Float32Array): void {
    if (!(values instanceof Float32Array) || values.length !== this.flatLength) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: expected a Float32Array of flatLength ${this.flatLength} (layout with padding), got ${values instanceof Float32Array ? values.length : typeof values}`,
        { expected: this.flatLength },
      );
    }
  }

  readParams(): Promise<Float32Array> {
    return this.gpu.readF32(this.params, 0, this.flatLength);
  }

  readParamsInto(offset: number, into: Float32Array): Promise<Float32Array> {
    return this.gpu.readF32Into(this.params, offset, into);
  }

  readGrads(): Promise<Float32Array> {
    return this.gpu.readF32(this.grads, 0, this.flatLength);
  }

  writeParams(values: Float32Array): void {
    this.checkFlat('writeParams', values);
    this.gpu.write(this.params, values);
  }

  writeGrads(values: Float32Array): void {
    this.checkFlat('writeGrads', values);
    this.gpu.write(this.grads, values);
  }

  destroy(): void {
    this.evalSink?.destroy();
    this.evalSink = undefined;
    // Work already recorded (an optimizer step, say) must reach the queue while the buffers live.
    if (this.gpu.alive) this.gpu.flush();
    for (const b of this.owned) b.destroy();
    this.owned.length = 0;
    this.plans.clear();
    this.microGrads = undefined;
  }
}
