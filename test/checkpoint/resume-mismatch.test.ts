/**
 * A resume that does not fit: `ringtrain run -np 2 --model cnn --resume keep
 * --save keep` where keep holds an MLP. Before, rank 0 found the mismatch
 * after joining, the other rank saw a lost peer and wrote a step-0 recovery
 * checkpoint over the user's file. Now the mismatch stops the run before
 * anything is written: at the launcher, and, for workers started by hand, in
 * each worker before it joins a ring. Real server, real Deno workers, real
 * WebRTC for the peers that do train.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFromFlat, decodeCheckpoint, type LayoutEntry } from '../../src/checkpoint/checkpoint.ts';
import { saveCheckpoint } from '../../src/checkpoint/file.node.ts';
import { startServer } from '../../server/index.ts';
import { killStartedWorkers, requireNetns, startDenoWorker } from '../support/workers.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-mismatch-'));
const children: ChildProcess[] = [];
afterAll(() => {
  killStartedWorkers();
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** An MLP checkpoint (784 → hidden → 10) at step 120, as `ringtrain train --save` writes one. */
function mlpCheckpoint(path: string, hidden: number): Buffer {
  const widths = [784, hidden, 10];
  const layout: LayoutEntry[] = [];
  let offset = 0;
  for (let i = 0; i + 1 < widths.length; i++) {
    for (const [name, shape] of [
      [`dense${i}.weight`, [widths[i + 1], widths[i]]],
      [`dense${i}.bias`, [widths[i + 1]]],
    ] as const) {
      const length = shape.reduce((a, b) => a * b, 1);
      layout.push({ name, shape, offset, length });
      offset += length;
    }
  }
  const params = Float32Array.from({ length: offset }, (_, i) => Math.sin(i) * 0.05);
  saveCheckpoint(
    path,
    checkpointFromFlat({
      model: 'mlp',
      optimizer: 'sgd',
      step: 120,
      layout,
      params,
      optimizerState: { velocity: new Float32Array(offset), step: Float32Array.of(120) },
    }),
  );
  return readFileSync(path);
}

function ringtrain(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Fails with what the workers said (instead of a bare test timeout) when they do not finish in time. */
async function withDeadline<T>(p: Promise<T>, ms: number, said: () => string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`workers did not finish in ${ms} ms:\n${said()}`)), ms)),
  );
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('resuming a checkpoint of another model', () => {
  it('run -np 2 --model cnn --resume keep --save keep leaves keep byte-for-byte unchanged and says why', async () => {
    requireNetns();
    const keep = join(dir, 'keep.safetensors');
    const before = mlpCheckpoint(keep, 128);
    const r = await ringtrain([
      'run',
      '-np',
      '2',
      '--model',
      'cnn',
      '--resume',
      keep,
      '--save',
      keep,
      '--steps',
      '4',
      '--batch',
      '8',
    ]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(
      /keep\.safetensors holds a 'mlp' model, not 'cnn'; pass --model mlp or another checkpoint\. \[ERR_BAD_CHECKPOINT\]/,
    );
    expect(readFileSync(keep).equals(before)).toBe(true);
    expect(readdirSync(dir).filter((f) => f !== 'narrow.safetensors')).toEqual(['keep.safetensors']);
  }, 60_000);

  it('run -np 2 with an MLP checkpoint of another size: each worker refuses it before the ring forms, and the file stays as it was', async () => {
    requireNetns();
    const narrow = join(dir, 'narrow.safetensors');
    const before = mlpCheckpoint(narrow, 32); // same model kind, so only the workers' check against the real model can tell
    const r = await ringtrain([
      'run',
      '-np',
      '2',
      '--model',
      'mlp',
      '--resume',
      narrow,
      '--save',
      narrow,
      '--steps',
      '4',
      '--batch',
      '8',
    ]);
    expect(r.code, r.stderr).toBe(1);
    const refusals =
      r.stderr.match(
        /narrow\.safetensors: tensor 'dense0\.weight' has shape \[32,784\] in the checkpoint but \[128,784\] in the model/g,
      ) ?? [];
    expect(refusals.length, r.stderr).toBe(2);
    expect(r.stderr).not.toMatch(/joined job|recovery|resume with/);
    expect(readFileSync(narrow).equals(before)).toBe(true);
  }, 120_000);

  it('a worker started by hand refuses a --resume that does not fit the job before it joins a ring; the others train without it', async () => {
    requireNetns();
    const wide = join(dir, 'wide.safetensors');
    const before = mlpCheckpoint(wide, 64); // the job's MLP has 128 hidden units
    const job = {
      id: 'mismatch',
      token: 'secret-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05, momentum: 0.9, seed: 3, steps: 2 },
        batchPerPeer: 16,
        minPeers: 2,
        maxPeers: 2,
      },
    };
    // A long heartbeat: on a loaded 2-core machine a worker compiling its shaders can be silent for a while.
    const server = await startServer({ jobs: [job], staticDir: null, heartbeatMs: 20_000 });
    try {
      const wrong = startDenoWorker(server.url, job, ['--resume', wide, '--save', wide]);
      expect(await wrong.exit, wrong.stderr).toBe(1);
      expect(wrong.stderr).toMatch(
        /wide\.safetensors: tensor 'dense0\.weight' has shape \[64,784\] in the checkpoint but \[128,784\] in the model.*\[ERR_BAD_CHECKPOINT\]/,
      );
      expect(wrong.rank).toBeUndefined(); // never took a place in a ring
      expect(readFileSync(wide).equals(before)).toBe(true);

      // Its place is free again: two peers form the ring over WebRTC and train.
      const fresh = join(dir, 'fresh.safetensors');
      const peers = [0, 1].map(() => startDenoWorker(server.url, job, ['--save', fresh])); // rank 0 saves
      const codes = await withDeadline(Promise.all(peers.map((p) => p.exit)), 180_000, () =>
        peers.map((p) => p.stderr).join('\n'),
      );
      expect(codes, peers.map((p) => p.stderr).join('\n')).toEqual([0, 0]);
      expect(peers.map((p) => p.result?.size)).toEqual([2, 2]);
      expect(decodeCheckpoint(readFileSync(fresh)).step).toBe(2);
      expect(readFileSync(wide).equals(before)).toBe(true);
    } finally {
      await server.close();
    }
  }, 240_000);
});
