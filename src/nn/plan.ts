/**
 * Compiles a recorded graph into a plan: every buffer made once, every
 * dispatch planned once, so a training step only records the plan's steps
 * (no buffer creation, no read-back between ops).
 *
 * Passes:
 *   1. fusion: a ReLU whose input (or output) has no other user is folded
 *      into its neighbour when the neighbour's op says it can (`fusesReluAfter`: a linear's epilogue;
 *      `fusesReluBefore`: a max-pool reading relu(x)), saving a pass over the
 *      activation forward and backward;
 *   2. storage: one storage per value (views share their input's), parameters
 *      are ranges of the model's flat `params`/`grads` buffers;
 *   3. gradients: reverse-mode over the nodes in reverse order. Each op
 *      overwrites its input gradients; when a tensor feeds several ops the
 *      first writer (in backward order) overwrites its gradient buffer and
 *      every later one writes a temporary that is added in (`planAdd`);
 *      elementwise ops that work in place get their input gradient aliased to
 *      their output gradient when nothing else writes it;
 *   4. memory (memory-plan.ts): when each value and gradient is written and last
 *      read in the step, and buffers shared by those whose spans do not meet;
 *   5. planning: each op's `plan` against those buffers, its temporaries
 *      (`scratch(…, within)`, the gradient parts) lent the same way.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { BufferRange, Dispatch, Gpu } from '../gpu/gpu.ts';
import { planAdd } from '../gpu/kernels/elementwise.ts';
import { isCopy, type PlanContext, type Step } from './op.ts';
import {
  BufferReuse,
  extend,
  type GradSlot,
  type Life,
  readByBackward,
  type Storage,
  Timeline,
} from './memory-plan.ts';
import { type Node, type Parameter, shapeText, type Tensor } from './tensor.ts';
import { chooseSpills, planSpills, type Spill, spillSpans, spillWords } from './f16-spill.ts';

/** Where a parameter's value and gradient live: the model's flat buffers and its layout entry. */
export interface ParamStore {
  params: GPUBuffer;
  grads: GPUBuffer;
  /** The parameter's offset and length in floats. */
  entry(p: Parameter): { offset: number; length: number };
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
  /**
   * --precision f16-mixed: every op that `mixesF16` computes with f16 operands (its `attrs.f16` set), and
   * raises `overflow` (one word, zeroed by the caller before each step) where a value passes f16's range.
   */
  f16Mixed?: { overflow: GPUBuffer };
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
  if (options.f16Mixed) markF16(gpu, nodes);
  const resolve = (t: Tensor): Tensor => alias.get(t) ?? t;
  const outs = outputs.map(resolve);
  const buffers: GPUBuffer[] = [];
  const reuse = new BufferReuse((words, label) => {
    const b = withAdvice(() => gpu.storage(words, label), `${label} (${words} floats)`);
    buffers.push(b);
    return b;
  });
  const time = new Timeline(nodes.length);
  const { storage, needsGrad } = storagePass(nodes, outs, params, gradients);
  gradientPass(nodes, outs, storage, needsGrad);
  lifetimes(nodes, outs, storage, needsGrad, time);
  // f16-mixed training keeps what backward reads as f16 through the middle of the step (f16-spill.ts).
  const spills =
    options.f16Mixed && gradients ? chooseSpills(gpu, new Set(storage.values()), time) : new Map<Storage, Spill>();
  assignBuffers(storage, reuse, time, spills);
  let ownFlag: GPUBuffer | undefined;
  const overflowFlag = (): GPUBuffer => {
    if (options.f16Mixed) return options.f16Mixed.overflow;
    if (!ownFlag) buffers.push((ownFlag = gpu.storage(1, 'overflow-flag')));
    return ownFlag;
  };
  const moves = planSpills(gpu, spills.values(), time, options.f16Mixed?.overflow);
  const { forward, backward } = planOps(gpu, nodes, { storage, needsGrad, reuse, time, overflowFlag }, moves);
  // Views of a parameter share its storage, so its gradient's writers are all counted on one.
  const finalAfter = new Map<Parameter, number>();
  for (const s of storage.values()) {
    const p = s.base.kind === 'param' ? s.base.param : undefined;
    if (p) finalAfter.set(p, Math.max(finalAfter.get(p) ?? 0, s.lastWrite));
  }
  return {
    forward,
    backward,
    value: (t) => {
      const s = storage.get(resolve(t));
      if (!s)
        throw new RingtrainError(ErrorCode.InvalidArgument, `tensor ${t} is not part of this plan`, {
          tensor: String(t),
        });
      return s.value!;
    },
    grad: (t) => (needsGrad.has(resolve(t)) ? (storage.get(resolve(t))!.grad?.range ?? null) : null),
    buffers,
    nodes,
    gradFinalAfter: (p) => finalAfter.get(p) ?? 0,
  };
}

/** Under f16-mixed: the nodes whose op computes them from f16 operands at their shapes (`Op.mixesF16`). */
function markF16(gpu: Gpu, nodes: Node[]): void {
  for (const n of nodes) {
    const shapes = n.inputs.map((t) => t.shape);
    if (n.op.mixesF16?.(gpu, shapes)) n.attrs.f16 = true;
  }
}

function fresh(base: Tensor, label: string, value: BufferRange | null, words = base.size): Storage {
  return {
    ...{ value, grad: null, words, writers: 0, written: 0, lastWrite: 0, base, label, life: null },
    ...{ lastForward: -1, firstBackward: Infinity },
  };
}

/** Pass 2: a storage per tensor (views share their input's) and which tensors need a gradient. */
function storagePass(
  nodes: Node[],
  outs: Tensor[],
  params: ParamStore,
  gradients: boolean,
): { storage: Map<Tensor, Storage>; needsGrad: Set<Tensor> } {
  const storage = new Map<Tensor, Storage>();
  const needsGrad = new Set<Tensor>();
  for (const n of nodes) {
    for (const t of n.inputs) {
      if (storage.has(t)) continue;
      if (t.kind === 'param' && t.param) {
        const e = params.entry(t.param);
        const range = (buffer: GPUBuffer) => ({ buffer, offset: e.offset * 4, size: e.length * 4 });
        const s = fresh(t, t.param.name, range(params.params), e.length);
        s.grad = { words: e.length, label: t.param.name, range: range(params.grads), life: null };
        storage.set(t, s);
        if (gradients) needsGrad.add(t);
      } else if (t.kind === 'input') {
        storage.set(t, fresh(t, `input${t.id}`, null));
        if (t.inputGrad && gradients) needsGrad.add(t);
      } else {
        throw new RingtrainError(ErrorCode.InvalidArgument, `internal: tensor ${t} is used before it is computed`, {
          tensor: String(t),
        });
      }
    }
    const out = n.output;
    if (n.inputs.some((t) => needsGrad.has(t) && t.dtype === 'f32')) needsGrad.add(out);
    storage.set(out, n.op.view ? storage.get(n.inputs[0])! : fresh(out, `${n.path}/${n.op.name}`, null));
  }
  for (const t of outs) {
    if (!storage.has(t))
      throw new RingtrainError(ErrorCode.InvalidArgument, `the model's output ${t} is not computed by its forward`, {
        tensor: String(t),
      });
  }
  return { storage, needsGrad };
}

/** The inputs of `n` whose gradient its backward writes, with their indices. */
function diffInputs(n: Node, needsGrad: Set<Tensor>): (readonly [Tensor, number])[] {
  return n.inputs.map((t, i) => [t, i] as const).filter(([t]) => needsGrad.has(t) && t.dtype === 'f32' && !n.op.view);
}

/** Pass 3: how many writes each gradient takes, a gradient slot per storage, in-place chains sharing one. */
function gradientPass(nodes: Node[], outs: Tensor[], storage: Map<Tensor, Storage>, needsGrad: Set<Tensor>): void {
  for (const t of outs) if (needsGrad.has(t)) storage.get(t)!.writers++;
  for (const n of nodes) for (const [t] of diffInputs(n, needsGrad)) storage.get(t)!.writers++;
  for (const s of new Set(storage.values()))
    if (s.base.kind !== 'param' && needsGrad.has(s.base))
      s.grad = { words: s.words, label: `${s.label}:grad`, range: null, life: null };
  // In reverse order, so chains of in-place ops share one gradient buffer.
  const aliased = new Set<Storage>();
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i];
    if (!n.op.inPlaceBackward || !needsGrad.has(n.output)) continue;
    const src = storage.get(n.inputs[0])!;
    const out = storage.get(n.output)!;
    if (
      needsGrad.has(n.inputs[0]) &&
      src.writers === 1 &&
      !aliased.has(src) &&
      src.base.kind === 'value' &&
      src.words === out.words
    ) {
      src.grad = out.grad;
      aliased.add(src);
    }
  }
}

/**
 * Pass 4a: when each value and gradient is needed. A value from its forward to its last reader
 * (a later forward, or a backward that reads it: `readByBackward`); a gradient from its first
 * writer's backward to its producer's backward. What the caller touches outside the step, and a
 * gradient nothing writes (read as the zeros it was made with), get the whole step.
 */
function lifetimes(
  nodes: Node[],
  outs: Tensor[],
  storage: Map<Tensor, Storage>,
  needsGrad: Set<Tensor>,
  time: Timeline,
): void {
  const whole = time.whole();
  const at = (t: Tensor, moment: number) => {
    const s = storage.get(t)!;
    if (s.base.kind === 'param') return;
    s.life = extend(s.life, moment);
    if (moment < time.nodes) s.lastForward = Math.max(s.lastForward, moment);
    else s.firstBackward = Math.min(s.firstBackward, moment);
  };
  const written = new Set<GradSlot>();
  for (const s of storage.values()) if (s.base.kind === 'input') s.life = whole;
  for (const s of storage.values()) if (s.base.kind === 'input' && s.grad) s.grad.life = whole;
  for (const t of outs) {
    const s = storage.get(t)!;
    s.life = whole;
    if (s.grad && needsGrad.has(t)) [s.grad.life] = [whole, written.add(s.grad)];
  }
  nodes.forEach((n, i) => {
    at(n.output, time.forward(i));
    for (const t of n.inputs) at(t, time.forward(i));
    if (!needsGrad.has(n.output) || n.op.view) return;
    const b = time.backward(i);
    const reads = readByBackward(n);
    for (const k of reads.inputs) at(n.inputs[k], b);
    if (reads.output) at(n.output, b);
    const gradOut = storage.get(n.output)!.grad!;
    gradOut.life = extend(gradOut.life, b);
    for (const [t] of diffInputs(n, needsGrad)) {
      const g = storage.get(t)!.grad!;
      g.life = extend(g.life, b);
      written.add(g);
    }
  });
  for (const s of storage.values()) if (s.grad?.life && !written.has(s.grad)) s.grad.life = whole;
}

/** Pass 4b: buffers for every value, gradient and spilled value's f16 copy, in the order their spans start. */
function assignBuffers(
  storage: Map<Tensor, Storage>,
  reuse: BufferReuse,
  time: Timeline,
  spills: Map<Storage, Spill>,
): void {
  const wanted: { words: number; life: Life[]; label: string; set: (r: BufferRange) => void; exact?: boolean }[] = [];
  const slots = new Set<GradSlot>();
  for (const s of new Set(storage.values())) {
    if (s.base.kind === 'param') continue;
    const spill = spills.get(s);
    if (spill) {
      const spans = spillSpans(spill);
      // Both take buffers of their own size: a long-lived f16 copy in a larger buffer wastes the rest of it.
      wanted.push({ words: s.words, life: spans.value, label: s.label, set: (r) => (s.value = r), exact: true });
      const half = { words: spillWords(spill), life: [spans.half], label: `${s.label}:f16`, exact: true };
      wanted.push({ ...half, set: (r) => (spill.half = r) });
    } else wanted.push({ words: s.words, life: [s.life ?? time.whole()], label: s.label, set: (r) => (s.value = r) });
    const g = s.grad;
    if (!g?.life || slots.has(g)) continue;
    slots.add(g);
    wanted.push({ words: g.words, life: [g.life], label: g.label, set: (r) => (g.range = r) });
  }
  wanted.sort((a, b) => a.life[0].from - b.life[0].from || b.words - a.words);
  for (const w of wanted) w.set(reuse.take(w.words, w.life, w.label, w.exact));
}

interface PlanState {
  storage: Map<Tensor, Storage>;
  needsGrad: Set<Tensor>;
  reuse: BufferReuse;
  time: Timeline;
  overflowFlag: () => GPUBuffer;
}

function gradRange(s: Storage): BufferRange {
  if (!s.grad?.range)
    throw new RingtrainError(ErrorCode.InvalidArgument, `internal: ${s.label} has no gradient buffer`, {
      tensor: String(s.base),
    });
  return s.grad.range;
}

/**
 * Pass 5: every op planned once (forward and backward together), in backward order, so "first writer"
 * means first to run. The node's own steps (and its adds) finish each gradient it writes: an earlier
 * node's writes are final only after it.
 */
function planOps(
  gpu: Gpu,
  nodes: Node[],
  state: PlanState,
  spills: ReturnType<typeof planSpills>,
): { forward: Step[]; backward: Step[] } {
  const backward: Step[] = [];
  const forwardOf = new Map<Node, Step[]>();
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i];
    const planned = planNode(gpu, n, i, state);
    forwardOf.set(n, [...planned.forward, ...(spills.afterForward.get(i) ?? [])]);
    backward.push(...(spills.beforeBackward.get(i) ?? []), ...planned.backward);
    for (const s of planned.writes) s.lastWrite = backward.length;
  }
  return { forward: nodes.flatMap((n) => forwardOf.get(n)!), backward };
}

function planNode(
  gpu: Gpu,
  n: Node,
  i: number,
  { storage, needsGrad, reuse, time, overflowFlag }: PlanState,
): { forward: Step[]; backward: Step[]; writes: Storage[] } {
  const moment = { forward: time.forward(i), backward: time.backward(i) };
  const during = (m: number): Life => ({ from: m, to: m });
  const outStore = storage.get(n.output)!;
  const gradOut = needsGrad.has(n.output) && !n.op.view ? gradRange(outStore) : null;
  const gradIn: (BufferRange | null)[] = n.inputs.map(() => null);
  const [pre, adds]: Step[][] = [[], []];
  const writes: Storage[] = [];
  for (const [t, k] of gradOut ? diffInputs(n, needsGrad) : []) {
    const s = storage.get(t)!;
    writes.push(s);
    const first = s.written++ === 0;
    const target = first ? gradRange(s) : reuse.take(s.words, during(moment.backward), `${s.label}:grad-part`);
    if (!first) adds.push(...planAdd(gpu, target, gradRange(s), s.words));
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
  // A temporary of one half of the op is lent only while that half runs, and only in its exact size (kernels may bind it whole).
  const spans = {
    forward: during(moment.forward),
    backward: during(moment.backward),
    saved: { from: moment.forward, to: moment.backward },
  };
  // A saved value may be lent a bigger buffer (its kernels bind it by size); a temporary only its exact size.
  const scratch = (words: number, label: string, within?: 'forward' | 'backward' | 'saved') =>
    reuse.take(words, within ? spans[within] : time.whole(), `${n.path}/${n.op.name}/${label}`, within !== 'saved')
      .buffer;
  const context: PlanContext = {
    gpu,
    path: n.path,
    inputShapes: n.inputs.map((t) => t.shape),
    outputShape: n.output.shape,
    input: (k) => storage.get(n.inputs[k])!.value!,
    output: () => outStore.value!,
    gradOut: () => effectiveOut,
    gradIn: (k) => gradIn[k] ?? null,
    scratch,
    overflowFlag,
  };
  const planned = withAdvice(() => n.op.plan(context, n.attrs), describeNode(n), n);
  return { forward: planned.forward, backward: [...pre, ...planned.backward, ...adds], writes };
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
