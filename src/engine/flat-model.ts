/**
 * FlatModel: what every model shares, so a model file only says how its
 * layers are wired. It owns the flat parameter and gradient buffers (see
 * model.ts), seeded initialisation, the softmax-cross-entropy head, and one
 * cached plan per batch size (activation buffers, bind groups, uniforms),
 * so that after the first step of a given batch size no GPU buffer is created.
 *
 * A subclass declares its tensors (`ParamDecl[]`) and implements
 * `planLayers(io)`: dispatches from `io.x` to `io.logits` (forward) and from
 * `io.dLogits` into the gradient ranges (backward). Backward must overwrite
 * every gradient element (never accumulate), so grads need no clearing.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { BufferRange, Dispatch, Gpu } from '../gpu/gpu.ts';
import { checkLabels, planSoftmaxXent } from '../gpu/kernels/softmax-xent.ts';
import { planSum } from '../gpu/kernels/reduce.ts';
import { DeferredScalars } from '../gpu/readback.ts';
import { recordDeferredLoss } from './train-step.ts';
import { PARAM_ALIGN, type CnnSpec, type EvalResult, type MlpSpec, type Model, type ModelKind, type ParamEntry } from './model.ts';
import { initTensor, seededNormal, seededUniform, type InitKind } from './random.ts';

export interface ParamDecl {
  name: string;
  shape: number[];
  init: InitKind;
  fanIn: number;
  fanOut: number;
}

/** The buffers a batch plan gives `planLayers`. */
export interface BatchIO {
  batch: number;
  /** batch × inputSize */
  x: GPUBuffer;
  /** batch × classes, written by forward */
  logits: GPUBuffer;
  /** batch × classes, ∂(mean loss)/∂logits, read by backward */
  dLogits: GPUBuffer;
}

export interface LayerPlan {
  forward: Dispatch[];
  backward: Dispatch[];
}

interface BatchPlan {
  io: BatchIO;
  labels: GPUBuffer;
  labelScratch: Uint32Array;
  /** [mean loss, correct count] */
  results: GPUBuffer;
  forward: Dispatch[];
  head: Dispatch[];
  backward: Dispatch[];
}

export function buildLayout(decls: ParamDecl[]): { layout: ParamEntry[]; paramCount: number; flatLength: number } {
  const layout: ParamEntry[] = [];
  const names = new Set<string>();
  let offset = 0;
  let paramCount = 0;
  for (const d of decls) {
    if (names.has(d.name)) throw new RingtrainError(ErrorCode.InvalidArgument, `duplicate parameter name ${d.name}`);
    names.add(d.name);
    const length = d.shape.reduce((a, b) => a * b, 1);
    layout.push({ name: d.name, shape: [...d.shape], offset, length });
    paramCount += length;
    offset += Math.ceil(length / PARAM_ALIGN) * PARAM_ALIGN;
  }
  return { layout, paramCount, flatLength: Math.max(offset, PARAM_ALIGN) };
}

export abstract class FlatModel implements Model {
  readonly layout: readonly ParamEntry[];
  get identity() {
    const { kind, ...options } = this.spec;
    return { name: kind, options };
  }
  get layoutHash(): string {
    return '';
  }
  readonly paramCount: number;
  readonly flatLength: number;
  readonly params: GPUBuffer;
  readonly grads: GPUBuffer;
  private readonly byName = new Map<string, ParamEntry>();
  private readonly plans = new Map<number, BatchPlan>();
  private readonly owned: GPUBuffer[] = [];
  /** Gathers evaluate()'s per-chunk results, so an evaluation waits for the GPU once. */
  private readonly evalSink: DeferredScalars;

  constructor(
    readonly gpu: Gpu,
    readonly kind: ModelKind,
    readonly spec: Required<MlpSpec> | Required<CnnSpec>,
    readonly inputSize: number,
    readonly classes: number,
    decls: ParamDecl[],
    seed: number,
  ) {
    const { layout, paramCount, flatLength } = buildLayout(decls);
    this.layout = layout;
    this.paramCount = paramCount;
    this.flatLength = flatLength;
    for (const e of layout) this.byName.set(e.name, e);
    const init = new Float32Array(flatLength);
    const rand = { uniform: seededUniform(seed), normal: seededNormal(seed ^ 0x9e3779b9) };
    decls.forEach((d, i) => initTensor(init.subarray(layout[i].offset, layout[i].offset + layout[i].length), d.init, d.fanIn, d.fanOut, rand));
    this.params = this.own(gpu.upload(init, `${kind}-params`));
    this.grads = this.own(gpu.storage(flatLength, `${kind}-grads`));
    this.evalSink = new DeferredScalars(gpu, 16);
  }

  /** Registers a buffer the model frees in destroy(). */
  protected own(buffer: GPUBuffer): GPUBuffer {
    this.owned.push(buffer);
    return buffer;
  }

  protected entry(name: string): ParamEntry {
    const e = this.byName.get(name);
    if (!e) throw new RingtrainError(ErrorCode.InvalidArgument, `model has no parameter ${name}`, { names: [...this.byName.keys()] });
    return e;
  }

  /** The byte range of parameter `name` in `params`. */
  protected param(name: string): BufferRange {
    const e = this.entry(name);
    return { buffer: this.params, offset: e.offset * 4, size: e.length * 4 };
  }

  /** The byte range of the gradient of `name` in `grads`. */
  protected grad(name: string): BufferRange {
    const e = this.entry(name);
    return { buffer: this.grads, offset: e.offset * 4, size: e.length * 4 };
  }

  /** A scratch buffer for one batch plan (allocated once per batch size). */
  protected scratch(floats: number, label: string): GPUBuffer {
    return this.own(this.gpu.storage(floats, label));
  }

  protected abstract planLayers(io: BatchIO): LayerPlan;

  private plan(batch: number): BatchPlan {
    let p = this.plans.get(batch);
    if (p) return p;
    const io: BatchIO = {
      batch,
      x: this.scratch(batch * this.inputSize, 'x'),
      logits: this.scratch(batch * this.classes, 'logits'),
      dLogits: this.scratch(batch * this.classes, 'dlogits'),
    };
    const labels = this.scratch(batch, 'labels');
    const lossRows = this.scratch(batch, 'loss-rows');
    const correct = this.scratch(batch, 'correct');
    const results = this.scratch(4, 'results');
    const layers = this.planLayers(io);
    const head = [
      planSoftmaxXent(this.gpu, { logits: io.logits, labels, dLogits: io.dLogits, lossRows, correct }, batch, this.classes),
      planSum(this.gpu, lossRows, results, batch, { outIndex: 0, scale: 1 / batch }),
      planSum(this.gpu, correct, results, batch, { outIndex: 1 }),
    ];
    p = { io, labels, labelScratch: new Uint32Array(batch), results, forward: layers.forward, head, backward: layers.backward };
    this.plans.set(batch, p);
    return p;
  }

  private checkBatch(what: string, x: Float32Array, batch: number): void {
    if (!(x instanceof Float32Array)) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: x must be a Float32Array of batch×${this.inputSize} floats`);
    }
    if (!Number.isInteger(batch) || batch < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: batch must be a positive integer, got ${batch}`, { batch });
    }
    if (x.length !== batch * this.inputSize) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: x has ${x.length} floats but batch ${batch} × inputSize ${this.inputSize} = ${batch * this.inputSize}; pass [batch, ${this.inputSize}] row-major`,
        { got: x.length, batch, inputSize: this.inputSize },
      );
    }
  }

  private load(p: BatchPlan, x: Float32Array, labels?: ArrayLike<number>): void {
    // GPUs swallow NaN silently (max(NaN, 0) is 0 on most), so catch it here.
    for (let i = 0; i < x.length; i++) {
      if (!Number.isFinite(x[i])) {
        const sample = Math.floor(i / this.inputSize);
        throw new RingtrainError(ErrorCode.InvalidArgument, `input x[${i}] (sample ${sample}, feature ${i % this.inputSize}) is ${x[i]}; inputs must be finite numbers: check the data`, { index: i, sample });
      }
    }
    this.gpu.write(p.io.x, x);
    if (labels) this.gpu.write(p.labels, checkLabels(labels, p.io.batch, this.classes, p.labelScratch));
  }

  /** Uploads the batch and records forward, head and backward; returns the buffer holding the mean loss at byte 0. */
  private recordStep(what: string, x: Float32Array, labels: ArrayLike<number>, batch: number): GPUBuffer {
    this.checkBatch(what, x, batch);
    if (labels.length !== batch) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: ${labels.length} labels for batch ${batch}`, { labels: labels.length, batch });
    }
    const p = this.plan(batch);
    this.load(p, x, labels);
    this.gpu.record([...p.forward, ...p.head, ...p.backward]);
    return p.results;
  }

  forwardBackwardDeferred(x: Float32Array, labels: ArrayLike<number>, batch = labels?.length, sink: DeferredScalars): void {
    recordDeferredLoss(this.gpu, sink, this.recordStep('forwardBackward', x, labels, batch), 0);
  }

  async forwardBackward(x: Float32Array, labels: ArrayLike<number>, batch = labels?.length): Promise<number> {
    const results = this.recordStep('forwardBackward', x, labels, batch);
    const [loss] = await this.gpu.readF32(results, 0, 1);
    if (!Number.isFinite(loss)) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `the loss is ${loss}: training diverged or the input holds NaN/Infinity; lower the learning rate or check the data`, { loss });
    }
    return loss;
  }

  async predict(x: Float32Array, batch = x.length / this.inputSize): Promise<Float32Array> {
    this.checkBatch('predict', x, batch);
    const p = this.plan(batch);
    this.load(p, x);
    this.gpu.record(p.forward);
    return this.gpu.readF32(p.io.logits, 0, batch * this.classes);
  }

  async evaluate(x: Float32Array, labels: ArrayLike<number>, chunk = 500): Promise<EvalResult> {
    const n = labels.length;
    this.checkBatch('evaluate', x, n);
    // Every chunk's [mean loss, correct] is copied aside as it is computed; one wait reads them all.
    const sink = this.evalSink;
    await sink.collect(); // nothing should be pending; never mix an earlier call's values in
    const sizes: number[] = [];
    for (let start = 0; start < n; start += chunk) {
      const b = Math.min(chunk, n - start);
      const p = this.plan(b);
      this.load(p, x.subarray(start * this.inputSize, (start + b) * this.inputSize), Array.prototype.slice.call(labels, start, start + b));
      this.gpu.record([...p.forward, ...p.head]);
      const encoder = this.gpu.commandEncoder();
      sink.record(encoder, p.results, 0);
      sink.record(encoder, p.results, 4);
      sizes.push(b);
    }
    const values = await sink.collect();
    let lossSum = 0;
    let correct = 0;
    sizes.forEach((b, i) => {
      lossSum += values[2 * i] * b;
      correct += values[2 * i + 1];
    });
    return { accuracy: correct / n, loss: lossSum / n };
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
    // Work already recorded (an optimizer step, say) must reach the queue while the buffers live.
    if (this.gpu.alive) this.gpu.flush();
    this.evalSink.destroy();
    for (const b of this.owned) b.destroy();
    this.owned.length = 0;
    this.plans.clear();
  }
}
