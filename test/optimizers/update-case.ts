/**
 * An optimizer's oracle case: its update run on the GPU through the one runner every optimizer
 * goes through (src/gpu/kernels/optimizers.ts), a few steps over seeded parameters and gradients,
 * against an f64 reference of the same steps written in the optimizer's test file. The error is
 * the worst of the parameters' and every state buffer's, relative to max(1, |reference|).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { optimizerFields, planOptimizerUpdate } from '../../src/gpu/kernels/optimizers.ts';
import { requireOptimizer, resolveSettings, type ResolvedSettings } from '../../src/optimizers/index.ts';
import { draws, relErr, scoped, type OracleCase } from '../oracles/oracle-case.ts';

export interface UpdateCase {
  optimizer: string;
  /** Settings given (the rest take the optimizer's defaults). */
  settings: Record<string, number | readonly [number, number]>;
  n: number;
  /** Each step's gradient scale (a small one where an optimizer divides by a moment). */
  gradScales: number[];
  tol: number;
  /**
   * One step of the reference in f64, in place: `state` in the definition's order (each starting at
   * zero), `step` 1-based, `s` every setting resolved.
   */
  reference(p: Float64Array, g: Float32Array, state: Float64Array[], step: number, s: ResolvedSettings): void;
}

export function updateCase(c: UpdateCase): OracleCase {
  const definition = requireOptimizer(c.optimizer, 'updateCase');
  const settings = resolveSettings(definition, c.settings, `updateCase(${c.optimizer})`);
  const label = Object.entries(c.settings)
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(', ');
  return {
    name: `optimizer ${c.optimizer} (${label}), ${c.gradScales.length} steps n=${c.n}: params and ${definition.state.join(', ')}`,
    run: (gpu: Gpu) =>
      scoped(gpu, async (t) => {
        const { rand } = draws(`optimizer ${c.optimizer} ${label}`);
        const p0 = rand(c.n);
        const grads = c.gradScales.map((scale) => rand(c.n, scale));
        const param = t(gpu.upload(p0));
        const grad = t(gpu.storage(c.n));
        const state = definition.state.map(() => t(gpu.storage(c.n)));
        const uniform = t(gpu.uniform(optimizerFields(definition.uniform(settings, 1))));
        const update = planOptimizerUpdate(gpu, definition, { uniform, param, grad, state }, c.n);
        const p = Float64Array.from(p0);
        const refState = definition.state.map(() => new Float64Array(c.n));
        grads.forEach((g, i) => {
          gpu.write(grad, g);
          gpu.writeUniform(uniform, optimizerFields(definition.uniform(settings, i + 1)));
          gpu.record(update);
          c.reference(p, g, refState, i + 1, settings);
        });
        let worst = relErr(await gpu.readF32(param, 0, c.n), p);
        for (let i = 0; i < state.length; i++)
          worst = Math.max(worst, relErr(await gpu.readF32(state[i], 0, c.n), refState[i]));
        return { maxAbsErr: worst, tol: c.tol };
      }),
  };
}
