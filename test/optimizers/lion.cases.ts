/**
 * Lion (src/optimizers/lion.ts): its update against Chen et al.'s in f64, and the words workload
 * trained with it (words.test.ts runs WORDS_RUN).
 */
import type { OracleCase } from '../oracles/oracle-case.ts';
import { updateCase } from './update-case.ts';

/** One step of Lion in f64, in place. */
function lionStep(p: Float64Array, g: Float32Array, m: Float64Array, lr: number, b1: number, b2: number, wd: number) {
  for (let i = 0; i < p.length; i++) {
    const c = b1 * m[i] + (1 - b1) * g[i];
    p[i] -= lr * (Math.sign(c) + wd * p[i]);
    m[i] = b2 * m[i] + (1 - b2) * g[i];
  }
}

const SETTINGS = [
  // A large lr, so that a coordinate whose sign went wrong would stand out (by 2·lr) against 1e-6.
  { settings: { lr: 0.1, betas: [0.9, 0.99], weightDecay: 0.1 }, gradScales: [1, 0.01, 1, 1] },
  { settings: { lr: 0.01, betas: [0.95, 0.98], weightDecay: 0 }, gradScales: [1, 1, 1] },
] as const;

export const ORACLE_CASES: OracleCase[] = SETTINGS.map(({ settings, gradScales }) =>
  updateCase({
    optimizer: 'lion',
    settings,
    n: 1000,
    gradScales: [...gradScales],
    tol: 1e-6,
    reference: (p, g, [m], _step, s) => {
      const [b1, b2] = s.betas as readonly [number, number];
      lionStep(p, g, m, s.lr as number, b1, b2, s.weightDecay as number);
    },
  }),
);

/**
 * A third of the words recipe's AdamW lr of 3e-3 (Chen et al.: 3-10x smaller), its decay 10x larger:
 * the recipe's 100 warm-up steps leave a short run at a fifth of it, so the smaller ratio.
 */
export const WORDS_RUN = ['--lr', '0.001', '--weight-decay', '0.1'];
