/** The f64 references of exp and rsqrt: the ops' oracles (their `cpu` half). */

export const expRef = {
  f: (x: number): number => Math.exp(x),
  /** The derivative from the output: d eˣ/dx = eˣ. */
  dfFromY: (y: number): number => y,
};

export const rsqrtRef = {
  f: (x: number, eps = 0): number => 1 / Math.sqrt(x + eps),
  /** d (x + ε)^(−½) / dx = −½ · y³. */
  dfFromY: (y: number): number => -0.5 * y * y * y,
};
