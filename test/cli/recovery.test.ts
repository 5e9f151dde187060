/**
 * The recovery file policy (src/cli/commands/recovery.node.ts): a new file named after
 * the step, never over an existing file or the --resume source; ranks that
 * stopped at the same step with the same weights share one file.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFromFlat, decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { recoveryStem, saveRecovery } from '../../src/cli/commands/recovery.node.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-recovery-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const layout = [{ name: 'w', shape: [2, 2], offset: 0, length: 4 }];
const ckpt = (step: number, values: number[]) =>
  checkpointFromFlat({ model: 'mlp', optimizer: 'sgd', step, layout, params: Float32Array.from(values) });

describe('recovery checkpoints', () => {
  it('name the file after --recovery, else --save, else a default', () => {
    expect(recoveryStem({ recovery: 'r/x.safetensors', save: 'm.safetensors' })).toBe('r/x');
    expect(recoveryStem({ save: 'out/mlp.safetensors' })).toBe('out/mlp.recovery');
    expect(recoveryStem({})).toBe('ringtrain-recovery');
  });

  it('write a new step-named file, share it with a rank of the same state, and never overwrite another', () => {
    const stem = join(dir, 'job');
    const first = saveRecovery(stem, ckpt(7, [1, 2, 3, 4]));
    expect(first).toBe(`${stem}-step7.safetensors`);
    expect(decodeCheckpoint(readFileSync(first)).step).toBe(7);
    const bytes = readFileSync(first);

    // Another rank, same step and weights: the file already holds its state.
    expect(saveRecovery(stem, ckpt(7, [1, 2, 3, 4]))).toBe(first);
    // Same step, other weights (an earlier run's file): left alone, the next free name is used.
    const second = saveRecovery(stem, ckpt(7, [9, 9, 9, 9]));
    expect(second).toBe(`${stem}-step7-2.safetensors`);
    expect(readFileSync(first).equals(bytes)).toBe(true);
    expect(Array.from(decodeCheckpoint(readFileSync(second)).params.w.data)).toEqual([9, 9, 9, 9]);

    // A file that is not a checkpoint at all is not ours to replace either.
    writeFileSync(`${stem}-step8.safetensors`, 'not a checkpoint');
    expect(saveRecovery(stem, ckpt(8, [1, 1, 1, 1]))).toBe(`${stem}-step8-2.safetensors`);
    expect(readFileSync(`${stem}-step8.safetensors`, 'utf8')).toBe('not a checkpoint');
    // No temporary files left behind.
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('never take the --resume source, even when it has the recovery name', () => {
    const stem = join(dir, 'resumed');
    const resume = `${stem}-step5.safetensors`;
    expect(saveRecovery(stem, ckpt(5, [5, 5, 5, 5]), [resume])).toBe(`${stem}-step5-2.safetensors`);
  });

  it('say what to do when the directory is missing', () => {
    expect(() => saveRecovery(join(dir, 'no', 'such', 'dir', 'x'), ckpt(1, [0, 0, 0, 0]))).toThrow(
      /cannot write the recovery checkpoint .*directory exists/,
    );
  });
});
