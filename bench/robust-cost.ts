/**
 * What each aggregation rule costs besides the wire: N ranks on memory links
 * (no network, so the difference between rules is their own work: the
 * alltoall's copies, the per-element sort, centered clipping's rounds) combine
 * a gradient the size of the MLP's, every rule in turn, several times; the
 * median milliseconds per call of each, beside the ring allreduce measured in
 * the same run. One JSON line.
 *
 * Usage: npx tsx bench/robust-cost.ts [--np 4] [--length 101770] [--repeats 15]
 */
import { createMemoryRing } from '../src/comm/rings.ts';
import { allreduceInPlace } from '../src/collectives/allreduce.ts';
import { parseAggregation, robustAllreduce } from '../src/collectives/robust/robust-aggregate.ts';
import { mulberry32 } from '../src/core/random.ts';
import { opt } from './args.ts';
import { median } from '../src/core/stats.ts';

const np = Number(opt('np', '4'));
const length = Number(opt('length', String(784 * 128 + 128 + 128 * 10 + 10)));
const repeats = Number(opt('repeats', '15'));
const rand = mulberry32(3);
const inputs = Array.from({ length: np }, () => Float32Array.from({ length }, () => rand() - 0.5));

async function once(rule: string): Promise<number> {
  const comms = createMemoryRing(np);
  const t0 = performance.now();
  if (rule === 'ring')
    await Promise.all(comms.map((c, r) => allreduceInPlace(c, inputs[r].slice(), { name: 'g', op: 'average' })));
  else await Promise.all(comms.map((c, r) => robustAllreduce(c, inputs[r], parseAggregation(rule), { name: 'g' })));
  const ms = performance.now() - t0;
  comms.forEach((c) => c.close());
  return ms;
}

const rules = ['ring', 'mean', 'median', 'trimmed-mean:0.25', 'centered-clip'];
const times: Record<string, number[]> = Object.fromEntries(rules.map((r) => [r, []]));
// Interleaved, so a load that drifts during the run touches every rule alike.
for (let i = 0; i < repeats; i++) for (const r of rules) times[r].push(await once(r));
const ms = Object.fromEntries(rules.map((r) => [r, Number(median(times[r]).toFixed(1))]));
console.log(
  JSON.stringify({
    bench: 'robust-cost',
    np,
    length,
    repeats,
    median_ms_all_ranks_one_process: ms,
    vs_ring: Object.fromEntries(rules.map((r) => [r, Number((ms[r] / ms.ring).toFixed(2))])),
  }),
);
