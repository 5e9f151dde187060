/**
 * The op interface: what one differentiable operation is. An op lives in its
 * folder (src/nn/ops/<name>/index.ts, with its kernel planning in kernel.ts
 * and its f64 reference in reference.ts) and is four things:
 *
 *   shape   the output shape from the input shapes (a wrong shape throws
 *           ERR_INVALID_ARGUMENT naming the layer path and both shapes);
 *   plan    its forward and backward GPU work, planned ONCE per input shape
 *           against buffers the planner hands it (`PlanContext`): the returned
 *           steps are recorded every training step, so `plan` may create
 *           uniforms and scratch buffers but nothing in the steps may;
 *   cpu     its CPU oracle in f64, forward and backward, which the tests run
 *           against the GPU and against finite differences (gradcheck);
 *   flags   how the planner may fuse or alias it (all optional).
 *
 * Backward contract: `backward` reads `gradOut()` (∂loss/∂output; it may
 * clobber it, nothing reads it afterwards) and OVERWRITES `gradIn(i)` for
 * every input whose `gradIn(i)` is not null. Accumulation when a tensor feeds
 * several ops (residuals, tied weights) is the planner's job, never the op's.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { BufferRange, Dispatch, Gpu } from '../gpu/gpu.ts';
import { type DType, type Shape, shapeText } from './shape.ts';

/** What `shape` learns besides the input shapes. */
export interface ShapeInfo {
  /** The layer path recording the op, for messages. */
  path: string;
  dtypes: readonly DType[];
}

export interface OutSpec {
  shape: Shape;
  dtype?: DType;
}

/** A buffer-to-buffer copy inside the step's command encoder. */
export interface CopyStep {
  copy: { src: BufferRange; dst: BufferRange; bytes: number };
}

/** One recorded piece of work: a kernel dispatch or a copy. */
export type Step = Dispatch | CopyStep;

export function isCopy(s: Step): s is CopyStep {
  return 'copy' in s;
}

export interface PlanContext {
  readonly gpu: Gpu;
  readonly path: string;
  readonly inputShapes: readonly Shape[];
  readonly outputShape: Shape;
  input(i: number): BufferRange;
  output(): BufferRange;
  /** ∂loss/∂output; null when no input needs a gradient (then plan no backward). */
  gradOut(): BufferRange | null;
  /** Where backward writes ∂loss/∂input i (overwrite), or null when input i needs none. */
  gradIn(i: number): BufferRange | null;
  /**
   * A buffer of `words` 4-byte words for the op's own use (saved values, argmax), made once per plan.
   * `within` says that only this op's forward (or backward) steps touch it, or (`saved`) only its forward
   * and its backward, what forward saves for backward and nothing reads after it: a temporary the memory plan
   * may lend to other values at other moments of the step. Without it the buffer is the op's for the
   * whole step and across steps (what forward saves for backward, state kept between steps).
   */
  scratch(words: number, label: string, within?: 'forward' | 'backward' | 'saved'): GPUBuffer;
  /**
   * The one-word flag an f16-mixed kernel sets when a value overflows f16 (dynamic loss scaling reads it
   * to skip the step): the plan's `PlanOptions.f16Mixed.overflow`, or a buffer of the plan's own.
   */
  overflowFlag(): GPUBuffer;
}

export interface OpPlan {
  forward: Step[];
  backward: Step[];
}

export interface CpuOracle<A> {
  forward(inputs: Float64Array[], shapes: Shape[], attrs: A): Float64Array;
  /** ∂loss/∂input i from ∂loss/∂output (null for inputs without a gradient, e.g. indices). */
  backward(
    inputs: Float64Array[],
    shapes: Shape[],
    attrs: A,
    output: Float64Array,
    dOut: Float64Array,
  ): (Float64Array | null)[];
}

export interface Op<A = Record<string, unknown>> {
  readonly name: string;
  shape(inputs: readonly Shape[], attrs: A, info: ShapeInfo): OutSpec;
  plan(ctx: PlanContext, attrs: A): OpPlan;
  readonly cpu: CpuOracle<A>;
  /**
   * Backward turns gradOut into gradIn(0) in place (elementwise ops): the
   * planner makes gradIn(0) the same range as gradOut, copying when needed.
   */
  readonly inPlaceBackward?: boolean;
  /** The output is input 0 reinterpreted (reshape, flatten): no work, storage shared. */
  readonly view?: boolean;
  /** Accepts `attrs.relu = true`: applies ReLU to its own output (an epilogue) and masks gradOut by it. */
  readonly fusesReluAfter?: boolean;
  /**
   * Whether the op computes a node of these input shapes from f16 operands, summing in f32, under
   * --precision f16-mixed: then the planner sets `attrs.f16 = true` before anything is planned (what
   * backward reads may depend on it). Its function, and so its CPU oracle, stay those of f32.
   */
  mixesF16?(gpu: Gpu, inputShapes: readonly Shape[]): boolean;
  /** Accepts `attrs.relu = true`: reads ReLU(input 0) without it being stored (max-pool). */
  readonly fusesReluBefore?: boolean;
  /**
   * Which values backward reads: input indices and whether the output (default: every input and the
   * output). The memory plan keeps a value until the last backward that reads it, and lends its buffer
   * on after its last reader, so an op that needs less than all lets the plan free more.
   */
  backwardReads?(attrs: A): { inputs: readonly number[]; output: boolean };
}

const registry = new Map<string, Op<any>>();

/** Declares an op and registers it by name (the oracle-coverage test walks the registry). */
export function defineOp<A>(op: Op<A>): Op<A> {
  if (registry.has(op.name))
    throw new RingtrainError(ErrorCode.InvalidArgument, `op ${op.name} is defined twice`, { op: op.name });
  registry.set(op.name, op as Op<any>);
  return op;
}

export function registeredOps(): Op<any>[] {
  return [...registry.values()];
}

/** The error a wrong shape raises: names the layer, the op and the shapes involved. */
export function shapeError(
  info: ShapeInfo,
  op: string,
  message: string,
  shapes: Record<string, Shape>,
): RingtrainError {
  const listed = Object.entries(shapes)
    .map(([k, s]) => `${k} ${shapeText(s)}`)
    .join(', ');
  return new RingtrainError(ErrorCode.InvalidArgument, `layer ${info.path} (${op}): ${message} (${listed})`, {
    layer: info.path,
    op,
    shapes: Object.fromEntries(Object.entries(shapes).map(([k, s]) => [k, [...s]])),
  });
}

/** The f32 check most ops need: every input a float tensor. */
export function requireF32(info: ShapeInfo, op: string, shapes: readonly Shape[]): void {
  info.dtypes.forEach((d, i) => {
    if (d !== 'f32') throw shapeError(info, op, `input ${i} must be f32, got ${d}`, { [`input ${i}`]: shapes[i] });
  });
}
