/**
 * What an elastic run loses when a worker dies: `ringtrain run -np N --elastic`
 * unbroken, then the same run (same seed, same steps) with the process holding
 * rank `--kill-rank` SIGKILLed once rank 0 reports `--kill-at` steps. Prints one
 * JSON line: both test accuracies, their difference in points, and how long the
 * ring took to re-form (the launcher's own figure).
 *
 * Usage: sh scripts/in-netns.sh tsx bench/elastic-recovery.ts [--np 3] [--steps 300] [--kill-at 100] [--kill-rank 0]
 * [--seed 7] [--batch 32]
 */
import { spawn } from 'node:child_process';
import { opt } from './args.ts';

const np = Number(opt('np', '3'));
const steps = Number(opt('steps', '300'));
const killAt = Number(opt('kill-at', String(Math.floor(steps / 3))));
const killRank = Number(opt('kill-rank', '0'));
const seed = opt('seed', '7');
const batch = opt('batch', '32');

if (process.env.RINGTRAIN_NETNS !== '1')
  throw new Error('run inside scripts/in-netns.sh: WebRTC stays inside a private namespace');

interface Outcome {
  code: number | null;
  summary: { test_accuracy: number; steps: number; size: number; ok: boolean; global_batch?: number };
  reformSeconds: number | null;
  reformStep: number | null;
  killedAt: number | null;
  stderr: string;
}

function run(kill: boolean): Promise<Outcome> {
  const args = [
    'bin/ringtrain.js',
    'run',
    '-np',
    String(np),
    '--elastic',
    '--model',
    'mlp',
    '--steps',
    String(steps),
    '--batch',
    batch,
    '--seed',
    seed,
    '--json',
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let killedAt: number | null = null;
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => {
    stderr += d;
    if (!kill || killedAt !== null) return;
    const reached = Math.max(0, ...[...stderr.matchAll(/^step (\d+)\//gm)].map((m) => Number(m[1])));
    const victim = new RegExp(`rank ${killRank} \\S+ \\(pid (\\d+)\\)`).exec(stderr);
    if (reached >= killAt && victim) {
      killedAt = reached;
      process.kill(Number(victim[1]), 'SIGKILL');
    }
  });
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      const reform = /the ring re-formed with \d+ peers at step (\d+), ([\d.]+) s after/.exec(stderr);
      resolve({
        code,
        summary: JSON.parse(stdout.trim().split('\n').pop() ?? '{}'),
        reformStep: reform ? Number(reform[1]) : null,
        reformSeconds: reform ? Number(reform[2]) : null,
        killedAt,
        stderr,
      });
    }),
  );
}

const unbroken = await run(false);
const broken = await run(true);
for (const [name, r] of [
  ['unbroken', unbroken],
  ['broken', broken],
] as const) {
  if (r.code !== 0) throw new Error(`the ${name} run exited with ${r.code}:\n${r.stderr.slice(-3000)}`);
}
// Only the victim should have gone: say so loudly if the ring lost more, with the launcher's account.
if (broken.summary.size !== np - 1)
  process.stderr.write(`the broken run ended with ${broken.summary.size} peers, not ${np - 1}:\n${broken.stderr}\n`);
console.log(
  JSON.stringify({
    bench: 'elastic-recovery',
    np,
    steps,
    seed: Number(seed),
    batch_per_peer: Number(batch),
    // Fixed for the whole run (an elastic run's default: -np x --batch), so the survivors take the unbroken run's steps.
    global_batch: unbroken.summary.global_batch ?? null,
    kill_rank: killRank,
    killed_at_step: broken.killedAt,
    reformed_at_step: broken.reformStep,
    reform_seconds: broken.reformSeconds,
    unbroken: {
      test_accuracy: unbroken.summary.test_accuracy,
      steps: unbroken.summary.steps,
      size: unbroken.summary.size,
    },
    broken: { test_accuracy: broken.summary.test_accuracy, steps: broken.summary.steps, size: broken.summary.size },
    accuracy_difference_points: Number(
      ((broken.summary.test_accuracy - unbroken.summary.test_accuracy) * 100).toFixed(2),
    ),
  }),
);
