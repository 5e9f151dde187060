/**
 * 2x2 max-pool, optionally with a fused ReLU in front (src/nn/ops/maxpool):
 * gradchecks against the f64 oracle and finite differences, and the kernels
 * (forward with and without the fused ReLU, argmax, backward) against the f64
 * reference over a grid of shapes, on uniform inputs and on inputs full of
 * exact ties. Max-pool does no arithmetic, so the kernels must match exactly,
 * argmax included.
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { mixSeed } from '../../../src/data/random.ts';
import { maxPool2dOp } from '../../../src/nn/ops/maxpool/index.ts';
import { planMaxPoolBackward, planMaxPoolForward } from '../../../src/nn/ops/maxpool/kernel.ts';
import {
  type PoolShape,
  maxPoolBackwardCpu,
  maxPoolForwardCpu,
  poolSizes,
} from '../../../src/nn/ops/maxpool/reference.ts';
import {
  asOracleCase,
  type ComparedCase,
  maxAbsError,
  seededTies,
  seededUniform,
  shapeLabel,
} from '../../oracles/comparisons.ts';
import type { OracleCase } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: maxPool2dOp, label: 'x[2,3,6,5]', inputs: [s(2, 3, 6, 5)] },
  { op: maxPool2dOp, label: 'x[2,3,6,6], fused relu', inputs: [s(2, 3, 6, 6)], attrs: { relu: true } },
];

export const POOL_SHAPES: PoolShape[] = [
  { n: 1, c: 1, h: 2, w: 2 },
  { n: 2, c: 7, h: 7, w: 7 },
  { n: 1, c: 33, h: 33, w: 33 },
  { n: 3, c: 8, h: 28, w: 28 },
  { n: 2, c: 3, h: 2, w: 9 },
];

function poolCase(s: PoolShape, relu: boolean, ties: boolean, seed: number): ComparedCase {
  return {
    name: `maxpool2x2${relu ? '+relu' : ''}${ties ? ' ties' : ''} ${shapeLabel(s)}`,
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
        {
          what: 'backward dx',
          maxError: maxAbsError(dx, maxPoolBackwardCpu(s, dy, cpu.argmax)),
          tolerance: 0,
          count: dx.length,
        },
      ];
    },
  };
}

export const ORACLE_CASES: OracleCase[] = POOL_SHAPES.flatMap((shape, i) =>
  [false, true].flatMap((relu) => [false, true].map((ties) => asOracleCase(poolCase(shape, relu, ties, 200 + i)))),
);
