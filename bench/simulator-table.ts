/**
 * The Markdown table of docs/SCALING.md from bench/simulator-check.ts's JSON lines:
 *   npx tsx bench/simulator-table.ts check.jsonl
 * One row per check (each repeat its own row, so the spread shows).
 */
import { readFileSync } from 'node:fs';

interface Check {
  kind: 'check';
  model: string;
  peers: number;
  repeat: number;
  predicted_steps_per_s: number;
  probed_cores: number;
  predicted_at_probed_cores: number;
  measured_steps_per_s: number;
  error_pct: number;
  error_at_probed_cores_pct: number;
  /** The same, compute CPU held at one peer's (before the crowded input); absent in older files. */
  error_without_crowding_pct?: number;
  cpu_per_peer_s: { predicted: number; measured: number };
  run: { cores_busy: number; load: [number, number] };
}

const file = process.argv[2];
if (!file)
  throw new Error('usage: npx tsx bench/simulator-table.ts CHECK.jsonl (the output of bench/simulator-check.ts)');
const lines = readFileSync(file, 'utf8')
  .trim()
  .split('\n')
  .filter((l) => l.startsWith('{'))
  .map((l) => JSON.parse(l) as { kind: string });
const checks = lines.filter((l): l is Check => l.kind === 'check');
const pct = (x: number) => `${x > 0 ? '+' : ''}${x.toFixed(1)}%`;
const out = [
  '| model | N | run | predicted, 2 cores | cores probed (mean of before/after) | predicted at those cores | measured steps/s | off by (probed cores) | off by, compute CPU not crowded | off by (2 cores) | CPU-s per peer per step: model / run | cores the run got | load before → after |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
];
for (const c of checks) {
  out.push(
    `| ${c.model} | ${c.peers} | ${c.repeat + 1} | ${c.predicted_steps_per_s.toFixed(2)} | ${c.probed_cores.toFixed(2)} | ${c.predicted_at_probed_cores.toFixed(2)} | ${c.measured_steps_per_s.toFixed(2)} | ${pct(c.error_at_probed_cores_pct)} | ${c.error_without_crowding_pct === undefined ? '–' : pct(c.error_without_crowding_pct)} | ${pct(c.error_pct)} | ${c.cpu_per_peer_s.predicted.toFixed(3)} / ${c.cpu_per_peer_s.measured.toFixed(3)} | ${c.run.cores_busy.toFixed(2)} | ${c.run.load[0].toFixed(0)} → ${c.run.load[1].toFixed(0)} |`,
  );
}
const worst = checks.reduce((w, c) => Math.max(w, Math.abs(c.error_at_probed_cores_pct)), 0);
out.push('', `${checks.length} runs; the largest error at the probed cores: ${worst.toFixed(1)}%.`);
process.stdout.write(out.join('\n') + '\n');
