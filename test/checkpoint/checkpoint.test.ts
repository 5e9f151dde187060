import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isRingtrainError } from '../../src/core/errors.ts';
import {
  checkOptimizerState,
  checkpointFromFlat,
  decodeCheckpoint,
  encodeCheckpoint,
  flatParamsFor,
  layoutHash,
  type LayoutEntry,
} from '../../src/checkpoint/checkpoint.ts';
import { encodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { loadCheckpoint, saveCheckpoint, writeFileAtomic } from '../../src/checkpoint/file.node.ts';

const layout: LayoutEntry[] = [
  { name: 'fc1.weight', shape: [4, 3], offset: 0, length: 12 },
  { name: 'fc1.bias', shape: [3], offset: 12, length: 3 },
];
const params = Float32Array.from({ length: 15 }, (_, i) => i * 0.5 - 3);
const state = { m: Float32Array.from({ length: 15 }, (_, i) => i), v: new Float32Array(15).fill(0.25) };
const ckpt = checkpointFromFlat({
  model: 'mlp',
  optimizer: 'adamw',
  step: 30,
  epoch: 1,
  layout,
  params,
  optimizerState: state,
  extra: { seed: '7' },
});

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-ckpt-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function badCheckpoint(fn: () => unknown): Error {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(isRingtrainError(err, 'ERR_BAD_CHECKPOINT'), String(err)).toBe(true);
  return err as Error;
}

describe('training checkpoints', () => {
  it('round-trips weights, optimizer state, step and metadata through a file', () => {
    const path = join(dir, 'a.safetensors');
    saveCheckpoint(path, ckpt);
    const back = loadCheckpoint(path);
    expect([back.model, back.optimizer, back.step, back.epoch, back.extra.seed]).toEqual(['mlp', 'adamw', 30, 1, '7']);
    expect(back.layoutHash).toBe(layoutHash(layout));
    expect(back.params['fc1.weight'].shape).toEqual([4, 3]);
    expect(flatParamsFor(back, { model: 'mlp', layout, optimizer: 'adamw' })).toEqual(params);
    expect(back.optimizerState.m).toEqual(state.m);
    checkOptimizerState(back, { m: 15, v: 15 });
    // A model that pads between tensors gets its padding back as zeros.
    const padded = layout.map((e, i) => ({ ...e, offset: i * 16 }));
    const flat = flatParamsFor(back, { model: 'mlp', layout: padded, flatLength: 32 });
    expect(flat.length).toBe(32);
    expect([...flat.subarray(12, 16)]).toEqual([0, 0, 0, 0]);
    expect([...flat.subarray(16, 19)]).toEqual([...params.subarray(12, 15)]);
  });

  it('names the tensor and both shapes when the checkpoint is for another model', () => {
    const bigger = layout.map((e) => (e.name === 'fc1.bias' ? { ...e, shape: [5], length: 5 } : e));
    const c = decodeCheckpoint(encodeCheckpoint(ckpt), 'small.safetensors');
    let err = badCheckpoint(() => flatParamsFor(c, { model: 'mlp', layout: bigger }, 'small.safetensors'));
    expect(err.message).toMatch(
      /small\.safetensors: tensor 'fc1\.bias' has shape \[3\] in the checkpoint but \[5\] in the model/,
    );
    err = badCheckpoint(() =>
      flatParamsFor(c, {
        model: 'mlp',
        layout: [...layout, { name: 'fc2.weight', shape: [3, 2], offset: 15, length: 6 }],
      }),
    );
    expect(err.message).toMatch(/no tensor 'fc2\.weight' \(the model expects shape \[3,2\]\)/);
    err = badCheckpoint(() => flatParamsFor(c, { model: 'mlp', layout: layout.slice(0, 1) }));
    expect(err.message).toMatch(/tensors the model does not: fc1\.bias/);
    err = badCheckpoint(() => flatParamsFor(c, { model: 'cnn', layout }));
    expect(err.message).toMatch(/holds a 'mlp' model, not 'cnn'/);
    err = badCheckpoint(() => flatParamsFor(c, { model: 'mlp', layout, optimizer: 'sgd' }));
    expect(err.message).toMatch(/saved with the adamw optimizer, not sgd/);
    err = badCheckpoint(() => checkOptimizerState(c, { m: 16 }));
    expect(err.message).toMatch(/optimizer state 'm' has shape \[15\] in the checkpoint but \[16\]/);
    err = badCheckpoint(() => checkOptimizerState(c, { velocity: 15 }));
    expect(err.message).toMatch(/no optimizer state 'velocity'/);
  });

  it('rejects a missing file, a truncated file, a foreign safetensors file and diverged weights', () => {
    let err = badCheckpoint(() => loadCheckpoint(join(dir, 'missing.safetensors')));
    expect(err.message).toMatch(/missing\.safetensors \(no such file\)/);
    const bytes = encodeCheckpoint(ckpt);
    writeFileSync(join(dir, 'cut.safetensors'), bytes.subarray(0, bytes.length - 10));
    err = badCheckpoint(() => loadCheckpoint(join(dir, 'cut.safetensors')));
    expect(err.message).toMatch(/optim\/v' ends at byte .* the file is truncated/);
    // A valid safetensors file from another tool: right container, no ringtrain format tag.
    const foreign = encodeSafetensors({ w: { shape: [1], data: new Float32Array(1) } }, { format: 'pt' });
    err = badCheckpoint(() => decodeCheckpoint(foreign, 'f.st'));
    expect(err.message).toMatch(/f\.st: not a ringtrain checkpoint \(metadata format is "pt"/);
    const nan = checkpointFromFlat({
      model: 'mlp',
      optimizer: 'sgd',
      step: 1,
      layout,
      params: params.map((v, i) => (i === 4 ? NaN : v)),
    });
    err = badCheckpoint(() => decodeCheckpoint(encodeCheckpoint(nan)));
    expect(err.message).toMatch(/tensor 'param\/fc1\.weight' holds NaN at index 4/);
    // A checkpoint built in memory (never decoded) is still checked when it reaches a model.
    err = badCheckpoint(() => flatParamsFor(nan, { model: 'mlp', layout }));
    expect(err.message).toMatch(/parameter 4 is NaN/);
  });

  it('a failed save leaves the previous file and no temporary file behind', () => {
    const sub = join(dir, 'fail');
    mkdirSync(sub);
    const target = join(sub, 'x.safetensors');
    mkdirSync(target); // rename onto a directory fails after the temporary file was written
    expect(() => writeFileAtomic(target, new Uint8Array(16))).toThrow(/cannot write .*x\.safetensors/);
    expect(readdirSync(sub)).toEqual(['x.safetensors']);
    expect(() => writeFileAtomic(join(dir, 'no-such-dir', 'y'), new Uint8Array(1))).toThrow(/cannot write/);
  });

  it('a process killed while saving never leaves a half-written checkpoint', async () => {
    const target = join(dir, 'killed.safetensors');
    // The child saves a large checkpoint over and over; we kill it at a random moment.
    const script = `import { saveCheckpoint } from ${JSON.stringify(new URL('../../src/checkpoint/file.node.ts', import.meta.url).pathname)};
const p = new Float32Array(4_000_000);
for (let step = 0; ; step++) {
  p.fill(step);
  saveCheckpoint(${JSON.stringify(target)}, { model: 'mlp', optimizer: 'sgd', step, epoch: 0, layoutHash: '', params: { w: { shape: [p.length], data: p } }, optimizerState: {}, extra: {} });
  if (step === 1) console.log('saved');
}`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', () => resolve());
      child.on('exit', (code) => reject(new Error(`child exited early (${code})`)));
    });
    await new Promise((r) => setTimeout(r, 150));
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    expect(existsSync(target)).toBe(true);
    const c = decodeCheckpoint(readFileSync(target), target);
    const w = c.params.w.data;
    expect(w.length).toBe(4_000_000);
    expect(w[w.length - 1]).toBe(c.step);
    expect(w[0]).toBe(c.step);
  });
});
