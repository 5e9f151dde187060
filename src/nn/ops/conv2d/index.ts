/**
 * conv2d: PyTorch's nn.Conv2d with stride 1 and zero padding `pad` on every
 * side. x [N, Cin, H, W], weight [Cout, Cin, kh, kw], bias [Cout] → y
 * [N, Cout, H + 2·pad − kh + 1, W + 2·pad − kw + 1]. The kernels are those of
 * kernel.ts (the input gradient is the forward kernel on the
 * flipped problem; weight and bias gradients come from one kernel).
 */
import { type ConvShape, planConv2dBackwardInput, planConv2dBackwardWeightSteps, planConv2dForward } from './kernel.ts';
import { defineOp, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, Parameter, type Shape, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';
import { positive, weightInit, uniformInit, zeros, type InitScheme } from '../../init.ts';
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';

export interface Conv2dAttrs extends Record<string, unknown> {
  pad: number;
}

function convShape([x, w]: readonly Shape[], pad: number): ConvShape {
  return { n: x[0], cin: x[1], h: x[2], w: x[3], cout: w[0], kh: w[2], kw: w[3], pad };
}

export const conv2dOp = defineOp<Conv2dAttrs>({
  name: 'conv2d',
  shape([x, w, b], { pad }, info) {
    requireF32(info, 'conv2d', [x, w, b]);
    if (x.length !== 4 || w.length !== 4 || !b || b.length !== 1)
      throw shapeError(info, 'conv2d', 'needs x [N, Cin, H, W], weight [Cout, Cin, kh, kw] and bias [Cout]', {
        x,
        weight: w,
        ...(b ? { bias: b } : {}),
      });
    if (x[1] !== w[1])
      throw shapeError(info, 'conv2d', `x has ${x[1]} channels, the weight expects ${w[1]}`, { x, weight: w });
    if (b[0] !== w[0]) throw shapeError(info, 'conv2d', `bias must be [${w[0]}]`, { weight: w, bias: b });
    if (!Number.isInteger(pad) || pad < 0)
      throw shapeError(info, 'conv2d', `padding must be a non-negative integer, got ${pad}`, { weight: w });
    const oh = x[2] + 2 * pad - w[2] + 1;
    const ow = x[3] + 2 * pad - w[3] + 1;
    if (oh < 1 || ow < 1)
      throw shapeError(
        info,
        'conv2d',
        `the ${w[2]}x${w[3]} kernel does not fit the ${x[2]}x${x[3]} input with padding ${pad}`,
        { x, weight: w },
      );
    return { shape: [x[0], w[0], oh, ow] };
  },
  plan(ctx, { pad }) {
    const s = convShape(ctx.inputShapes, pad);
    const forward: Step[] = [planConv2dForward(ctx.gpu, s, ctx.input(0), ctx.input(1), ctx.input(2), ctx.output())];
    const dy = ctx.gradOut();
    const backward: Step[] = [];
    const [dx, dw, db] = [ctx.gradIn(0), ctx.gradIn(1), ctx.gradIn(2)];
    if (dy && dw && db)
      backward.push(
        ...planConv2dBackwardWeightSteps(ctx.gpu, s, dy, ctx.input(0), dw, db, (words, label) =>
          ctx.scratch(words, label),
        ),
      );
    if (dy && dx) backward.push(planConv2dBackwardInput(ctx.gpu, s, dy, ctx.input(1), dx));
    return { forward, backward };
  },
  cpu: {
    forward([x, w, b], shapes, { pad }) {
      const s = convShape(shapes, pad);
      const [oh, ow] = [s.h + 2 * pad - s.kh + 1, s.w + 2 * pad - s.kw + 1];
      const y = new Float64Array(s.n * s.cout * oh * ow);
      eachTap(s, oh, ow, (yi, xi, wi) => {
        if (xi >= 0) y[yi] += x[xi] * w[wi];
      });
      for (let i = 0; i < y.length; i++) y[i] += b[Math.floor(i / (oh * ow)) % s.cout];
      return y;
    },
    backward([x, w], shapes, { pad }, _y, dy) {
      const s = convShape(shapes, pad);
      const [oh, ow] = [s.h + 2 * pad - s.kh + 1, s.w + 2 * pad - s.kw + 1];
      const dx = new Float64Array(x.length);
      const dw = new Float64Array(w.length);
      const db = new Float64Array(s.cout);
      eachTap(s, oh, ow, (yi, xi, wi) => {
        if (xi < 0) return;
        dx[xi] += dy[yi] * w[wi];
        dw[wi] += dy[yi] * x[xi];
      });
      for (let i = 0; i < dy.length; i++) db[Math.floor(i / (oh * ow)) % s.cout] += dy[i];
      return [dx, dw, db];
    },
  },
});

/** Calls `f(yIndex, xIndex or −1 for padding, weightIndex)` for every multiply of the convolution. */
function eachTap(s: ConvShape, oh: number, ow: number, f: (yi: number, xi: number, wi: number) => void): void {
  for (let n = 0; n < s.n; n++)
    for (let co = 0; co < s.cout; co++)
      for (let oy = 0; oy < oh; oy++)
        for (let ox = 0; ox < ow; ox++) {
          const yi = ((n * s.cout + co) * oh + oy) * ow + ox;
          for (let ci = 0; ci < s.cin; ci++)
            for (let ky = 0; ky < s.kh; ky++)
              for (let kx = 0; kx < s.kw; kx++) {
                const iy = oy + ky - s.pad;
                const ix = ox + kx - s.pad;
                const inside = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w;
                f(
                  yi,
                  inside ? ((n * s.cin + ci) * s.h + iy) * s.w + ix : -1,
                  ((co * s.cin + ci) * s.kh + ky) * s.kw + kx,
                );
              }
        }
}

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
export const conv2d = (x: Tensor, weight: T, bias: T, pad = 0): Tensor => apply(conv2dOp, [x, weight, bias], { pad });

export class Conv2d extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: number,
    options: { padding?: number | 'same'; init?: InitScheme } = {},
  ) {
    super();
    positive('Conv2d', { inChannels, outChannels, kernelSize });
    const k2 = kernelSize * kernelSize;
    const scheme = options.init ?? 'torch';
    this.padding = options.padding === 'same' ? (kernelSize - 1) / 2 : (options.padding ?? 0);
    if (!Number.isInteger(this.padding))
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `Conv2d: padding 'same' needs an odd kernel size, got ${kernelSize}`,
        { kernelSize },
      );
    this.weight = new Parameter(
      [outChannels, inChannels, kernelSize, kernelSize],
      weightInit(scheme, inChannels * k2, outChannels * k2),
    );
    this.bias = new Parameter([outChannels], scheme === 'torch' ? uniformInit(1 / Math.sqrt(inChannels * k2)) : zeros);
  }
  readonly padding: number;
  forward(x: Tensor): Tensor {
    return conv2d(x, this.weight, this.bias, this.padding);
  }
}
