/**
 * The memory plan of a compiled step: when each buffer's contents matter, and
 * which GPU buffer holds them. A recorded step runs in a fixed order (every
 * node's forward, the loss head, every node's backward in reverse), so each
 * value, gradient and temporary has a known span of that order in which it is
 * written and read. Two of them can share one buffer when their spans do not
 * meet; the buffers are still made once per plan, so a step allocates nothing.
 *
 * What a caller reads or writes outside the recorded steps (the inputs, the
 * outputs and their seeded gradients, an input's gradient, state an op keeps
 * between steps) gets the whole step as its span: nothing else ever shares it.
 */
import type { BufferRange } from '../gpu/gpu.ts';
import type { Node, Tensor } from './tensor.ts';

/** A span of the step in which a buffer's contents matter, both ends included. */
export interface Life {
  from: number;
  to: number;
}

/**
 * The moments of one recorded step. Node i's forward runs at i, the loss head
 * at `nodes`, node i's backward at 2·nodes − i; the caller writes inputs before
 * the first moment and reads results after the last.
 */
export class Timeline {
  constructor(readonly nodes: number) {}
  forward(i: number): number {
    return i;
  }
  backward(i: number): number {
    return 2 * this.nodes - i;
  }
  /** The node whose backward runs at `moment`. */
  nodeAtBackward(moment: number): number {
    return 2 * this.nodes - moment;
  }
  /** From before the first step's work until after its last: what the caller touches outside the steps. */
  whole(): Life {
    return { from: -1, to: 2 * this.nodes + 1 };
  }
}

/** A gradient buffer, shared by the storages whose gradients are one (an in-place op's input and output). */
export interface GradSlot {
  words: number;
  label: string;
  range: BufferRange | null;
  /** Null until something writes or reads it. */
  life: Life | null;
}

/** One value's storage: a tensor's, shared with the views of it. */
export interface Storage {
  /** Parameters' ranges are set at once; the rest when the plan assigns buffers. */
  value: BufferRange | null;
  grad: GradSlot | null;
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
  /** When the value is needed (null for a parameter: it lives in the model's flat buffer). */
  life: Life | null;
  /** The last forward moment that writes or reads the value (-1: none yet). */
  lastForward: number;
  /** The first backward moment that reads it (Infinity: backward never does). */
  firstBackward: number;
}

export function extend(life: Life | null, from: number, to = from): Life {
  return life ? { from: Math.min(life.from, from), to: Math.max(life.to, to) } : { from, to };
}

/** The values an op's backward reads: what its `backwardReads` says, or else all its inputs and its output. */
export function readByBackward(n: Node): { inputs: readonly number[]; output: boolean } {
  const reads = n.op.backwardReads?.(n.attrs);
  // An op with an optional input (a bias) may name it whether or not this node has it.
  if (reads) return { inputs: reads.inputs.filter((i) => i < n.inputs.length), output: reads.output };
  return { inputs: n.inputs.map((_, i) => i), output: true };
}

interface Slot {
  buffer: GPUBuffer;
  words: number;
  busy: Life[];
}

const meets = (a: Life, b: Life) => a.from <= b.to && b.from <= a.to;

/**
 * Hands out buffers by span: the smallest buffer made so far that is at least as big and free
 * over the whole span, else a new one (`make`). What it made is the plan's memory, all of it live at
 * the step's peak.
 */
export class BufferReuse {
  private readonly slots: Slot[] = [];
  constructor(private readonly make: (words: number, label: string) => GPUBuffer) {}

  /**
   * `exact`: only a buffer of exactly `words` will do (one a kernel binds whole). `life` may be several
   * spans (a value stored as f16 in between, f16-spill.ts): the buffer is free for others between them.
   */
  take(words: number, life: Life | readonly Life[], label: string, exact = false): BufferRange {
    const spans = Array.isArray(life) ? life : [life as Life];
    let best: Slot | null = null;
    for (const s of this.slots) {
      if (s.words < words || (exact && s.words !== words) || (best && s.words >= best.words)) continue;
      if (!s.busy.some((b) => spans.some((l) => meets(b, l)))) best = s;
    }
    if (!best) {
      best = { buffer: this.make(words, label), words, busy: [] };
      this.slots.push(best);
    }
    best.busy.push(...spans);
    return { buffer: best.buffer, offset: 0, size: words * 4 };
  }
}
