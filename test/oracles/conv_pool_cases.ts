/**
 * Oracle cases for conv2d and 2x2 max-pool: the GPU kernels against the CPU
 * references, on seeded random inputs over a grid of shapes with odd sizes
 * (1, 7, 33 channels and pixels, channel counts that are not multiples of the
 * kernels' 4-channel blocks, non-square kernels, 'same' and 'valid' padding).
 * Plain functions of a Gpu, so vitest (Node) and the Deno runner share them.
 *
 * Tolerances: inputs are uniform in [-1, 1]; an output that sums `terms`
 * products may differ from the double-accumulated CPU value by rounding,
 * which grows with the number of terms, so the allowed absolute error is
 * 2e-6 * terms (measured errors are about 1e-8 * terms). Max-pool does no
 * arithmetic and must match exactly, argmax included.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planConv2dBackwardInput, planConv2dBackwardWeightSteps, planConv2dForward } from '../../src/nn/ops/conv2d/kernel.ts';
import { type ConvShape, conv2dBackwardInputCpu, conv2dBackwardWeightCpu, conv2dForwardCpu, convOutSize, convSizes } from '../../src/nn/ops/conv2d/reference.ts';
import { planMaxPoolBackward, planMaxPoolForward } from '../../src/nn/ops/maxpool/kernel.ts';
import { type PoolShape, maxPoolBackwardCpu, maxPoolForwardCpu, poolSizes } from '../../src/nn/ops/maxpool/reference.ts';
import { mixSeed, mulberry32 } from '../../src/data/random.ts';
import { Cnn } from '../../src/engine/cnn.ts';
import { checkModel } from '../nn/model-check.ts';
import type { CnnSpec } from '../../src/engine/model.ts';
import type { OracleCase, OracleResult } from './dense-cases.ts';

export interface ConvPoolCase {
  name: string;
  /** Runs the kernel(s) and returns one comparison per output tensor. */
  run(gpu: Gpu): Promise<Comparison[]>;
}

export interface Comparison {
  what: string;
  maxError: number;
  tolerance: number;
  /** Element count compared (a test checks it is the full tensor). */
  count: number;
}

/** Seeded values uniform in [-1, 1]. */
export function seededUniform(count: number, seed: number): Float32Array {
  const random = mulberry32(seed);
  return Float32Array.from({ length: count }, () => random() * 2 - 1);
}

/** Seeded values from {-1, 0, 1}: many exact ties, the hard case for argmax. */
export function seededTies(count: number, seed: number): Float32Array {
  const random = mulberry32(seed);
  return Float32Array.from({ length: count }, () => Math.floor(random() * 3) - 1);
}

export function maxAbsError(gpuValues: Float32Array, cpuValues: Float32Array): number {
  if (gpuValues.length !== cpuValues.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < cpuValues.length; i++) {
    const e = Math.abs(gpuValues[i] - cpuValues[i]);
    if (!(e <= worst)) worst = Number.isNaN(e) ? Infinity : e; // NaN never passes
  }
  return worst;
}

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

export const POOL_SHAPES: PoolShape[] = [
  { n: 1, c: 1, h: 2, w: 2 },
  { n: 2, c: 7, h: 7, w: 7 },
  { n: 1, c: 33, h: 33, w: 33 },
  { n: 3, c: 8, h: 28, w: 28 },
  { n: 2, c: 3, h: 2, w: 9 },
];

const label = (s: object) => Object.entries(s).map(([k, v]) => `${k}${v}`).join(' ');

function convCase(s: ConvShape, seed: number): ConvPoolCase {
  return {
    name: `conv2d ${label(s)}`,
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
        { what: 'forward y', maxError: maxAbsError(y, conv2dForwardCpu(s, x, weight, bias)), tolerance: PER_TERM * (taps + 1), count: y.length },
        { what: 'backward dx', maxError: maxAbsError(dx, conv2dBackwardInputCpu(s, dy, weight)), tolerance: PER_TERM * s.cout * s.kh * s.kw, count: dx.length },
        { what: 'backward dweight', maxError: maxAbsError(dw, cpuW.dWeight), tolerance: PER_TERM * s.n * oh * ow, count: dw.length },
        { what: 'backward dbias', maxError: maxAbsError(db, cpuW.dBias), tolerance: PER_TERM * s.n * oh * ow, count: db.length },
      ];
    },
  };
}

function poolCase(s: PoolShape, relu: boolean, ties: boolean, seed: number): ConvPoolCase {
  return {
    name: `maxpool2x2${relu ? '+relu' : ''}${ties ? ' ties' : ''} ${label(s)}`,
    async run(gpu) {
      const sz = poolSizes(s);
      const x = ties ? seededTies(sz.x, mixSeed(seed, 1)) : seededUniform(sz.x, mixSeed(seed, 1));
      const dy = seededUniform(sz.y, mixSeed(seed, 2));
      const gx = gpu.upload(x);
      const gdy = gpu.upload(dy);
      const gy = gpu.storage(sz.y);
      const ga = gpu.storage(sz.y);
      const gdx = gpu.storage(sz.x);
      gpu.record([planMaxPoolForward(gpu, s, gx, gy, ga, relu), planMaxPoolBackward(gpu, s, gdy, ga, gdx)]);
      const y = await gpu.readF32(gy, 0, sz.y);
      const argmax = await gpu.readU32(ga, 0, sz.y);
      const dx = await gpu.readF32(gdx, 0, sz.x);
      for (const b of [gx, gdy, gy, ga, gdx]) b.destroy();
      const cpu = maxPoolForwardCpu(s, x, relu);
      const wrongCells = argmax.reduce((bad, cell, i) => bad + (cell === cpu.argmax[i] ? 0 : 1), 0);
      return [
        { what: 'forward y', maxError: maxAbsError(y, cpu.y), tolerance: 0, count: y.length },
        { what: 'argmax cells differing', maxError: wrongCells, tolerance: 0, count: argmax.length },
        { what: 'backward dx', maxError: maxAbsError(dx, maxPoolBackwardCpu(s, dy, cpu.argmax)), tolerance: 0, count: dx.length },
      ];
    },
  };
}

export function convPoolCases(): ConvPoolCase[] {
  const cases: ConvPoolCase[] = CONV_SHAPES.map((s, i) => convCase(s, 100 + i));
  POOL_SHAPES.forEach((s, i) => {
    for (const relu of [false, true]) for (const ties of [false, true]) cases.push(poolCase(s, relu, ties, 200 + i));
  });
  return cases;
}

/**
 * The whole CNN, GPU against the CPU executor over its unfused graph (f64 op
 * oracles): loss and every element of the flat gradient buffer after one
 * forward/backward, with and without the hidden dense layer. Gradients are
 * O(0.1) sums of a few thousand products, so 5e-6 absolute leaves ~10x
 * margin over the errors measured (4e-7).
 */
function cnnCase(spec: Partial<CnnSpec>, batch: number, seed: number): ConvPoolCase {
  return {
    name: `cnn forward+backward channels ${spec.channels} hidden ${spec.hidden ?? 0} batch ${batch}`,
    async run(gpu) {
      const model = new Cnn(gpu, { ...spec, seed });
      try {
        const random = mulberry32(mixSeed(seed, 9));
        const x = Float32Array.from({ length: batch * model.inputSize }, () => random());
        const labels = Array.from({ length: batch }, (_, i) => (i * 3 + seed) % model.classes);
        const c = await checkModel(model, x, labels);
        return [
          { what: 'loss', maxError: Math.abs(c.loss - c.cpuLoss), tolerance: 1e-5, count: 1 },
          { what: 'flat gradient', maxError: c.gradError, tolerance: 5e-6, count: model.flatLength },
          // A gradient of zeros would match a broken reference trivially.
          { what: 'gradient mass', maxError: c.gradMass > 1e-2 ? 0 : 1, tolerance: 0, count: 1 },
        ];
      } finally {
        model.destroy();
      }
    },
  };
}

/** Every case as the shared oracle list takes it: its worst comparison (relative to its tolerance). */
function asOracleCase(c: ConvPoolCase): OracleCase {
  return {
    name: c.name,
    async run(gpu): Promise<OracleResult> {
      const results = await c.run(gpu);
      const badness = (r: Comparison) => (r.tolerance > 0 ? r.maxError / r.tolerance : r.maxError > 0 ? Infinity : 0);
      const worst = results.reduce((a, b) => (badness(b) > badness(a) ? b : a));
      return { maxAbsErr: worst.maxError, tol: worst.tolerance };
    },
  };
}

export const CNN_CASES: ConvPoolCase[] = [cnnCase({ channels: [3, 5], hidden: 0 }, 3, 31), cnnCase({ channels: [4, 6], hidden: 7 }, 2, 32)];

export const CONV_POOL_CASES: OracleCase[] = [...convPoolCases(), ...CNN_CASES].map(asOracleCase);
