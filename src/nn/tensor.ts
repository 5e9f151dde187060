/**
 * Symbolic tensors and the graph a model's forward records.
 *
 * A model's `forward` never touches data: it runs once per input shape on
 * symbolic `Tensor`s, and every op it calls appends a `Node` (the op, its
 * inputs, its attributes, the layer path that called it) to the inputs'
 * `Graph`. The graph is then compiled into a plan (plan.ts): buffers and
 * dispatches made once, recorded every step.
 *
 * A `Parameter` belongs to a module, not to a graph: a graph binds each
 * parameter it meets to one tensor (`graph.param(p)`), whose storage is the
 * parameter's range of the model's flat buffer.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Op } from './op.ts';
import { type DType, type Shape, shapeText, sizeOf } from './shape.ts';

export { type DType, type Shape, shapeText, sizeOf };

/** How a parameter's first values are drawn: fills `out` from the model's seeded streams. */
export type ParamInit = (out: Float32Array, rand: { uniform: () => number; normal: () => number }) => void;

export class Parameter {
  /** The state-dict name, set when the model names its module tree. */
  name = '';
  constructor(
    readonly shape: Shape,
    readonly init: ParamInit,
  ) {
    for (const d of shape) {
      if (!Number.isInteger(d) || d < 1) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `a parameter's dimensions must be positive integers, got ${shapeText(shape)}`,
          { shape: [...shape] },
        );
      }
    }
  }
}

export type TensorKind = 'input' | 'param' | 'value';

export class Tensor {
  constructor(
    readonly graph: Graph,
    readonly id: number,
    readonly shape: Shape,
    readonly dtype: DType,
    readonly kind: TensorKind,
    /** The node that computes it (null for inputs and parameters). */
    readonly producer: Node | null,
    /** The parameter it stands for (kind 'param'). */
    readonly param: Parameter | null = null,
    /** Inputs only: whether the plan computes a gradient for it (op tests do; model inputs do not). */
    readonly inputGrad = false,
  ) {}

  get size(): number {
    return sizeOf(this.shape);
  }

  toString(): string {
    return `${this.kind}#${this.id}${shapeText(this.shape)}`;
  }
}

export interface Node {
  op: Op<any>;
  inputs: Tensor[];
  attrs: Record<string, unknown>;
  output: Tensor;
  /** The layer path that recorded it (`blocks.0.attn`), for error messages. */
  path: string;
}

export class Graph {
  readonly nodes: Node[] = [];
  readonly inputs: Tensor[] = [];
  private readonly params = new Map<Parameter, Tensor>();
  private nextId = 0;
  /** Layer paths of the module calls in progress (innermost last). */
  private readonly paths: string[] = [];

  input(shape: Shape, options: { dtype?: DType; requiresGrad?: boolean } = {}): Tensor {
    const t = new Tensor(
      this,
      this.nextId++,
      [...shape],
      options.dtype ?? 'f32',
      'input',
      null,
      null,
      options.requiresGrad ?? false,
    );
    this.inputs.push(t);
    return t;
  }

  param(p: Parameter): Tensor {
    let t = this.params.get(p);
    if (!t) {
      t = new Tensor(this, this.nextId++, p.shape, 'f32', 'param', null, p);
      this.params.set(p, t);
    }
    return t;
  }

  get paramTensors(): Tensor[] {
    return [...this.params.values()];
  }

  get path(): string {
    return this.paths.length ? this.paths[this.paths.length - 1] : '(model)';
  }

  /** Runs `body` with `path` as the current layer path (Module.call uses it). */
  within<T>(path: string, body: () => T): T {
    this.paths.push(path);
    try {
      return body();
    } finally {
      this.paths.pop();
    }
  }

  /** Appends a node: checks the inputs' shapes through the op and returns its output tensor. */
  record<A extends Record<string, unknown>>(op: Op<A>, inputs: (Tensor | Parameter)[], attrs: A): Tensor {
    const resolved = inputs.map((x) => (x instanceof Parameter ? this.param(x) : x));
    for (const t of resolved) {
      if (!(t instanceof Tensor) || t.graph !== this) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `${this.path}: ${op.name} was given something that is not a tensor of this model's forward (${String(t)}); pass tensors that forward received or computed`,
          { op: op.name, path: this.path },
        );
      }
    }
    const path = this.path;
    const out = op.shape(
      resolved.map((t) => t.shape),
      attrs,
      { path, dtypes: resolved.map((t) => t.dtype) },
    );
    const node: Node = { op, inputs: resolved, attrs, output: null as unknown as Tensor, path };
    node.output = new Tensor(this, this.nextId++, out.shape, out.dtype ?? 'f32', 'value', node);
    this.nodes.push(node);
    return node.output;
  }
}

/** Applies `op` to tensors (and parameters), recording it on the first tensor's graph. */
export function apply<A extends Record<string, unknown>>(op: Op<A>, inputs: (Tensor | Parameter)[], attrs: A): Tensor {
  const first = inputs.find((x): x is Tensor => x instanceof Tensor);
  if (!first)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${op.name} needs at least one tensor input (parameters alone have no graph)`,
      { op: op.name },
    );
  return first.graph.record(op, inputs, attrs);
}
