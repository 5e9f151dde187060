/**
 * conv2d (src/nn/ops/conv2d): gradchecks against the f64 oracle and finite
 * differences, and the kernels (forward, input and weight gradients, bias
 * gradient) against the f64 reference over a grid of shapes with odd sizes
 * (1, 7, 33 channels and pixels, channel counts that are not multiples of the
 * kernels' 4-channel blocks, non-square kernels, 'same' and 'valid' padding).
 *
 * Tolerances: inputs are uniform in [-1, 1]; an output that sums `terms`
 * products may differ from the double-accumulated CPU value by rounding,
 * which grows with the number of terms, so the allowed absolute error is
 * 2e-6 * terms (measured errors are about 1e-8 * terms).
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { mixSeed } from '../../../src/data/random.ts';
import { conv2dOp } from '../../../src/nn/ops/conv2d/index.ts';
import {
  planConv2dBackwardInput,
  planConv2dBackwardWeightSteps,
  planConv2dForward,
} from '../../../src/nn/ops/conv2d/kernel.ts';
import {
  type ConvShape,
  conv2dBackwardInputCpu,
  conv2dBackwardWeightCpu,
  conv2dForwardCpu,
  convOutSize,
  convSizes,
} from '../../../src/nn/ops/conv2d/reference.ts';
import { asOracleCase, type ComparedCase, maxAbsError, seededUniform, shapeLabel } from '../../oracles/comparisons.ts';
import type { OracleCase } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  {
    op: conv2dOp,
    label: 'x[2,3,7,6] W[5,3,3,3] pad 1',
    inputs: [s(2, 3, 7, 6), s(5, 3, 3, 3), s(5)],
    attrs: { pad: 1 },
  },
  {
    op: conv2dOp,
    label: 'x[1,2,8,8] W[4,2,5,5] pad 0',
    inputs: [s(1, 2, 8, 8), s(4, 2, 5, 5), s(4)],
    attrs: { pad: 0 },
  },
];

const PER_TERM = 2e-6;

export const CONV_SHAPES: ConvShape[] = [
  { n: 1, cin: 1, h: 1, w: 1, cout: 1, kh: 1, kw: 1, pad: 0 },
  { n: 2, cin: 7, h: 7, w: 7, cout: 33, kh: 3, kw: 3, pad: 1 },
  { n: 1, cin: 33, h: 9, w: 7, cout: 7, kh: 5, kw: 5, pad: 2 },
  { n: 2, cin: 3, h: 33, w: 33, cout: 5, kh: 5, kw: 5, pad: 2 },
  { n: 3, cin: 2, h: 8, w: 13, cout: 3, kh: 3, kw: 5, pad: 0 },
  { n: 1, cin: 5, h: 7, w: 7, cout: 6, kh: 7, kw: 7, pad: 3 },
  { n: 4, cin: 1, h: 28, w: 28, cout: 8, kh: 5, kw: 5, pad: 2 },
  { n: 4, cin: 8, h: 14, w: 14, cout: 16, kh: 5, kw: 5, pad: 2 },
  // Enough images that the weight gradient is summed in batch slices (5, 5 and 3 images) and then over the slices.
  { n: 13, cin: 2, h: 28, w: 28, cout: 6, kh: 3, kw: 3, pad: 1 },
];

function convCase(s: ConvShape, seed: number): ComparedCase {
  return {
    name: `conv2d ${shapeLabel(s)}`,
    async run(gpu) {
      const sz = convSizes(s);
      const { oh, ow } = convOutSize(s);
      const x = seededUniform(sz.x, mixSeed(seed, 1));
      const weight = seededUniform(sz.weight, mixSeed(seed, 2));
      const bias = seededUniform(sz.bias, mixSeed(seed, 3));
      const dy = seededUniform(sz.y, mixSeed(seed, 4));
      const [gx, gw, gb, gdy] = [x, weight, bias, dy].map((a) => gpu.upload(a));
      const gy = gpu.storage(sz.y);
      const gdx = gpu.storage(sz.x);
      const gdw = gpu.storage(sz.weight);
      const gdb = gpu.storage(sz.bias);
      const scratch: GPUBuffer[] = [];
      const made = (b: GPUBuffer) => (scratch.push(b), b);
      gpu.record([
        planConv2dForward(gpu, s, gx, gw, gb, gy),
        planConv2dBackwardInput(gpu, s, gdy, gw, gdx),
        ...planConv2dBackwardWeightSteps(gpu, s, gdy, gx, gdw, gdb, (words, label) => made(gpu.storage(words, label))),
      ]);
      const y = await gpu.readF32(gy, 0, sz.y);
      const dx = await gpu.readF32(gdx, 0, sz.x);
      const dw = await gpu.readF32(gdw, 0, sz.weight);
      const db = await gpu.readF32(gdb, 0, sz.bias);
      for (const b of [gx, gw, gb, gdy, gy, gdx, gdw, gdb, ...scratch]) b.destroy();
      const cpuW = conv2dBackwardWeightCpu(s, dy, x);
      // Products summed into one value of each output.
      const taps = s.cin * s.kh * s.kw;
      return [
        {
          what: 'forward y',
          maxError: maxAbsError(y, conv2dForwardCpu(s, x, weight, bias)),
          tolerance: PER_TERM * (taps + 1),
          count: y.length,
        },
        {
          what: 'backward dx',
          maxError: maxAbsError(dx, conv2dBackwardInputCpu(s, dy, weight)),
          tolerance: PER_TERM * s.cout * s.kh * s.kw,
          count: dx.length,
        },
        {
          what: 'backward dweight',
          maxError: maxAbsError(dw, cpuW.dWeight),
          tolerance: PER_TERM * s.n * oh * ow,
          count: dw.length,
        },
        {
          what: 'backward dbias',
          maxError: maxAbsError(db, cpuW.dBias),
          tolerance: PER_TERM * s.n * oh * ow,
          count: db.length,
        },
      ];
    },
  };
}

export const ORACLE_CASES: OracleCase[] = CONV_SHAPES.map((shape, i) => asOracleCase(convCase(shape, 100 + i)));
