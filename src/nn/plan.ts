/**
 * Compiles a recorded graph into a plan: every buffer made once, every
 * dispatch planned once, so a training step only records the plan's steps
 * (no buffer creation, no read-back between ops).
 *
 * Four passes:
 *   1. fusion: a ReLU whose input (or output) has no other user is folded
 *      into its neighbour when the neighbour's op says it can (`fusesReluAfter`: a linear's epilogue;
 *      `fusesReluBefore`: a max-pool reading relu(x)), saving a pass over the
 *      activation forward and backward;
 *   2. storage: one buffer per value (views share their input's), parameters
 *      are ranges of the model's flat `params`/`grads` buffers;
 *   3. gradients: reverse-mode over the nodes in reverse order. Each op
 *      overwrites its input gradients; when a tensor feeds several ops the
 *      first writer (in backward order) overwrites its gradient buffer and
 *      every later one writes a temporary that is added in (`planAdd`);
 *      elementwise ops that work in place get their input gradient aliased to
 *      their output gradient when nothing else writes it;
 *   4. planning: each op's `plan` against those buffers.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { BufferRange, Dispatch, Gpu } from '../gpu/gpu.ts';
import { planAdd } from '../gpu/kernels/elementwise.ts';
import { isCopy, type PlanContext, type Step } from './op.ts';
import { type Node, type Parameter, shapeText, type Tensor } from './tensor.ts';

/** Where a parameter's value and gradient live: the model's flat buffers and its layout entry. */
export interface ParamStore {
  params: GPUBuffer;
  grads: GPUBuffer;
  /** The parameter's offset and length in floats. */
  entry(p: Parameter): { offset: number; length: number };
}

interface Storage {
  value: BufferRange;
  grad: BufferRange | null;
  words: number;
  /** How many backward writes target this storage's gradient (the seed of an output counts). */
  writers: number;
  /** How many have been planned so far. */
  written: number;
  /** Backward steps planned when the last write so far had been planned (0: none yet). */
  lastWrite: number;
  base: Tensor;
  /** What the buffers are named after: the layer and op that compute the value (or the input, or the parameter). */
  label: string;
}

export interface Plan {
  forward: Step[];
  backward: Step[];
  value(t: Tensor): BufferRange;
  /** The gradient buffer of `t` (null when it needs none). For outputs, the caller seeds it before `backward`. */
  grad(t: Tensor): BufferRange | null;
  /** Buffers the plan made (the caller frees them). */
  buffers: GPUBuffer[];
  /** The nodes after fusion (for tests and the CPU executor). */
  nodes: Node[];
  /**
   * How many of `backward`'s steps must have run before `p`'s gradient is final (0: backward never
   * writes it). A parameter used twice (tied weights) is final only after its last writer's add:
   * what lets a model read a layer's gradients while the layers before it still compute.
   */
  gradFinalAfter(p: Parameter): number;
}

function whole(buffer: GPUBuffer, words: number): BufferRange {
  return { buffer, offset: 0, size: words * 4 };
}

/** Pass 1: folds single-use ReLUs into their neighbours. Returns the new node list and a tensor→tensor alias map. */
function fuse(graph: Node[], outputs: Tensor[]): { nodes: Node[]; alias: Map<Tensor, Tensor> } {
  const alias = new Map<Tensor, Tensor>();
  const resolve = (t: Tensor): Tensor => alias.get(t) ?? t;
  let nodes = graph.map((n) => ({ ...n, inputs: [...n.inputs], attrs: { ...n.attrs } }));
  const uses = (): Map<Tensor, number> => {
    const u = new Map<Tensor, number>();
    for (const n of nodes) for (const t of n.inputs) u.set(resolve(t), (u.get(resolve(t)) ?? 0) + 1);
    for (const t of outputs) u.set(resolve(t), (u.get(resolve(t)) ?? 0) + 1);
    return u;
  };
  // relu after an op with an epilogue: op(…) then relu → op(…, relu) (the relu's output is the op's).
  let count = uses();
  const byOutput = new Map(nodes.map((n) => [n.output, n]));
  nodes = nodes.filter((n) => {
    if (n.op.name !== 'relu') return true;
    const src = resolve(n.inputs[0]);
    const producer = byOutput.get(src);
    if (!producer || !producer.op.fusesReluAfter || producer.attrs.relu || count.get(src) !== 1) return true;
    producer.attrs.relu = true;
    alias.set(n.output, src);
    return false;
  });
  // relu before an op that reads relu(x) itself: relu then op → op(x, relu).
  count = uses();
  const dropped = new Set<Node>();
  for (const n of nodes) {
    n.inputs = n.inputs.map(resolve);
    if (!n.op.fusesReluBefore || n.attrs.relu) continue;
    const r = nodes.find((m) => m.output === n.inputs[0] && m.op.name === 'relu' && !dropped.has(m));
    if (!r || count.get(r.output) !== 1) continue;
    n.inputs[0] = r.inputs[0];
    n.attrs.relu = true;
    dropped.add(r);
  }
  return { nodes: nodes.filter((n) => !dropped.has(n)), alias };
}

export interface PlanOptions {
  /**
   * Plan backward too (default true). False plans the forward alone: no tensor needs a gradient,
   * so no gradient buffer is made and `backward` is empty (an evaluation's or a prediction's plan).
   */
  gradients?: boolean;
}

export function compilePlan(
  gpu: Gpu,
  graphNodes: Node[],
  outputs: Tensor[],
  params: ParamStore,
  options: PlanOptions = {},
): Plan {
  const gradients = options.gradients !== false;
  const { nodes, alias } = fuse(graphNodes, outputs);
  const resolve = (t: Tensor): Tensor => alias.get(t) ?? t;
  const buffers: GPUBuffer[] = [];
  const alloc = (words: number, label: string): GPUBuffer => {
    const b = withAdvice(() => gpu.storage(words, label), `${label} (${words} floats)`);
    buffers.push(b);
    return b;
  };

  // Pass 2: storage and which tensors need a gradient.
  const storage = new Map<Tensor, Storage>();
  const needsGrad = new Set<Tensor>();
  for (const n of nodes) {
    for (const t of n.inputs) {
      if (storage.has(t)) continue;
      if (t.kind === 'param' && t.param) {
        const e = params.entry(t.param);
        storage.set(t, {
          value: { buffer: params.params, offset: e.offset * 4, size: e.length * 4 },
          grad: { buffer: params.grads, offset: e.offset * 4, size: e.length * 4 },
          words: e.length,
          writers: 0,
          written: 0,
          lastWrite: 0,
          base: t,
          label: t.param.name,
        });
        if (gradients) needsGrad.add(t);
      } else if (t.kind === 'input') {
        storage.set(t, {
          value: whole(alloc(t.size, `input${t.id}`), t.size),
          grad: null,
          words: t.size,
          writers: 0,
          written: 0,
          lastWrite: 0,
          base: t,
          label: `input${t.id}`,
        });
        if (t.inputGrad && gradients) needsGrad.add(t);
      } else if (!storage.has(t)) {
        throw new RingtrainError(ErrorCode.InvalidArgument, `internal: tensor ${t} is used before it is computed`, {
          tensor: String(t),
        });
      }
    }
    const out = n.output;
    if (n.inputs.some((t) => needsGrad.has(t) && t.dtype === 'f32')) needsGrad.add(out);
    if (n.op.view) storage.set(out, storage.get(n.inputs[0])!);
    else
      storage.set(out, {
        value: whole(alloc(out.size, `${n.path}/${n.op.name}`), out.size),
        grad: null,
        words: out.size,
        writers: 0,
        written: 0,
        lastWrite: 0,
        base: out,
        label: `${n.path}/${n.op.name}`,
      });
  }
  for (const t of outputs.map(resolve)) {
    if (!storage.has(t))
      throw new RingtrainError(ErrorCode.InvalidArgument, `the model's output ${t} is not computed by its forward`, {
        tensor: String(t),
      });
  }

  // Pass 3: who writes each gradient, and where.
  const diffInputs = (n: Node) =>
    n.inputs.map((t, i) => [t, i] as const).filter(([t]) => needsGrad.has(t) && t.dtype === 'f32' && !n.op.view);
  for (const t of outputs.map(resolve)) if (needsGrad.has(t)) storage.get(t)!.writers++;
  for (const n of nodes) for (const [t] of diffInputs(n)) storage.get(t)!.writers++;
  const gradOf = (s: Storage): BufferRange => (s.grad ??= whole(alloc(s.words, `${s.label}:grad`), s.words));
  // In reverse order, so chains of in-place ops share one gradient buffer.
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i];
    if (!n.op.inPlaceBackward || !needsGrad.has(n.output)) continue;
    const src = storage.get(n.inputs[0])!;
    const out = storage.get(n.output)!;
    if (
      needsGrad.has(n.inputs[0]) &&
      src.writers === 1 &&
      src.grad === null &&
      src.base.kind === 'value' &&
      src.words === out.words
    )
      src.grad = gradOf(out);
  }
  for (const t of outputs.map(resolve)) if (needsGrad.has(t)) gradOf(storage.get(t)!);

  // Pass 4: plan every op.
  const context = (n: Node, gradIn: (BufferRange | null)[], gradOut: BufferRange | null): PlanContext => ({
    gpu,
    path: n.path,
    inputShapes: n.inputs.map((t) => t.shape),
    outputShape: n.output.shape,
    input: (i) => storage.get(n.inputs[i])!.value,
    output: () => storage.get(n.output)!.value,
    gradOut: () => gradOut,
    gradIn: (i) => gradIn[i] ?? null,
    scratch: (words, label) => alloc(words, `${n.path}/${n.op.name}/${label}`),
  });

  // In backward order, so "first writer" means first to run; each op is planned once (forward and backward together).
  const backward: Step[] = [];
  const forwardOf = new Map<Node, Step[]>();
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i];
    const outStore = storage.get(n.output)!;
    const gradOut = needsGrad.has(n.output) && !n.op.view ? gradOf(outStore) : null;
    const gradIn: (BufferRange | null)[] = n.inputs.map(() => null);
    const adds: Step[] = [];
    const pre: Step[] = [];
    const writes: Storage[] = [];
    for (const [t, k] of gradOut ? diffInputs(n) : []) {
      const s = storage.get(t)!;
      writes.push(s);
      const first = s.written++ === 0;
      const target = first ? gradOf(s) : whole(alloc(s.words, `${s.label}:grad-part`), s.words);
      if (!first) adds.push(...planAdd(gpu, target, gradOf(s), s.words));
      gradIn[k] = target;
    }
    let effectiveOut = gradOut;
    if (n.op.inPlaceBackward && gradOut && gradIn[0]) {
      // The op turns its gradOut into gradIn(0) in place: make them one buffer.
      const target = gradIn[0];
      if (target.buffer !== gradOut.buffer || target.offset !== gradOut.offset)
        pre.push({ copy: { src: gradOut, dst: target, bytes: outStore.words * 4 } });
      effectiveOut = target;
    }
    const planned = withAdvice(() => n.op.plan(context(n, gradIn, effectiveOut), n.attrs), describeNode(n), n);
    forwardOf.set(n, planned.forward);
    backward.push(...pre, ...planned.backward, ...adds);
    // The node's own steps (and its adds) finish each gradient it writes: an earlier node's writes are final only after
    // it.
    for (const s of writes) s.lastWrite = backward.length;
  }
  // Views of a parameter share its storage, so its gradient's writers are all counted on one.
  const finalAfter = new Map<Parameter, number>();
  for (const s of storage.values()) {
    const p = s.base.kind === 'param' ? s.base.param : undefined;
    if (p) finalAfter.set(p, Math.max(finalAfter.get(p) ?? 0, s.lastWrite));
  }
  const forward = nodes.flatMap((n) => forwardOf.get(n)!);

  return {
    forward,
    backward,
    value: (t) => {
      const s = storage.get(resolve(t));
      if (!s)
        throw new RingtrainError(ErrorCode.InvalidArgument, `tensor ${t} is not part of this plan`, {
          tensor: String(t),
        });
      return s.value;
    },
    grad: (t) => (needsGrad.has(resolve(t)) ? storage.get(resolve(t))!.grad : null),
    buffers,
    nodes,
    gradFinalAfter: (p) => finalAfter.get(p) ?? 0,
  };
}

function describeNode(n: Node): string {
  return `${n.path} (${n.op.name} of ${n.inputs.map((t) => shapeText(t.shape)).join(', ')})`;
}

/**
 * Runs `make`, turning a refusal for size (a buffer past maxBufferSize, a binding past
 * maxStorageBufferBindingSize) into one that names where in the model it happened and the change
 * that helps: a parameter only shrinks with the layer, anything else with the batch and context.
 */
function withAdvice<T>(make: () => T, where: string, node?: Node): T {
  try {
    return make();
  } catch (err) {
    const d = err instanceof RingtrainError ? err.detail : undefined;
    if (!(err instanceof RingtrainError) || !d || typeof d.size !== 'number' || typeof d.max !== 'number' || d.where)
      throw err;
    const param = node?.inputs.find((t) => t.kind === 'param' && t.size * 4 === d.size);
    const advice = param
      ? `that is the parameter ${param.param?.name || 'of this layer'} ${shapeText(param.shape)}, which cannot be split finer here: make the layer smaller, or use an adapter whose maxStorageBufferBindingSize holds it`
      : 'it grows with the batch and the context: use a smaller --batch or --context';
    throw new RingtrainError(err.code, `${where}: ${err.message}; ${advice}`, { ...d, where }, { cause: err });
  }
}

/** Records steps into the Gpu's open encoder: dispatches into its compute pass, copies between passes. */
export function recordSteps(gpu: Gpu, steps: Step[]): void {
  let run: Dispatch[] = [];
  const flushRun = () => {
    if (run.length) gpu.record(run);
    run = [];
  };
  for (const s of steps) {
    if (!isCopy(s)) {
      run.push(s);
      continue;
    }
    flushRun();
    gpu.copy(s.copy.src.buffer, s.copy.src.offset ?? 0, s.copy.dst.buffer, s.copy.dst.offset ?? 0, s.copy.bytes);
  }
  flushRun();
}
