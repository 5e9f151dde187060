/** AdamW (src/optimizers/adamw.ts): the update, bias corrections included, against Loshchilov & Hutter's in f64. */
import type { OracleCase } from '../oracles/oracle-case.ts';
import { updateCase } from './update-case.ts';

export const ORACLE_CASES: OracleCase[] = [
  updateCase({
    optimizer: 'adamw',
    settings: { lr: 0.01, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.05 },
    n: 1000,
    // A small gradient in the middle: the step divides by the second moment's root.
    gradScales: [1, 0.01, 1],
    tol: 1e-5,
    reference: (p, g, [m, v], step, s) => {
      const [b1, b2] = s.betas as readonly [number, number];
      const [lr, eps, wd] = [s.lr as number, s.eps as number, s.weightDecay as number];
      for (let i = 0; i < p.length; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        const mh = m[i] / (1 - b1 ** step);
        const vh = v[i] / (1 - b2 ** step);
        p[i] -= lr * (mh / (Math.sqrt(vh) + eps) + wd * p[i]);
      }
    },
  }),
];
