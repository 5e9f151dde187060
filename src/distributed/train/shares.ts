/**
 * Batch shares by measured speed (`--balance speed`): a ring whose peers are
 * uneven gives each one a part of the fixed global batch in proportion to how
 * fast it computes, so the fast ones stop waiting for the slow one.
 *
 * Every step each rank times its own compute (forward, backward and the
 * gradient read, up to the allreduce: not the waiting for others) per example,
 * keeps the median of its last few steps (a step that built a plan for a new
 * batch size is an outlier the median ignores), and the ranks allgather these
 * figures. Every rank then applies the same rule to the same numbers, so all
 * agree on the next step's shares without a coordinator:
 *   - the target share is proportional to speed (1 / time per example), with
 *     at least one example per rank (never a zero share: a rank with no data
 *     would still have to join every collective, and its speed would go unmeasured);
 *   - a step moves the shares toward the target by at most MAX_CHANGE of an
 *     equal share per rank (timing noise and a one-off stall cannot swing them);
 *   - a rank whose target is within DEADBAND of its share keeps it, so a
 *     settled ring keeps its batch sizes (each new size costs the model a plan).
 * Proportional shares settle where every rank's compute takes the same time.
 * Shares start equal, and start equal again whenever the ring re-forms (its
 * ranks are other peers then); each rank's own timings carry over.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/interface.ts';
import { allgather } from '../../collectives/allgather.ts';
import { checkShares, equalShares } from '../../data/global-batch.ts';

export type BalanceMode = 'equal' | 'speed';
export const BALANCE_MODES: readonly BalanceMode[] = ['equal', 'speed'];

/** Steps of timing whose median a rank reports. */
export const TIMING_WINDOW = 5;
/** The most a share moves in one step, as a fraction of an equal share. */
export const MAX_CHANGE = 0.25;
/** A target this close to the current share (fraction of it, at least one example) leaves it alone. */
export const DEADBAND = 0.08;

/**
 * Real-valued shares of `global` in proportion to `speeds`, each at least one:
 * ranks whose proportional part falls below one get one, the rest is split
 * among the others in proportion again.
 */
export function proportionalShares(global: number, speeds: readonly number[]): number[] {
  checkShares(global, speeds.length);
  if (speeds.some((v) => !(v > 0) || !Number.isFinite(v)))
    throw new RingtrainError(ErrorCode.InvalidArgument, `speeds must be finite and > 0, got [${speeds.join(', ')}]`);
  const out = new Array<number>(speeds.length).fill(0);
  const floored = new Set<number>();
  for (;;) {
    const free = speeds.map((_, r) => r).filter((r) => !floored.has(r));
    const left = global - floored.size;
    const total = free.reduce((a, r) => a + speeds[r], 0);
    const low = free.filter((r) => (left * speeds[r]) / total < 1);
    if (low.length === 0) {
      for (const r of free) out[r] = (left * speeds[r]) / total;
      for (const r of floored) out[r] = 1;
      return out;
    }
    for (const r of low) floored.add(r);
  }
}

/** Whole shares summing to `global` nearest `real` (largest remainders; ties to the lower rank). */
export function roundShares(global: number, real: readonly number[]): number[] {
  const whole = real.map((x) => Math.floor(x));
  let missing = global - whole.reduce((a, b) => a + b, 0);
  const order = real.map((x, r) => ({ r, frac: x - Math.floor(x) })).sort((a, b) => b.frac - a.frac || a.r - b.r);
  for (let k = 0; missing > 0; k = (k + 1) % order.length, missing--) whole[order[k].r]++;
  return whole;
}

/**
 * The next step's shares from the current ones and every rank's time per
 * example (ms). The same numbers give the same shares on every rank.
 */
export function nextShares(
  current: readonly number[],
  msPerExample: readonly number[],
  maxChange = MAX_CHANGE,
  deadband = DEADBAND,
): number[] {
  const global = current.reduce((a, b) => a + b, 0);
  if (msPerExample.length !== current.length)
    throw new RingtrainError(ErrorCode.InvalidArgument, `${msPerExample.length} timings for ${current.length} shares`);
  // A rank with no timing yet (it has not stepped, or its clock said 0): nothing to act on.
  if (msPerExample.some((t) => !(t > 0) || !Number.isFinite(t))) return [...current];
  const target = proportionalShares(
    global,
    msPerExample.map((t) => 1 / t),
  );
  if (target.every((x, r) => Math.abs(x - current[r]) <= Math.max(1, deadband * current[r]))) return [...current];
  // Current and target both sum to G: any blend of them does too, and none goes below one.
  const limit = Math.max(1, (maxChange * global) / current.length);
  const worst = Math.max(...target.map((x, r) => Math.abs(x - current[r])));
  const a = Math.min(1, limit / worst);
  return roundShares(
    global,
    target.map((x, r) => current[r] + a * (x - current[r])),
  );
}

/** One rank's side of the balance: its timings, and the ring's shares for the next step. */
export class ShareBalancer {
  private times: number[] = [];
  private current: number[] = [];

  constructor(readonly mode: BalanceMode) {
    if (!BALANCE_MODES.includes(mode))
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `balance must be one of ${BALANCE_MODES.join(', ')}, got '${String(mode)}'`,
      );
  }

  /** Equal shares of `global` over a (re-)formed ring of `size`. */
  reset(global: number, size: number): void {
    this.current = equalShares(global, size);
  }

  get shares(): readonly number[] {
    return this.current;
  }

  /** This rank computed `examples` examples in `ms`. */
  observe(examples: number, ms: number): void {
    if (this.mode !== 'speed' || !(examples > 0) || !(ms >= 0)) return;
    this.times.push(ms / examples);
    if (this.times.length > TIMING_WINDOW) this.times.shift();
  }

  /** The median of this rank's recent times per example (0 before the first step). */
  get msPerExample(): number {
    if (this.times.length === 0) return 0;
    const s = [...this.times].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  }

  /** With 'speed': one tiny allgather of every rank's time per example, then the next shares. Returns whether they changed. */
  async rebalance(comm: Communicator, timeoutMs?: number): Promise<boolean> {
    if (this.mode !== 'speed' || comm.size < 2) return false;
    const times = await allgather(comm, new Float32Array([this.msPerExample]), {
      name: 'batch-share-timings',
      timeoutMs,
    });
    const next = nextShares(this.current, Array.from(times));
    const changed = next.some((n, r) => n !== this.current[r]);
    this.current = next;
    return changed;
  }
}
