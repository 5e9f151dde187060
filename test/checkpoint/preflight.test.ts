/**
 * The checks every training command makes on --save and --resume before it
 * trains or joins a ring, and the rule that a save never replaces a
 * checkpoint of a later step unless --overwrite is given.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isRingtrainError } from '../../src/core/errors.ts';
import { checkpointFromFlat, type LayoutEntry } from '../../src/checkpoint/checkpoint.ts';
import { peekCheckpoint, saveCheckpoint } from '../../src/checkpoint/file.node.ts';
import { checkSaveTarget, preflightCheckpoints } from '../../src/checkpoint/preflight.node.ts';

const layout: LayoutEntry[] = [{ name: 'dense0.weight', shape: [3, 2], offset: 0, length: 6 }];
const at = (step: number, model = 'mlp') =>
  checkpointFromFlat({ model, optimizer: 'sgd', step, layout, params: new Float32Array(6).fill(step) });

const root = mkdtempSync(join(tmpdir(), 'ringtrain-preflight-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = join(root, String(n++));
  mkdirSync(d);
  return d;
};

function refusal(fn: () => unknown, code: string): Error {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(isRingtrainError(err, code as never), String(err)).toBe(true);
  return err as Error;
}

describe('checkpoint preflight', () => {
  it('refuses --save into a directory that does not exist, naming it, and creates nothing', () => {
    const d = freshDir();
    const err = refusal(
      () => checkSaveTarget(join(d, 'missing', 'm.safetensors'), { startStep: 0 }),
      'ERR_INVALID_ARGUMENT',
    );
    expect(err.message).toMatch(
      /--save .*missing\/m\.safetensors: the directory .*missing does not exist; create it \(mkdir -p .*\) or save elsewhere\. Nothing was trained or written/,
    );
    expect(readdirSync(d)).toEqual([]);
  });

  it('refuses --save that names a directory, or a place where no file can be written', () => {
    const d = freshDir();
    let err = refusal(() => checkSaveTarget(d, { startStep: 0 }), 'ERR_INVALID_ARGUMENT');
    expect(err.message).toMatch(/that is a directory; give a file path/);
    // /proc takes no new files, whoever we are (root ignores permission bits, so a chmod'ed directory would not do).
    err = refusal(() => checkSaveTarget('/proc/ringtrain-test.safetensors', { startStep: 0 }), 'ERR_INVALID_ARGUMENT');
    expect(err.message).toMatch(/cannot write in \/proc \(E[A-Z]+\)/);
  });

  it('writes and removes a probe file: an accepted --save leaves the directory as it was', () => {
    const d = freshDir();
    writeFileSync(join(d, 'other.txt'), 'x');
    checkSaveTarget(join(d, 'm.safetensors'), { startStep: 0 });
    expect(readdirSync(d)).toEqual(['other.txt']);
  });

  it('refuses a --save that holds a later step than the run starts at, unless --overwrite', () => {
    const d = freshDir();
    const path = join(d, 'm.safetensors');
    saveCheckpoint(path, at(30));
    const before = readFileSync(path);
    const err = refusal(() => checkSaveTarget(path, { startStep: 0 }), 'ERR_INVALID_ARGUMENT');
    expect(err.message).toMatch(
      /m\.safetensors holds a checkpoint of step 30 \(mlp, sgd\); a checkpoint of step 0 would replace it with an earlier one\. Continue from it with --resume .*m\.safetensors, save to another path, or pass --overwrite/,
    );
    checkSaveTarget(path, { startStep: 30 }); // resuming from it: the first save is later
    checkSaveTarget(path, { startStep: 0, overwrite: true });
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('refuses to replace a file that is not a ringtrain checkpoint, unless --overwrite', () => {
    const d = freshDir();
    const path = join(d, 'notes.safetensors');
    writeFileSync(path, 'my notes, not a checkpoint');
    expect(peekCheckpoint(path)).toEqual({ kind: 'other', why: 'it is not a safetensors file (or a damaged one)' });
    const err = refusal(() => checkSaveTarget(path, { startStep: 0 }), 'ERR_INVALID_ARGUMENT');
    expect(err.message).toMatch(
      /notes\.safetensors: the file exists and it is not a safetensors file .*pass --overwrite to replace it/,
    );
    expect(readFileSync(path, 'utf8')).toBe('my notes, not a checkpoint');
    checkSaveTarget(path, { startStep: 0, overwrite: true });
  });

  it('a save never replaces a later checkpoint with an earlier step unless asked', () => {
    const d = freshDir();
    const path = join(d, 'm.safetensors');
    saveCheckpoint(path, at(30));
    const before = readFileSync(path);
    const err = refusal(() => saveCheckpoint(path, at(12)), 'ERR_INVALID_ARGUMENT');
    expect(err.message).toMatch(/holds a checkpoint of step 30 .* a checkpoint of step 12 would replace it/);
    expect(readFileSync(path).equals(before)).toBe(true);
    expect(readdirSync(d)).toEqual(['m.safetensors']); // no temporary file left either
    saveCheckpoint(path, at(30)); // the same step again (an interrupted resume saves where it began)
    saveCheckpoint(path, at(45));
    expect(peekCheckpoint(path)).toMatchObject({ kind: 'checkpoint', step: 45 });
    saveCheckpoint(path, at(12), { overwrite: true });
    expect(peekCheckpoint(path)).toMatchObject({ kind: 'checkpoint', step: 12 });
  });

  it('checks --resume before --save: a checkpoint of another model stops the run and leaves both files alone', () => {
    const d = freshDir();
    const keep = join(d, 'keep.safetensors');
    saveCheckpoint(keep, at(120, 'mlp'));
    const before = readFileSync(keep);
    const err = refusal(
      () => preflightCheckpoints({ resume: keep, save: keep, model: 'cnn', optimizer: 'sgd' }),
      'ERR_BAD_CHECKPOINT',
    );
    expect(err.message).toMatch(/keep\.safetensors holds a 'mlp' model, not 'cnn'; pass --model mlp/);
    expect(readFileSync(keep).equals(before)).toBe(true);
    expect(readdirSync(d)).toEqual(['keep.safetensors']);
    // The matching model resumes it, saving over it later (its first save is after step 120).
    expect(preflightCheckpoints({ resume: keep, save: keep, model: 'mlp', optimizer: 'sgd' })?.step).toBe(120);
    // An unreadable --resume is named.
    expect(
      refusal(() => preflightCheckpoints({ resume: join(d, 'nope.safetensors') }), 'ERR_BAD_CHECKPOINT').message,
    ).toMatch(/cannot read checkpoint .*nope\.safetensors \(no such file\)/);
  });
});
