/**
 * A diverged run must not recommend its diverged weights. One worker's
 * gradient is multiplied by 1e20 at step 20 (a fault from the chaos entry, test/support/chaos, standing in for
 * a learning rate that blows up): the weights reach ~1e17, still finite, and
 * the next step's loss is infinite. The recovery file offered is step 16's,
 * the last state evaluated before the divergence, with sane weights, named
 * once. And when several ranks save the same file, the launcher names it once.
 * Real launcher, real server, a real Deno worker.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { reportRun } from '../../src/cli/launcher/run-summary.node.ts';
import type { RunOptions } from '../../src/cli/options/run-options.node.ts';
import type { WorkerState } from '../../src/cli/launcher/run-workers.node.ts';
import { killRuns, ringtrainIn } from '../support/cli.ts';
import { requireNetns } from '../support/workers.ts';

// From a temporary folder: the recovery files a run writes land there, not in the repository.
const CHAOS = 'test/support/chaos/bin.js';
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-divergence-'));
afterAll(() => {
  killRuns();
  rmSync(dir, { recursive: true, force: true });
});

describe('recovery after a divergence', () => {
  it('offers the last state evaluated before the divergence, with finite, sane weights, named once', async () => {
    requireNetns();
    // 8,000 digits at 500 a step: an evaluation at step 16, the fault at step 20.
    const r = await ringtrainIn(
      dir,
      [
        'run',
        '-np',
        '1',
        '--runtime',
        'deno',
        '--model',
        'mlp',
        '--batch',
        '500',
        '--epochs',
        '2',
        '--seed',
        '7',
        '--chaos-worker',
        '0:scale:1e20@step:20',
      ],
      CHAOS,
    );
    const said = `${r.stdout}\n${r.stderr}`;
    expect(r.code, said).not.toBe(0);
    expect(said).toMatch(/the run diverged/);
    expect(readdirSync(dir).filter((f) => f.endsWith('.safetensors'))).toEqual([
      'ringtrain-recovery-step16.safetensors',
    ]);
    expect(r.stderr).toContain(
      'the run diverged; step 16, the last one evaluated before it did, is saved in ringtrain-recovery-step16.safetensors; resume with: ringtrain run -np 1 --resume ringtrain-recovery-step16.safetensors',
    );
    expect(said.match(/--resume ringtrain-recovery/g), said).toHaveLength(1);
    const saved = decodeCheckpoint(readFileSync(join(dir, 'ringtrain-recovery-step16.safetensors')));
    expect(saved.step).toBe(16);
    let largest = 0;
    for (const t of Object.values(saved.params)) for (const v of t.data) largest = Math.max(largest, Math.abs(v));
    expect(Number.isFinite(largest)).toBe(true);
    expect(largest).toBeLessThan(100); // an MLP after 16 steps at lr 0.05; the diverged step held ~1e17
  }, 300_000);

  it('names a recovery file that several ranks saved once', async () => {
    const lines: string[] = [];
    const path = 'ringtrain-recovery-step53.safetensors';
    const shared = join(dir, path);
    writeFileSync(shared, 'a checkpoint');
    // Three ranks that threw (no result), each having said where it saved the shared file.
    const workers = [0, 1, 2].map(
      (i) =>
        ({
          index: i,
          rank: i,
          exited: true,
          training: true,
          stderrTail: [
            `[rank ${i}] rank ${i}: the training loss became NaN at step 60: the run diverged [ERR_INVALID_ARGUMENT]; saved step 53, the last one evaluated before the run diverged, in ${path}: resume with --resume ${path}`,
            'ringtrain: the run diverged',
          ],
        }) as unknown as WorkerState,
    );
    const stderrWrite = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string, cb?: () => void) => {
      lines.push(String(chunk));
      cb?.();
      return true;
    }) as typeof process.stderr.write;
    let code: number;
    try {
      code = await reportRun({
        o: { np: 3, settings: { elastic: false }, model: 'mlp' } as unknown as RunOptions,
        workers,
        codes: [1, 1, 1],
        recovery: { step: 53, path: shared, diverged: true },
        runtime: 'deno',
        say: async (l) => void lines.push(l),
      });
    } finally {
      process.stderr.write = stderrWrite;
    }
    expect(code).toBe(1);
    const text = lines.join('');
    expect(text.match(/--resume \S*ringtrain-recovery-step53/g), text).toHaveLength(1);
    expect(text).toContain('the run diverged; step 53, the last one evaluated before it did, is saved in');
  });
});
