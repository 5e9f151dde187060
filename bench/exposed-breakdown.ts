/**
 * Where a step's exposed allreduce goes, step by step and rank by rank, read from a `--timeline`
 * trace of `ringtrain run` (the figure `run --json` reports as exposed_allreduce_s_per_step):
 * from the end of the gradients' read-back, the wait until the last gradient sum ends (the ring,
 * and a slower peer), then until the update's submit begins (the checks after the sum, the finite
 * check, the write-back, the update's recording), the update's own run on the GPU (left out of
 * the figure), and the step's close (the timeline's `rounds` counter, at the step's report).
 * Last, each step's smallest exposed wait over the ranks: the rank that finished its compute last
 * waited on the ring alone, not on a slower peer, so that is what the ring cost the step.
 *
 *   npx tsx bench/exposed-breakdown.ts TRACE.json
 */
import { readFileSync } from 'node:fs';
import type { TraceEvent } from '../src/distributed/observe/timeline.ts';

const path = process.argv[2];
if (!path) {
  console.error('usage: npx tsx bench/exposed-breakdown.ts TRACE.json (a `ringtrain run --timeline` file)');
  process.exit(2);
}
const events = (JSON.parse(readFileSync(path, 'utf8')) as { traceEvents: TraceEvent[] }).traceEvents.filter(
  (e) => e.ph !== 'M',
);
const ms = (us: number) => Math.round(us / 1000);
const what = (e: TraceEvent) => String(e.args?.what ?? '');
const end = (e: TraceEvent) => e.ts + (e.dur ?? 0);

/** Per step, each rank's exposed wait (ms). */
const byStep: number[][] = [];
for (const pid of [...new Set(events.map((e) => e.pid))].sort((a, b) => a - b)) {
  const mine = events.filter((e) => e.pid === pid).sort((a, b) => a.ts - b.ts);
  const begins = mine.filter((e) => e.name === 'compute' && e.ph === 'X').map((e) => e.ts);
  const closes = mine.filter((e) => e.name === 'rounds' && e.ph === 'C').map((e) => e.ts);
  console.log(`rank ${pid}`);
  closes.forEach((close, step) => {
    const span = mine.filter((e) => e.ts >= begins[step] && e.ts <= close);
    const reads = span.filter((e) => e.name === 'gpu-wait' && what(e).startsWith('gradients'));
    if (reads.length === 0) return console.log(`  step ${step}: no gradient read-back`);
    const readEnd = Math.max(...reads.map(end));
    const sums = span.filter((e) => e.name.startsWith('collective gradients'));
    const sumEnd = Math.max(readEnd, ...sums.map(end));
    const update = span.find((e) => e.name === 'gpu-wait' && what(e) === 'update');
    const submitted = update?.ts ?? close;
    const onGpu = update?.dur ?? 0;
    (byStep[step] ??= []).push(close - readEnd - onGpu);
    console.log(
      `  step ${step}: ${ms(close - begins[step])} ms, read back by ${ms(readEnd - begins[step])}; ` +
        `last sum +${ms(sumEnd - readEnd)}, checks/finite/write-back/record +${ms(submitted - sumEnd)}, ` +
        `update on the GPU ${ms(onGpu)} (left out), close +${ms(close - submitted - onGpu)}: ` +
        `exposed ${ms(close - readEnd - onGpu)} ms`,
    );
  });
}
const ringCost = byStep.map((ranks) => Math.min(...ranks));
const steady = ringCost.slice(1);
console.log(
  `the ring's own (each step's smallest over the ranks), ms: ${ringCost.map(ms).join(', ')}; ` +
    `steps 1-${ringCost.length - 1}: mean ${steady.length ? ms(steady.reduce((a, b) => a + b, 0) / steady.length) : '-'}`,
);
