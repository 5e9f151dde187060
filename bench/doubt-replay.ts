/**
 * The doubt rule (src/distributed/robust/doubt.ts) replayed over recorded honest runs:
 * the per-step norms and sketches that `bench/gradient-directions.ts --raw`
 * writes. Nothing trains here; every figure is what `DoubtTracker` itself
 * would have decided from those numbers.
 *
 * - Honest: how many contributions it would leave out, clip, and which ranks
 *   it would name (an honest rank named is the error that stops a job).
 * - Attacked, counterfactually: from every start step s, rank 0 sends its own
 *   gradient times --factor (sketch and norm). The delay is the number of steps
 *   from s until rank 0 is named (0: named at s itself), and `summed` counts the
 *   attacked steps before naming whose contribution went into the sum, with
 *   the factor it went in at (1 unclipped, less when clipped). The tracker sees
 *   the honest steps before s first (up to --warm of them), so its averages are
 *   those of a run in progress. After a left-out step the real run trains on
 *   the others' mean, which the recording (everyone honest) only approximates.
 *
 * Prints one JSON line per trace and rule.
 *
 * Usage: npx tsx bench/doubt-replay.ts TRACE.json [TRACE2.json ...] [--ratio 4] [--cosine 0] [--clip 2]
 *        [--named-after 3] [--factor -20] [--warm 40] [--horizon 10] [--starts-from S] [--starts-to T]
 */
import { readFileSync } from 'node:fs';
import {
  DEFAULT_CLIP_RATIO,
  DEFAULT_DOUBT_COSINE,
  DEFAULT_DOUBT_RATIO,
  DEFAULT_NAMED_AFTER,
  DoubtTracker,
  type DoubtOptions,
} from '../src/distributed/robust/doubt.ts';
import { median } from '../src/core/stats.ts';
import { args, opt } from './args.ts';
import { percentiles } from './percentiles.ts';

interface Trace {
  model: string;
  ranks: number;
  batch: number;
  seed: number;
  norms: number[][];
  sketches: number[][][];
}

const rule: DoubtOptions = {
  ratio: Number(opt('ratio', String(DEFAULT_DOUBT_RATIO))),
  cosine: Number(opt('cosine', String(DEFAULT_DOUBT_COSINE))),
  clipRatio: Number(opt('clip', String(DEFAULT_CLIP_RATIO))),
  namedAfter: Number(opt('named-after', String(DEFAULT_NAMED_AFTER))),
};
const factor = Number(opt('factor', '-20'));
const warm = Number(opt('warm', '40'));
const horizon = Number(opt('horizon', '10'));
/** Attacks starting at steps [from, to) only (default: every step with a whole horizon after it). */
const startFrom = Number(opt('starts-from', '0'));
const startTo = Number(opt('starts-to', 'Infinity'));

/** The order statistics each attack figure reports. */
const SPREAD = [0.5, 0.9, 0.99, 1];

function replayHonest(t: Trace) {
  const tracker = new DoubtTracker(rule);
  let leftOut = 0;
  let clipped = 0;
  const named: { step: number; rank: number; reason: string }[] = [];
  // The margin: each rank's current run of left-out steps, and the longest any rank had (named at namedAfter).
  const run = new Array<number>(t.ranks).fill(0);
  let longestRun = 0;
  // How many runs of left-out steps reached each length (index 1: at least one step, 2: two in a row...).
  const runsReaching: number[] = [];
  t.norms.forEach((norms, step) => {
    const v = tracker.judge(
      step,
      t.sketches[step].map((s) => Float64Array.from(s)),
      norms,
    );
    leftOut += v.leftOut.length;
    clipped += v.clipped.length;
    for (const n of v.named) named.push({ step, rank: n.rank, reason: n.reason });
    for (let r = 0; r < t.ranks; r++) {
      run[r] = v.leftOut.some((x) => x.rank === r) ? run[r] + 1 : 0;
      if (run[r] > 0) runsReaching[run[r]] = (runsReaching[run[r]] ?? 0) + 1;
    }
    longestRun = Math.max(longestRun, ...run);
  });
  return {
    contributions: t.norms.length * t.ranks,
    leftOut,
    clipped,
    longestLeftOutRun: longestRun,
    leftOutRunsReaching: runsReaching.slice(1),
    named: named.slice(0, 5),
    namedCount: named.length,
  };
}

function replayAttack(t: Trace, start: number): { delay: number | null; summed: number[] } {
  const tracker = new DoubtTracker(rule);
  for (let step = Math.max(0, start - warm); step < start; step++)
    tracker.judge(
      step,
      t.sketches[step].map((s) => Float64Array.from(s)),
      t.norms[step],
    );
  const summed: number[] = [];
  for (let step = start; step < Math.min(t.norms.length, start + horizon); step++) {
    const norms = t.norms[step].map((n, r) => (r === 0 ? n * Math.abs(factor) : n));
    const sketches = t.sketches[step].map((s, r) => Float64Array.from(s, (x) => (r === 0 ? x * factor : x)));
    const v = tracker.judge(step, sketches, norms);
    if (v.named.some((n) => n.rank === 0)) return { delay: step - start, summed };
    if (v.leftOut.some((x) => x.rank === 0)) continue;
    // What went into the sum, in units of the others' median norm this step.
    summed.push((norms[0] * (v.clipped.find((c) => c.rank === 0)?.factor ?? 1)) / median(norms.slice(1)));
  }
  return { delay: null, summed };
}

for (const path of args.filter((a) => a.endsWith('.json'))) {
  const t = JSON.parse(readFileSync(path, 'utf8')) as Trace;
  const attacks = t.norms
    .map((_, s) => s)
    .filter((s) => s + horizon <= t.norms.length && s >= startFrom && s < startTo)
    .map((s) => replayAttack(t, s));
  const delays = attacks.map((a) => a.delay);
  const within = (k: number) => delays.filter((d) => d !== null && d <= k).length / delays.length;
  console.log(
    JSON.stringify({
      bench: 'doubt-replay',
      trace: path,
      model: t.model,
      ranks: t.ranks,
      batch: t.batch,
      steps: t.norms.length,
      rule: { ...rule, factor },
      honest: replayHonest(t),
      attack: {
        starts: attacks.length,
        namedWithin1: within(1),
        namedWithin2: within(2),
        notNamed: delays.filter((d) => d === null).length,
        delay: percentiles(
          delays.filter((d): d is number => d !== null),
          SPREAD,
        ),
        summedSteps: percentiles(
          attacks.map((a) => a.summed.length),
          SPREAD,
        ),
        // The largest attacked contribution summed before naming, over the others' median norm (0: none summed).
        worstSummed: percentiles(
          attacks.map((a) => Math.max(0, ...a.summed)),
          SPREAD,
        ),
        // All of them together: what the attack added to the model before it was named, in honest-norm units.
        totalSummed: percentiles(
          attacks.map((a) => a.summed.reduce((x, y) => x + y, 0)),
          SPREAD,
        ),
      },
    }),
  );
}
