/**
 * Uneven peers: N Deno workers over real WebRTC, one of them slowed
 * K× by the chaos entry's `--chaos slow:Kx` (test/support/chaos) (its compute takes K times as long),
 * train the same job twice, once with equal shares of the global batch and once
 * with `balance: 'speed'` (shares by measured speed, src/distributed/train/shares.ts).
 * Both runs take the same global batches, so they should end at the same
 * accuracy; the balanced one should get through them faster.
 *
 * Prints one JSON line: for each mode rank 0's samples/s (the trainer's: global
 * batch per step over its step time), the wall-clock samples/s between the
 * first and last step seen, the final shares and the test accuracy; and the
 * balanced/equal ratios.
 *
 * Usage: sh scripts/in-netns.sh npx tsx bench/balance.ts [--np 4] [--slow 3] [--model mlp] [--global-batch 128] [--steps
 * 150] [--seed 7] [--modes equal,speed] [--rounds 1] [--trace PATH]
 * `--trace PATH` writes every worker's steps (time, step, share) per mode as JSON, to see how the shares moved.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { forEachLine } from '../src/core/lines.node.ts';
import { TOKEN_ENV } from '../src/cli/options/secrets.node.ts';
import { startServer } from '../server/index.ts';
import { opt } from './args.ts';
import { CHAOS_ENTRY } from '../test/support/workers.ts';
import { median } from '../src/core/stats.ts';

const np = Number(opt('np', '4'));
const slow = Number(opt('slow', '3'));
const model = opt('model', 'mlp');
const globalBatch = Number(opt('global-batch', String(32 * np)));
const steps = Number(opt('steps', '150'));
const seed = Number(opt('seed', '7'));
const modes = opt('modes', 'equal,speed').split(',') as ('equal' | 'speed')[];
const tracePath = opt('trace', '');
const traces: Record<string, unknown> = {};

/** On a machine shared with other jobs a worker may be starved for half a minute: a bench waits, where a job would give up. */
const SLACK = { timeoutMs: 180_000, peerTimeoutMs: 180_000 };

if (process.env.RINGTRAIN_NETNS !== '1')
  throw new Error('run inside scripts/in-netns.sh: WebRTC stays inside a private namespace');

interface Worker {
  rank?: number;
  steps: { at: number; step: number; samples: number }[];
  result?: Record<string, unknown>;
  stderr: string;
  exit: Promise<number | null>;
}

async function run(balance: 'equal' | 'speed') {
  const job = {
    id: `balance-${balance}`,
    token: `balance-${balance}-token`,
    config: {
      model,
      optimizer: 'sgd',
      hyperparameters: { lr: 0.05, momentum: 0.9, seed, steps, globalBatch, balance, lrSchedule: 'cosine', ...SLACK },
      batchPerPeer: Math.ceil(globalBatch / np),
      minPeers: np,
      maxPeers: np,
    },
  };
  const server = await startServer({ jobs: [job], staticDir: null, missedHeartbeats: 12 });
  try {
    const workers = Array.from({ length: np }, (_, i) => {
      // The slowed worker runs from the chaos entry (test/support/chaos), the others from the CLI's own.
      const slowed = i === np - 1;
      const args = [
        'run',
        '-A',
        slowed ? CHAOS_ENTRY : 'src/cli/main.ts',
        'worker',
        '--server',
        server.url,
        '--job',
        job.id,
        '--name',
        `w-${i}`,
        '--events',
        ...(slowed ? ['--chaos', `slow:${slow}x`] : []),
      ];
      const child = spawn('node_modules/.bin/deno', args, {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, [TOKEN_ENV]: job.token },
      });
      const w: Worker = {
        steps: [],
        stderr: '',
        exit: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
      };
      forEachLine(child.stdout!, (line) => {
        if (!line.startsWith('{')) return;
        const m = JSON.parse(line) as Record<string, unknown>;
        if (m.event === 'joined') w.rank = Number(m.rank);
        if (m.event === 'step') w.steps.push({ at: Date.now(), step: Number(m.step), samples: Number(m.samples) });
        if (m.event === 'result') w.result = m;
      });
      child.stderr!.setEncoding('utf8').on('data', (d: string) => (w.stderr += d));
      return w;
    });
    const codes = await Promise.all(workers.map((w) => w.exit));
    codes.forEach((c, i) => {
      if (c !== 0) throw new Error(`${balance}: worker ${i} exited with ${c}:\n${workers[i].stderr.slice(-3000)}`);
    });
    traces[`${balance}-${Date.now()}`] = workers.map((w) => ({
      rank: w.rank,
      slowed: w === workers[np - 1],
      steps: w.steps,
    }));
    const rank0 = workers.find((w) => w.rank === 0)!;
    // Wall clock from the 10th step on (the first ones compile kernels and form the ring).
    const from = rank0.steps.find((s) => s.step === 10)!;
    const last = rank0.steps.at(-1)!;
    const wall = ((last.step - from.step) * globalBatch) / ((last.at - from.at) / 1000);
    return {
      samples_per_s: Number(rank0.result!.samples_per_s),
      wall_samples_per_s: wall,
      test_accuracy: Number(rank0.result!.test_accuracy),
      // Last step's shares, by worker (the last one is the slow one).
      final_shares: workers.map((w) => w.steps.at(-1)?.samples ?? null),
    };
  } finally {
    await server.close();
  }
}

// Modes alternate, `rounds` times each (equal, speed, equal, speed...): on a shared machine whose load drifts,
// back-to-back runs of one mode then the other measured the drift (a 0.42x "ratio" when the load rose between them).
const rounds = Number(opt('rounds', '1'));
const runs: Record<'equal' | 'speed', Awaited<ReturnType<typeof run>>[]> = { equal: [], speed: [] };
for (let i = 0; i < rounds; i++) for (const m of modes) runs[m].push(await run(m));
if (tracePath) writeFileSync(tracePath, JSON.stringify(traces));
const [equal, speed] = [runs.equal, runs.speed];
const header = {
  bench: 'balance',
  np,
  slowed: `1 worker, slow:${slow}x`,
  model,
  global_batch: globalBatch,
  steps,
  seed,
  rounds,
};
if (equal.length === 0 || speed.length === 0) {
  console.log(JSON.stringify({ ...header, equal, speed }));
  process.exit(0);
}
// Each round's ratio is of two runs next to each other in time; the median over rounds is reported.
const ratios = equal.map((e, i) => speed[i].samples_per_s / e.samples_per_s);
const wallRatios = equal.map((e, i) => speed[i].wall_samples_per_s / e.wall_samples_per_s);
console.log(
  JSON.stringify({
    ...header,
    equal,
    speed,
    samples_per_s_ratio: Number(median(ratios).toFixed(3)),
    samples_per_s_ratio_by_round: ratios.map((r) => Number(r.toFixed(3))),
    wall_samples_per_s_ratio: Number(median(wallRatios).toFixed(3)),
    accuracy_difference_points: Number(((speed[0].test_accuracy - equal[0].test_accuracy) * 100).toFixed(2)),
  }),
);
