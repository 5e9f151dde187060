/**
 * CPU reference for 2-D convolution (stride 1, zero padding), the oracle the
 * WGSL kernels are tested against. Plain loops, written for clarity, not speed.
 *
 * Layout is NCHW for activations and OIHW for weights (the PyTorch order):
 * MNIST arrives as one 28x28 plane per image, so NCHW needs no transpose, the
 * flatten before the dense layer is a no-op, and the weights read the same as
 * a PyTorch state dict.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';

/** Everything that fixes a convolution's index space. */
export interface ConvShape {
  /** Batch size. */
  n: number;
  /** Input channels. */
  cin: number;
  /** Input height and width. */
  h: number;
  w: number;
  /** Output channels (filters). */
  cout: number;
  /** Kernel height and width. */
  kh: number;
  kw: number;
  /** Zero padding on each side: 0 is 'valid', (k-1)/2 is 'same' for odd k. */
  pad: number;
}

/** Output height and width for stride 1. */
export function convOutSize(s: ConvShape): { oh: number; ow: number } {
  return { oh: s.h + 2 * s.pad - s.kh + 1, ow: s.w + 2 * s.pad - s.kw + 1 };
}

/** 'same' padding for an odd kernel; 'valid' is pad 0. */
export function samePadding(k: number): number {
  if (k % 2 !== 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `'same' padding needs an odd kernel size, got ${k}; use an odd kernel or pad 0 ('valid')`,
      { k },
    );
  }
  return (k - 1) / 2;
}

/** Throws a clear error for a shape no kernel can run; returns the output size. */
export function checkConvShape(s: ConvShape): { oh: number; ow: number } {
  for (const key of ['n', 'cin', 'h', 'w', 'cout', 'kh', 'kw'] as const) {
    const v = s[key];
    if (!Number.isInteger(v) || v < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `conv2d: ${key} must be a positive integer, got ${v}`, {
        shape: { ...s },
      });
    }
  }
  if (!Number.isInteger(s.pad) || s.pad < 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `conv2d: pad must be a non-negative integer, got ${s.pad}`, {
      shape: { ...s },
    });
  }
  const o = convOutSize(s);
  if (o.oh < 1 || o.ow < 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `conv2d: a ${s.kh}x${s.kw} kernel with pad ${s.pad} does not fit a ${s.h}x${s.w} input; use a smaller kernel or more padding`,
      { shape: { ...s } },
    );
  }
  return o;
}

export function convSizes(s: ConvShape): { x: number; weight: number; bias: number; y: number } {
  const { oh, ow } = convOutSize(s);
  return { x: s.n * s.cin * s.h * s.w, weight: s.cout * s.cin * s.kh * s.kw, bias: s.cout, y: s.n * s.cout * oh * ow };
}

function checkLength(what: string, a: ArrayLike<number>, want: number, s: ConvShape): void {
  if (a.length !== want) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `conv2d: ${what} has ${a.length} elements, the shape needs ${want}`,
      { what, shape: { ...s } },
    );
  }
}

/** y[n,co,oy,ox] = b[co] + sum over ci,ky,kx of x[n,ci,oy+ky-pad,ox+kx-pad] * w[co,ci,ky,kx]. */
export function conv2dForwardCpu(
  s: ConvShape,
  x: Float32Array,
  weight: Float32Array,
  bias: Float32Array,
): Float32Array {
  const { oh, ow } = checkConvShape(s);
  const sz = convSizes(s);
  checkLength('x', x, sz.x, s);
  checkLength('weight', weight, sz.weight, s);
  checkLength('bias', bias, sz.bias, s);
  const y = new Float32Array(sz.y);
  for (let n = 0; n < s.n; n++)
    for (let co = 0; co < s.cout; co++)
      for (let oy = 0; oy < oh; oy++)
        for (let ox = 0; ox < ow; ox++) {
          let acc = bias[co];
          for (let ci = 0; ci < s.cin; ci++)
            for (let ky = 0; ky < s.kh; ky++) {
              const iy = oy + ky - s.pad;
              if (iy < 0 || iy >= s.h) continue;
              for (let kx = 0; kx < s.kw; kx++) {
                const ix = ox + kx - s.pad;
                if (ix < 0 || ix >= s.w) continue;
                acc +=
                  x[((n * s.cin + ci) * s.h + iy) * s.w + ix] * weight[((co * s.cin + ci) * s.kh + ky) * s.kw + kx];
              }
            }
          y[((n * s.cout + co) * oh + oy) * ow + ox] = acc;
        }
  return y;
}

/** dx[n,ci,iy,ix] = sum over co,ky,kx of dy[n,co,iy-ky+pad,ix-kx+pad] * w[co,ci,ky,kx]. */
export function conv2dBackwardInputCpu(s: ConvShape, dy: Float32Array, weight: Float32Array): Float32Array {
  const { oh, ow } = checkConvShape(s);
  const sz = convSizes(s);
  checkLength('dy', dy, sz.y, s);
  checkLength('weight', weight, sz.weight, s);
  const dx = new Float32Array(sz.x);
  for (let n = 0; n < s.n; n++)
    for (let co = 0; co < s.cout; co++)
      for (let oy = 0; oy < oh; oy++)
        for (let ox = 0; ox < ow; ox++) {
          const g = dy[((n * s.cout + co) * oh + oy) * ow + ox];
          for (let ci = 0; ci < s.cin; ci++)
            for (let ky = 0; ky < s.kh; ky++) {
              const iy = oy + ky - s.pad;
              if (iy < 0 || iy >= s.h) continue;
              for (let kx = 0; kx < s.kw; kx++) {
                const ix = ox + kx - s.pad;
                if (ix < 0 || ix >= s.w) continue;
                dx[((n * s.cin + ci) * s.h + iy) * s.w + ix] += g * weight[((co * s.cin + ci) * s.kh + ky) * s.kw + kx];
              }
            }
        }
  return dx;
}

/** dw[co,ci,ky,kx] = sum over n,oy,ox of dy[n,co,oy,ox] * x[n,ci,oy+ky-pad,ox+kx-pad]; db[co] = sum of dy[n,co,..]. */
export function conv2dBackwardWeightCpu(
  s: ConvShape,
  dy: Float32Array,
  x: Float32Array,
): { dWeight: Float32Array; dBias: Float32Array } {
  const { oh, ow } = checkConvShape(s);
  const sz = convSizes(s);
  checkLength('dy', dy, sz.y, s);
  checkLength('x', x, sz.x, s);
  const dWeight = new Float32Array(sz.weight);
  const dBias = new Float32Array(sz.bias);
  for (let n = 0; n < s.n; n++)
    for (let co = 0; co < s.cout; co++)
      for (let oy = 0; oy < oh; oy++)
        for (let ox = 0; ox < ow; ox++) {
          const g = dy[((n * s.cout + co) * oh + oy) * ow + ox];
          dBias[co] += g;
          for (let ci = 0; ci < s.cin; ci++)
            for (let ky = 0; ky < s.kh; ky++) {
              const iy = oy + ky - s.pad;
              if (iy < 0 || iy >= s.h) continue;
              for (let kx = 0; kx < s.kw; kx++) {
                const ix = ox + kx - s.pad;
                if (ix < 0 || ix >= s.w) continue;
                dWeight[((co * s.cin + ci) * s.kh + ky) * s.kw + kx] += g * x[((n * s.cin + ci) * s.h + iy) * s.w + ix];
              }
            }
        }
  return { dWeight, dBias };
}
