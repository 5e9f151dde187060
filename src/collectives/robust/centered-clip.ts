/**
 * Centered clipping (Karimireddy, He and Jaggi, "Learning from History for
 * Byzantine Robust Optimization", 2021): start from a reference v (the
 * previous step's aggregate, which every rank holds alike) and move it by the
 * mean of every rank's deviation from it, each deviation clipped to length
 * tau first:
 *
 *   v ← v + (1/N) Σ_i (x_i − v) · min(1, tau / ‖x_i − v‖)      (a few times)
 *
 * A wild rank moves v by at most tau/N per round, however large its vector;
 * honest ranks near the reference pass unclipped, so with honest ranks alone
 * the rule is close to the mean. Unlike the median it clips whole vectors
 * (one norm per rank), not each element on its own.
 *
 * Layout (as robust-aggregate.ts): rank c holds chunk c of every rank's
 * vector after the alltoall. A norm needs the whole vector, so each round
 * every rank publishes its chunk's N squared partial norms (one tiny
 * allgather of N floats) and every rank adds them up in rank order (the same
 * numbers in the same order: the same norms everywhere), then moves its chunk
 * of v. The chunks are allgathered at the end by the caller.
 *
 * Without a given tau, each round takes the median of the N deviation norms:
 * scale-free, and with fewer than half of the ranks wild it is an honest
 * rank's deviation. A non-finite deviation (a rank sending NaN or Infinity)
 * counts as clipped to nothing: that rank pulls v nowhere.
 */
import type { Communicator } from '../../comm/interface.ts';
import { allgather } from '../allgather.ts';

/** Rounds of clipping per step (the paper finds one enough from a good reference; three cost three tiny allgathers). */
export const CENTERED_CLIP_ROUNDS = 3;

/**
 * The clipping weights min(1, tau/‖d_i‖) for deviation norms `norms` (0 for a
 * non-finite norm). `tau` undefined: the median of the finite norms.
 */
export function clipWeights(norms: readonly number[], tau: number | undefined): number[] {
  const finite = norms.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  const m = finite.length >> 1;
  const radius = tau ?? (finite.length === 0 ? 0 : finite.length % 2 ? finite[m] : (finite[m - 1] + finite[m]) / 2);
  return norms.map((x) => (!Number.isFinite(x) ? 0 : x <= radius ? 1 : radius / x));
}

/**
 * One rank's part: `rows` holds N vectors of `m` values (this rank's chunk of
 * every rank's contribution), `v` this rank's chunk of the reference, which
 * becomes the rule's result in place. Every rank must call it, for its own chunk.
 */
export async function centeredClipChunk(
  comm: Communicator,
  rows: Float32Array,
  n: number,
  m: number,
  v: Float32Array,
  tau: number | undefined,
  opts: { name: string; timeoutMs?: number; rounds?: number },
): Promise<void> {
  const rounds = opts.rounds ?? CENTERED_CLIP_ROUNDS;
  const partial = new Float32Array(n);
  for (let round = 0; round < rounds; round++) {
    for (let r = 0; r < n; r++) {
      let s = 0;
      for (let i = 0; i < m; i++) {
        const d = rows[r * m + i] - v[i];
        s += d * d;
      }
      // NaN travels as NaN and makes the whole norm non-finite, as Infinity does.
      partial[r] = s;
    }
    const all = await allgather(comm, partial, { name: `${opts.name}/clip-norms-${round}`, timeoutMs: opts.timeoutMs });
    const norms = Array.from({ length: n }, (_, r) => {
      let s = 0;
      for (let c = 0; c < n; c++) s += all[c * n + r];
      return Math.sqrt(s);
    });
    const w = clipWeights(norms, tau);
    // All deviations against the same v: the update is the mean of clipped deviations (Jacobi, not Gauss-Seidel).
    for (let i = 0; i < m; i++) {
      let step = 0;
      for (let r = 0; r < n; r++) if (w[r] > 0) step += w[r] * (rows[r * m + i] - v[i]);
      v[i] += step / n;
    }
  }
}
