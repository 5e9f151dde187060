import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-cli-cnn-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function ringtrain(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '',
      stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('ringtrain train --model cnn', () => {
  it(
    'trains the CNN under Deno, saves its tensors, and refuses to resume them as an MLP',
    { timeout: 300_000 },
    async () => {
      const path = join(dir, 'cnn.safetensors');
      const r = await ringtrain([
        'train',
        '--model',
        'cnn',
        '--steps',
        '20',
        '--batch',
        '16',
        '--optimizer',
        'adamw',
        '--save',
        path,
        '--json',
        '--runtime',
        'deno',
      ]);
      expect(r.code, r.stderr).toBe(0);
      const json = JSON.parse(r.stdout.trim());
      expect([json.model, json.steps, json.runtime]).toEqual(['cnn', 20, 'deno']);
      expect(json.test_accuracy).toBeGreaterThan(0.3);
      const ckpt = decodeCheckpoint(readFileSync(path));
      expect(ckpt.model).toBe('cnn');
      // Conv kernels are 4-D tensors: the checkpoint keeps real shapes, not flat runs.
      expect(Object.values(ckpt.params).some((t) => t.shape.length === 4)).toBe(true);
      const wrong = await ringtrain([
        'train',
        '--model',
        'mlp',
        '--optimizer',
        'adamw',
        '--resume',
        path,
        '--steps',
        '21',
      ]);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/holds a 'cnn' model, not 'mlp'; pass --model cnn/);
    },
  );
});
