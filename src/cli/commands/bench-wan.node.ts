/**
 * `ringtrain bench wan`: synchronous training against local SGD (DiLoCo) +
 * int8, and against top-k sparsified gradients, over emulated internet links
 * and over plain loopback, N peers of the CNN on real WebRTC. One JSON line: per link, each mode's accuracy curve,
 * time-to-accuracy and bytes sent, and the ratios.
 *
 * The run gets a network namespace of its own (never the caller's, even
 * under npm test): it reshapes that namespace's loopback with `tc`.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { commandFor } from '../../comm/launch.node.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { WanBenchConfig, WanLink } from './bench-wan-run.node.ts';

const RUNNER = fileURLToPath(new URL('./bench-wan-run.node.ts', import.meta.url));

export interface WanBenchOptions {
  peers: number;
  model: 'cnn' | 'mlp';
  batch: number;
  lr: number;
  epochs: number;
  trainExamples: number;
  testExamples: number;
  syncEvery: number;
  outerLr: number;
  outerMomentum: number;
  /** The top-k run's fraction of gradients sent (default 0.01). */
  topk?: number;
  /** Per-link rate of the emulated link (Mbit/s) and its one-way delay (ms). */
  rateMbit: number;
  delayMs: number;
}

function ratioOf(r: number): number {
  if (!(r > 0 && r <= 1))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--topk must be a number in (0, 1], the fraction of gradients each peer sends, got ${r}`,
    );
  return r;
}

export function wanBenchConfig(o: WanBenchOptions): WanBenchConfig {
  const whole = (v: number, flag: string, min: number, max: number) => {
    if (!Number.isInteger(v) || v < min || v > max)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${flag} must be a whole number from ${min} to ${max}, got ${v}`,
      );
    return v;
  };
  const positive = (v: number, flag: string) => {
    if (!(v > 0) || !Number.isFinite(v))
      throw new RingtrainError(ErrorCode.InvalidArgument, `${flag} must be a number > 0, got ${v}`);
    return v;
  };
  const peers = whole(o.peers, '--peers', 2, 8);
  const batch = whole(o.batch, '--batch', 1, 256);
  const trainCount = whole(o.trainExamples, '--train-examples', peers * batch, 8000);
  const links: WanLink[] = [
    { name: 'loopback', delayMs: 0 },
    {
      name: `${o.rateMbit} Mbit/s, ${o.delayMs} ms`,
      rateBitsPerS: positive(o.rateMbit, '--rate-mbit') * 1e6,
      delayMs: whole(o.delayMs, '--delay-ms', 0, 10_000),
    },
  ];
  return {
    peers,
    model: o.model,
    batch,
    lr: positive(o.lr, '--lr'),
    epochs: whole(o.epochs, '--epochs', 1, 1000),
    maxEpochsFactor: 2,
    trainCount,
    testCount: whole(o.testExamples, '--test-examples', peers, 2000),
    syncEvery: whole(o.syncEvery, '--sync-every', 1, 10_000),
    outerLr: positive(o.outerLr, '--outer-lr'),
    outerMomentum: o.outerMomentum,
    topk: ratioOf(o.topk ?? 0.01),
    tolerance: 0.005,
    links,
  };
}

/** Runs the benchmark in a fresh network namespace and returns its JSON line. */
export async function benchWan(o: WanBenchOptions): Promise<Record<string, unknown>> {
  const config = wanBenchConfig(o);
  const [deno, pre] = commandFor('deno', RUNNER);
  const script = 'ip link set lo up && exec "$@"';
  const child = spawn('unshare', ['-n', 'sh', '-c', script, 'sh', deno, ...pre, JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => {
    child.on('error', (err) => {
      stderr += err.message;
      resolve(127);
    });
    child.on('exit', (c) => resolve(c));
  });
  const last = stdout.trim().split('\n').pop() ?? '';
  if (code !== 0 || !last.startsWith('{')) {
    const tail = stderr
      .split('\n')
      .filter((l) => l.trim() && !l.includes('XDG_RUNTIME_DIR'))
      .slice(-15)
      .join('\n');
    throw new RingtrainError(
      ErrorCode.Aborted,
      `bench wan failed (exit ${code}); it needs root for 'unshare -n' and 'tc' (run it as root, as CI does):\n${tail}`,
    );
  }
  return JSON.parse(last) as Record<string, unknown>;
}
