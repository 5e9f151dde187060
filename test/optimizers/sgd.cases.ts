/** SGD with momentum (src/optimizers/sgd.ts): the update against PyTorch's form in f64. */
import type { OracleCase } from '../oracles/oracle-case.ts';
import { updateCase } from './update-case.ts';

export const ORACLE_CASES: OracleCase[] = [
  updateCase({
    optimizer: 'sgd',
    settings: { lr: 0.1, momentum: 0.9, weightDecay: 0.01 },
    n: 1000,
    gradScales: [1, 1, 1],
    tol: 1e-5,
    reference: (p, g, [v], _step, s) => {
      const [lr, momentum, wd] = [s.lr as number, s.momentum as number, s.weightDecay as number];
      for (let i = 0; i < p.length; i++) {
        v[i] = momentum * v[i] + g[i] + wd * p[i];
        p[i] -= lr * v[i];
      }
    },
  }),
];
