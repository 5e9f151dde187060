/**
 * The loss-scaling kernels (shaders/loss_scale.wgsl, src/gpu/kernels/loss-scale.ts) against an f64
 * reference: `seed` multiplies by S, `unscale` by 1/S and raises the flag at a non-finite result, and
 * only there. S is a power of two, as dynamic loss scaling keeps it, so both are exact: tolerance 0.
 */
import { planLossScale } from '../../src/gpu/kernels/loss-scale.ts';
import { draws, type OracleCase, relErr, scoped } from './oracle-case.ts';

const { rand } = draws('loss_scale');

function lossScaleCase(n: number, scale: number, poison?: number): OracleCase {
  return {
    name: `loss_scale seed and unscale n=${n} S=2^${Math.log2(scale)}${poison === undefined ? '' : ` with ${poison} at the end`}`,
    run: (gpu) =>
      scoped(gpu, async (t) => {
        const values = rand(n, 100);
        const grads = rand(n, 1e4);
        if (poison !== undefined) grads[n - 1] = poison;
        const buffers = { scale: t(gpu.upload(Float32Array.from([scale, 1 / scale]))), flag: t(gpu.storage(1)) };
        const [v, g] = [t(gpu.upload(values)), t(gpu.upload(grads))];
        gpu.record([...planLossScale(gpu, 'seed', v, n, buffers), ...planLossScale(gpu, 'unscale', g, n, buffers)]);
        const seeded = relErr(
          await gpu.readF32(v, 0, n),
          Float64Array.from(values, (x) => x * scale),
        );
        const finite = poison === undefined ? n : n - 1;
        const got = await gpu.readF32(g, 0, n);
        const unscaled = relErr(
          got.subarray(0, finite),
          Float64Array.from(grads.subarray(0, finite), (x) => x / scale),
        );
        const [flag] = await gpu.readU32(buffers.flag, 0, 1);
        const flagRight = flag === (poison === undefined ? 0 : 1);
        const poisonKept = poison === undefined || Object.is(got[n - 1], poison / scale);
        return { maxAbsErr: flagRight && poisonKept ? Math.max(seeded, unscaled) : Infinity, tol: 0 };
      }),
  };
}

export const LOSS_SCALE_CASES: OracleCase[] = [
  lossScaleCase(1, 2 ** 16),
  lossScaleCase(513, 2 ** 10),
  lossScaleCase(70_001, 2 ** -3),
  lossScaleCase(129, 2 ** 16, Infinity),
  lossScaleCase(129, 2 ** 16, NaN),
];
