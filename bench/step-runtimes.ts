/**
 * The training-step benchmark (bench/gpu-step.ts) under Node and under Deno,
 * one after the other in the same run on the same machine, with Deno's
 * figures as ratios of Node's. Node gets Dawn (SwiftShader on a machine
 * without a GPU), Deno gets wgpu (lavapipe there): the comparison behind
 * `--runtime auto`.
 *
 *   npx tsx bench/step-runtimes.ts [gpu-step options…]
 *
 * Prints one JSON line:
 * {"node":{…},"deno":{…},"deno_over_node":[{"model","batch","deferred_samples_per_s","synced_samples_per_s"}]}
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cliCommand } from '../src/cli/host.node.ts';
import { args } from './args.ts';

const root = fileURLToPath(new URL('../', import.meta.url));
interface StepRow {
  model: string;
  batch: number;
  synced_samples_per_s: number;
  deferred_samples_per_s: number;
}

function runUnder(runtime: 'node' | 'deno'): { steps: StepRow[] } & Record<string, unknown> {
  const [exe] = cliCommand(runtime);
  const argv =
    runtime === 'deno'
      ? ['run', '-A', 'bench/gpu-step.ts', ...args]
      : ['--import', 'tsx', 'bench/gpu-step.ts', ...args];
  const r = spawnSync(exe, argv, { cwd: root, encoding: 'utf8', maxBuffer: 1 << 24 });
  const line = r.stdout.trim().split('\n').pop() ?? '';
  if (r.status !== 0 || !line.startsWith('{')) {
    throw new Error(`bench/gpu-step.ts under ${runtime} failed (exit ${r.status}): ${r.stderr.slice(-1000)}`);
  }
  return JSON.parse(line);
}

const node = runUnder('node');
const deno = runUnder('deno');
const ratio = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 1000) / 1000 : null);
const denoOverNode = deno.steps.map((d, i) => {
  const n = node.steps[i];
  return {
    model: d.model,
    batch: d.batch,
    deferred_samples_per_s: ratio(d.deferred_samples_per_s, n.deferred_samples_per_s),
    synced_samples_per_s: ratio(d.synced_samples_per_s, n.synced_samples_per_s),
  };
});
console.log(JSON.stringify({ node, deno, deno_over_node: denoOverNode }));
