/**
 * Robust aggregation on real workers: N Deno workers over real
 * WebRTC train the same job once per rule (mean, median, trimmed-mean,
 * centered-clip), honest and with one worker sending its gradients flipped and
 * scaled by 20 (the chaos entry's `--chaos scale:-20@step:F`, inside the guard's 1,000× norm
 * ratio, so only the rule stands between it and the model).
 *
 * One JSON line per run: test accuracy (rank 0), steps/s (wall clock from step
 * 5 on), how the run ended, the gradient payload each rank sent per step (the
 * workers' allreduce_bytes over their steps) against the ring allreduce's
 * 2(N-1)/N·n floats, and whether every rank ended with the same weights (CRC-32).
 *
 * Usage: sh scripts/in-netns.sh npx tsx bench/robust-aggregation.ts [--np 4] [--model mlp] [--steps 60] [--batch 32]
 * [--rules mean,median,trimmed-mean:0.25,centered-clip] [--fault-step 2] [--seed 7] [--cases honest,fault]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forEachLine } from '../src/core/lines.node.ts';
import { TOKEN_ENV } from '../src/cli/options/secrets.node.ts';
import { startServer } from '../server/index.ts';
import { opt } from './args.ts';
import { CHAOS_ENTRY } from '../test/support/workers.ts';

const np = Number(opt('np', '4'));
const model = opt('model', 'mlp');
const steps = Number(opt('steps', '60'));
const batch = Number(opt('batch', '32'));
const rules = opt('rules', 'mean,median,trimmed-mean:0.25,centered-clip').split(',');
const faultStep = Number(opt('fault-step', '2'));
const seed = Number(opt('seed', '7'));
const cases = opt('cases', 'honest,fault').split(',');
/** Parameters of the built-in models (784-128-10 MLP; the CNN of src/engine/cnn.ts is not counted here). */
const PARAMS: Record<string, number> = { mlp: 784 * 128 + 128 + 128 * 10 + 10 };

/** On a machine shared with other jobs a worker may be starved for half a minute: a bench waits, where a job would give up. */
const SLACK = { timeoutMs: 180_000, peerTimeoutMs: 180_000 };

if (process.env.RINGTRAIN_NETNS !== '1')
  throw new Error('run inside scripts/in-netns.sh: WebRTC stays inside a private namespace');

interface Worker {
  rank?: number;
  steps: { at: number; step: number }[];
  result?: Record<string, unknown>;
  stderr: string;
  exit: Promise<number | null>;
}

async function run(rule: string, faulty: boolean) {
  const id = `robust-${rule.replace(/[^a-z0-9]/g, '')}-${faulty ? 'fault' : 'honest'}`;
  const job = {
    id,
    token: `${id}-token`,
    config: {
      model,
      optimizer: 'sgd',
      hyperparameters: { lr: 0.05, momentum: 0.9, seed, steps, aggregation: rule, evalLimit: 2000, ...SLACK },
      batchPerPeer: batch,
      minPeers: np,
      maxPeers: np,
    },
  };
  // A worker compiling kernels on a loaded CPU adapter misses heartbeats: a minute, as `run` allows.
  const server = await startServer({ jobs: [job], staticDir: null, missedHeartbeats: 12 });
  // A diverged run saves recovery checkpoints: here, not in the working tree.
  const recovery = mkdtempSync(join(tmpdir(), `${id}-`));
  try {
    const workers = Array.from({ length: np }, (_, i) => {
      const chaos = faulty && i === np - 1;
      const fault = chaos ? ['--chaos', `scale:-20@step:${faultStep}`] : [];
      const child = spawn(
        'node_modules/.bin/deno',
        [
          'run',
          '-A',
          chaos ? CHAOS_ENTRY : 'src/cli/main.ts',
          'worker',
          '--server',
          server.url,
          '--job',
          job.id,
          '--name',
          `w-${i}`,
          '--events',
          '--recovery',
          join(recovery, `w-${i}.safetensors`),
          ...fault,
        ],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { ...process.env, [TOKEN_ENV]: job.token },
        },
      );
      const w: Worker = {
        steps: [],
        stderr: '',
        exit: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
      };
      forEachLine(child.stdout!, (line) => {
        if (!line.startsWith('{')) return;
        const m = JSON.parse(line) as Record<string, unknown>;
        if (m.event === 'joined') w.rank = Number(m.rank);
        if (m.event === 'step') w.steps.push({ at: Date.now(), step: Number(m.step) });
        if (m.event === 'result') w.result = m;
      });
      child.stderr!.setEncoding('utf8').on('data', (d: string) => (w.stderr += d));
      return w;
    });
    const codes = await Promise.all(workers.map((w) => w.exit));
    const rank0 = workers.find((w) => w.rank === 0) ?? workers[0];
    const r = rank0.result ?? {};
    const from = rank0.steps.find((s) => s.step === 5);
    const last = rank0.steps.at(-1);
    const stepsDone = Number(r.steps ?? last?.step ?? 0);
    const crcs = workers.map((w) => w.result?.weights_crc32 ?? null);
    const bytesPerStep = workers.map((w) =>
      w.result && Number(w.result.steps) > 0
        ? Math.round(Number(w.result.allreduce_bytes) / Number(w.result.steps))
        : null,
    );
    const params = PARAMS[model];
    return {
      bench: 'robust-aggregation',
      model,
      np,
      batch_per_peer: batch,
      steps,
      seed,
      rule,
      fault: faulty ? `1 worker, scale:-20@step:${faultStep}` : 'none',
      exit_codes: codes,
      stopped_by: (r.stopped_by as { message?: string } | null)?.message ?? null,
      steps_done: stepsDone,
      test_accuracy: typeof r.test_accuracy === 'number' && Number.isFinite(r.test_accuracy) ? r.test_accuracy : null,
      steps_per_s:
        from && last && last.step > from.step
          ? Number(((last.step - from.step) / ((last.at - from.at) / 1000)).toFixed(3))
          : null,
      bytes_per_step_by_rank: bytesPerStep,
      ring_bytes_per_step: params ? Math.round(((2 * (np - 1)) / np) * params * 4) : null,
      same_weights: crcs.every((c) => c !== null && c === crcs[0]),
      ...(codes.some((c) => c !== 0)
        ? {
            stderr_tail: rank0.stderr
              .split('\n')
              .filter((l) => l.trim() && !l.includes('XDG_RUNTIME_DIR'))
              .slice(-3),
          }
        : {}),
    };
  } finally {
    await server.close();
    rmSync(recovery, { recursive: true, force: true });
  }
}

for (const rule of rules) {
  for (const c of cases) console.log(JSON.stringify(await run(rule, c === 'fault')));
}
