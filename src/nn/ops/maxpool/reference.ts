/**
 * CPU reference for 2x2 max-pooling with stride 2 over NCHW activations, the
 * oracle for the WGSL kernel. An odd trailing row or column is dropped (output
 * is floor(h/2) x floor(w/2)), as in PyTorch's default.
 *
 * The forward pass records, per output, which of the four window cells won
 * (0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right). Ties go to the
 * first cell in that order (a later cell must be strictly greater): after a
 * ReLU many windows are all zero, so the rule must be the same on CPU and GPU.
 *
 * `relu: true` fuses a ReLU in front (ReLU and max commute): the output is
 * max(0, window max), and a window whose max is not positive records cell
 * `NO_WINNER`, which passes no gradient (ReLU's derivative at or below 0 is 0).
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';

/** The recorded cell of a window that a fused ReLU zeroed. */
export const NO_WINNER = 4;

export interface PoolShape {
  n: number;
  c: number;
  h: number;
  w: number;
}

export function checkPoolShape(s: PoolShape): { oh: number; ow: number } {
  for (const key of ['n', 'c', 'h', 'w'] as const) {
    const v = s[key];
    if (!Number.isInteger(v) || v < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `maxpool2x2: ${key} must be a positive integer, got ${v}`, {
        shape: { ...s },
      });
    }
  }
  if (s.h < 2 || s.w < 2) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `maxpool2x2: the input must be at least 2x2, got ${s.h}x${s.w}`,
      { shape: { ...s } },
    );
  }
  return { oh: Math.floor(s.h / 2), ow: Math.floor(s.w / 2) };
}

export function poolSizes(s: PoolShape): { x: number; y: number } {
  const { oh, ow } = checkPoolShape(s);
  return { x: s.n * s.c * s.h * s.w, y: s.n * s.c * oh * ow };
}

function checkLength(what: string, a: ArrayLike<number>, want: number, s: PoolShape): void {
  if (a.length !== want) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `maxpool2x2: ${what} has ${a.length} elements, the shape needs ${want}`,
      { what, shape: { ...s } },
    );
  }
}

/** Returns the pooled values and, per output, the winning cell (0..3). */
export function maxPoolForwardCpu(
  s: PoolShape,
  x: Float32Array,
  relu = false,
): { y: Float32Array; argmax: Uint32Array } {
  const { oh, ow } = checkPoolShape(s);
  const sz = poolSizes(s);
  checkLength('x', x, sz.x, s);
  const y = new Float32Array(sz.y);
  const argmax = new Uint32Array(sz.y);
  for (let plane = 0; plane < s.n * s.c; plane++)
    for (let oy = 0; oy < oh; oy++)
      for (let ox = 0; ox < ow; ox++) {
        const base = (plane * s.h + 2 * oy) * s.w + 2 * ox;
        const cells = [x[base], x[base + 1], x[base + s.w], x[base + s.w + 1]];
        let best = 0;
        for (let k = 1; k < 4; k++) if (cells[k] > cells[best]) best = k;
        const o = (plane * oh + oy) * ow + ox;
        const zeroed = relu && !(cells[best] > 0);
        y[o] = zeroed ? 0 : cells[best];
        argmax[o] = zeroed ? NO_WINNER : best;
      }
  return { y, argmax };
}

/** Routes each output gradient to the cell that won its window; every other input gets 0. */
export function maxPoolBackwardCpu(s: PoolShape, dy: Float32Array, argmax: Uint32Array): Float32Array {
  const { oh, ow } = checkPoolShape(s);
  const sz = poolSizes(s);
  checkLength('dy', dy, sz.y, s);
  checkLength('argmax', argmax, sz.y, s);
  const dx = new Float32Array(sz.x);
  for (let plane = 0; plane < s.n * s.c; plane++)
    for (let oy = 0; oy < oh; oy++)
      for (let ox = 0; ox < ow; ox++) {
        const o = (plane * oh + oy) * ow + ox;
        const cell = argmax[o];
        if (cell === NO_WINNER) continue;
        dx[(plane * s.h + 2 * oy + (cell >> 1)) * s.w + 2 * ox + (cell & 1)] = dy[o];
      }
  return dx;
}
