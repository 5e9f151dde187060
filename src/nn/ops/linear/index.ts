/**
 * linear: y = x·Wᵀ + b, PyTorch's nn.Linear (W is [out, in]). x may have any
 * number of leading dimensions; they are rows of one matmul. With
 * `attrs.relu` (set by the planner when a ReLU follows) the ReLU runs in the
 * matmul's epilogue and backward masks gradOut by the output (y > 0 ⇔ the
 * pre-activation > 0), as the hand-wired MLP did.
 *
 * Backward: dx = dy·W, dW = dyᵀ·x, db = Σ_rows dy.
 *
 * With `attrs.f16` (--precision f16-mixed, set by the planner) x, W and dy are
 * cast to f16 for the three matmuls, which sum in f32 into f32 results
 * (kernel.ts); the bias, its gradient and everything outside the layer stay
 * f32. The casts are temporaries of each half: backward casts x and W again
 * (x as the planner kept it, as f16 in between: src/nn/f16-spill.ts, so one f16
 * copy serves every backward that reads x). A layer whose operands pass one
 * binding keeps the f32 path (`mixesF16` says no).
 */
import { planActivationBackward } from '../activation/kernel.ts';
import { fitsF16Path, halfWords, planCastF16, planMatmulF16 } from './kernel.ts';
import { planBiasGradSteps } from '../../../gpu/kernels/bias.ts';
import { planMatmulAnySize, planMatmulSteps } from '../../../gpu/kernels/matmul-slices.ts';
import { defineOp, type OpPlan, type PlanContext, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, Parameter, type Shape, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';
import { positive, streamed, weightInit, uniformInit, transposed, zeros, type InitScheme } from '../../init.ts';

export interface LinearAttrs extends Record<string, unknown> {
  relu?: boolean;
  /** f16 operands, f32 sums (--precision f16-mixed). */
  f16?: boolean;
}

function dims(shapes: readonly Shape[]): { rows: number; inF: number; outF: number } {
  const x = shapes[0];
  const inF = x[x.length - 1];
  return { rows: x.reduce((a, b) => a * b, 1) / inF, inF, outF: shapes[1][0] };
}

export const linearOp = defineOp<LinearAttrs>({
  name: 'linear',
  fusesReluAfter: true,
  // A layer whose operands pass one binding (a vocabulary-sized head on a small limit) stays f32.
  mixesF16: (gpu, shapes) => {
    const { rows, inF, outF } = dims(shapes);
    return fitsF16Path(gpu, rows, inF, outF);
  },
  // dx needs W, dW needs x; the output only as the fused ReLU's mask.
  backwardReads: (attrs) => ({ inputs: [0, 1], output: attrs.relu === true }),
  shape([x, w, b], _attrs, info) {
    requireF32(info, 'linear', [x, w, ...(b ? [b] : [])]);
    if (x.length < 1 || w.length !== 2)
      throw shapeError(info, 'linear', 'needs x [..., in] and weight [out, in]', { x, weight: w });
    if (x[x.length - 1] !== w[1])
      throw shapeError(
        info,
        'linear',
        `x's last dimension ${x[x.length - 1]} must equal the weight's in-features ${w[1]}`,
        { x, weight: w },
      );
    if (b && (b.length !== 1 || b[0] !== w[0]))
      throw shapeError(info, 'linear', `bias must be [${w[0]}]`, { weight: w, bias: b });
    return { shape: [...x.slice(0, -1), w[0]] };
  },
  plan(ctx, attrs) {
    const { rows, inF, outF } = dims(ctx.inputShapes);
    if (attrs.f16) return planF16(ctx, attrs);
    const hasBias = ctx.inputShapes.length === 3;
    // The matmuls' partial sums live only while their half of the op runs.
    const scratch = (words: number, label: string) => ctx.scratch(words, label, 'forward');
    const backScratch = (words: number, label: string) => ctx.scratch(words, label, 'backward');
    // A weight bigger than one binding (a vocabulary-sized head) is planned in slices: matmul-slices.ts.
    const forward: Step[] = planMatmulAnySize(
      ctx.gpu,
      ctx.input(0),
      ctx.input(1),
      ctx.output(),
      { m: rows, n: outF, k: inF, transB: true, bias: hasBias ? ctx.input(2) : undefined, relu: attrs.relu },
      scratch,
    );
    const dy = ctx.gradOut();
    if (!dy) return { forward, backward: [] };
    const backward: Step[] = [];
    // ReLU'(z) = [relu(z) > 0]: the stored output serves as the mask.
    if (attrs.relu) backward.push(planActivationBackward(ctx.gpu, 'relu', ctx.output(), dy, rows * outF));
    const [dx, dw, db] = [ctx.gradIn(0), ctx.gradIn(1), hasBias ? ctx.gradIn(2) : null];
    if (dw)
      backward.push(
        ...planMatmulSteps(ctx.gpu, dy, ctx.input(0), dw, { m: outF, n: inF, k: rows, transA: true }, backScratch),
      );
    if (db) backward.push(...planBiasGradSteps(ctx.gpu, dy, db, rows, outF, backScratch));
    if (dx)
      backward.push(...planMatmulAnySize(ctx.gpu, dy, ctx.input(1), dx, { m: rows, n: inF, k: outF }, backScratch));
    return { forward, backward };
  },
  cpu: {
    forward([x, w, b], shapes, attrs) {
      const { rows, inF, outF } = dims(shapes);
      const y = new Float64Array(rows * outF);
      for (let r = 0; r < rows; r++)
        for (let o = 0; o < outF; o++) {
          let s = b ? b[o] : 0;
          for (let i = 0; i < inF; i++) s += x[r * inF + i] * w[o * inF + i];
          y[r * outF + o] = attrs.relu ? Math.max(s, 0) : s;
        }
      return y;
    },
    backward([x, w, b], shapes, attrs, y, dOut) {
      const { rows, inF, outF } = dims(shapes);
      const dy = attrs.relu ? dOut.map((g, i) => (y[i] > 0 ? g : 0)) : dOut;
      const dx = new Float64Array(rows * inF);
      const dw = new Float64Array(outF * inF);
      const db = new Float64Array(outF);
      for (let r = 0; r < rows; r++)
        for (let o = 0; o < outF; o++) {
          const g = dy[r * outF + o];
          db[o] += g;
          for (let i = 0; i < inF; i++) {
            dx[r * inF + i] += g * w[o * inF + i];
            dw[o * inF + i] += g * x[r * inF + i];
          }
        }
      return b ? [dx, dw, db] : [dx, dw];
    },
  },
});

/** The f16-mixed plan: x and W cast to f16 in forward, and again in backward with dy. */
function planF16(ctx: PlanContext, attrs: LinearAttrs): OpPlan {
  const { gpu } = ctx;
  const { rows, inF, outF } = dims(ctx.inputShapes);
  const flag = ctx.overflowFlag();
  const hasBias = ctx.inputShapes.length === 3;
  // Each half's casts are its own temporaries: nothing f16 is kept from forward to backward here.
  const casts = (within: 'forward' | 'backward') => {
    const x16 = ctx.scratch(halfWords(rows * inF), 'x-f16', within);
    const w16 = ctx.scratch(halfWords(outF * inF), 'weight-f16', within);
    const steps = [
      planCastF16(gpu, ctx.input(0), x16, rows * inF, flag),
      planCastF16(gpu, ctx.input(1), w16, outF * inF, flag),
    ];
    return { x16, w16, steps };
  };
  const f = casts('forward');
  const forward: Step[] = [
    ...f.steps,
    planMatmulF16(gpu, f.x16, f.w16, ctx.output(), {
      m: rows,
      n: outF,
      k: inF,
      transB: true,
      bias: hasBias ? ctx.input(2) : undefined,
      relu: attrs.relu,
    }),
  ];
  const dy = ctx.gradOut();
  if (!dy) return { forward, backward: [] };
  const backward: Step[] = [];
  if (attrs.relu) backward.push(planActivationBackward(gpu, 'relu', ctx.output(), dy, rows * outF));
  const dy16 = ctx.scratch(halfWords(rows * outF), 'dy-f16', 'backward');
  const b = casts('backward');
  backward.push(planCastF16(gpu, dy, dy16, rows * outF, flag), ...b.steps);
  const [dx, dw, db] = [ctx.gradIn(0), ctx.gradIn(1), hasBias ? ctx.gradIn(2) : null];
  if (dw) backward.push(planMatmulF16(gpu, dy16, b.x16, dw, { m: outF, n: inF, k: rows, transA: true }));
  const backScratch = (words: number, label: string) => ctx.scratch(words, label, 'backward');
  if (db) backward.push(...planBiasGradSteps(gpu, dy, db, rows, outF, backScratch));
  if (dx) backward.push(planMatmulF16(gpu, dy16, b.w16, dx, { m: rows, n: inF, k: outF }));
  return { forward, backward };
}

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
export const linear = (x: Tensor, weight: T, bias?: T): Tensor =>
  apply(linearOp, bias ? [x, weight, bias] : [x, weight], {});

export class Linear extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;
  /** `init` is a scheme, or `{ std }`: weights N(0, std²) and zero biases (GPT-2's initialisation). */
  constructor(
    readonly inFeatures: number,
    readonly outFeatures: number,
    options: { bias?: boolean; init?: InitScheme | { std: number } } = {},
  ) {
    super();
    positive('Linear', { inFeatures, outFeatures });
    if (typeof options.init === 'object') {
      const std = options.init.std;
      this.weight = new Parameter(
        [outFeatures, inFeatures],
        streamed((out, rand) => out.forEach((_, i) => (out[i] = rand.normal() * std))),
      );
      this.bias = options.bias === false ? null : new Parameter([outFeatures], zeros);
      return;
    }
    const scheme = options.init ?? 'torch';
    const w = weightInit(scheme, inFeatures, outFeatures);
    this.weight = new Parameter(
      [outFeatures, inFeatures],
      scheme === 'torch' ? w : transposed(w, outFeatures, inFeatures),
    );
    this.bias =
      options.bias === false
        ? null
        : new Parameter([outFeatures], scheme === 'torch' ? uniformInit(1 / Math.sqrt(inFeatures)) : zeros);
  }
  forward(x: Tensor): Tensor {
    return linear(x, this.weight, this.bias ?? undefined);
  }
}
