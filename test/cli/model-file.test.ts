/**
 * A model defined in a file outside the repository (a residual MLP with a
 * layer norm and GELU, written as a user would, against the `nn` the factory
 * receives) trains with `ringtrain run -np 2 --model ./net.ts` started from a
 * temporary directory: two Deno workers over real WebRTC load the file, agree
 * on its identity, and train it. A file without a factory is refused naming it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { checkSameModel } from '../../src/engine/define.ts';

const bin = fileURLToPath(new URL('../../bin/ringtrain.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-model-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The example the README shows (examples/my-model.ts), copied out of the repository as a user's own file.
const NET = readFileSync(fileURLToPath(new URL('../../examples/my-model.ts', import.meta.url)), 'utf8');

function ringtrain(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  if (process.env.RINGTRAIN_NETNS !== '1')
    throw new Error('WebRTC tests must run inside the private network namespace: npm test (scripts/in-netns.sh)');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('ringtrain run --model ./file.ts', () => {
  it('trains a model from a file outside the repository on two peers', async () => {
    writeFileSync(join(dir, 'net.ts'), NET);
    const r = await ringtrain([
      'run',
      '-np',
      '2',
      '--model',
      './net.ts',
      '--optimizer',
      'adamw',
      '--steps',
      '30',
      '--batch',
      '32',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(result).toMatchObject({ steps: 30, size: 2, ok: true });
    expect(result.test_accuracy, JSON.stringify(result)).toBeGreaterThan(0.5); // chance is 0.1
  }, 300_000);

  it('refuses a file that exports no model factory, naming the file', async () => {
    writeFileSync(join(dir, 'empty.ts'), 'export const nothing = 1;\n');
    const r = await ringtrain(['train', '--model', './empty.ts', '--steps', '1']);
    expect(r.code).not.toBe(0);
    // It names the file and what it must export.
    expect(r.stderr).toMatch(/empty\.ts exports no model factory: add `export default function model\(nn, options\)/);
  }, 120_000);

  it("refuses a worker whose model file is not the job's, naming both", () => {
    // What workerModel asks once the worker's own file is loaded.
    const mine = { identity: { name: 'net@aaaaaaaa', options: {} }, layoutHash: '11111111' };
    expect(() => checkSameModel(mine, { name: 'net@bbbbbbbb', layoutHash: '22222222' })).toThrow(
      /net@aaaaaaaa \(layout hash 11111111\) but the job's is net@bbbbbbbb \(layout hash 22222222\)/,
    );
    expect(() => checkSameModel(mine, { name: 'net@aaaaaaaa', layoutHash: '11111111' })).not.toThrow();
  });
});
