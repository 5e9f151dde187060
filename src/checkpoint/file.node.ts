/**
 * Node and Deno: checkpoint files on disk. Saving is atomic: the bytes go to a
 * temporary file in the same directory, which is fsynced and then renamed over
 * the target (rename is atomic within one filesystem), so a crash leaves
 * either the old checkpoint or the new one, never half of one.
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { decodeCheckpoint, encodeCheckpoint, type TrainingCheckpoint } from './checkpoint.ts';

export function writeFileAtomic(path: string, bytes: Uint8Array): void {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`);
  let fd: number | undefined;
  try {
    fd = openSync(tmp, 'wx');
    let written = 0;
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, path);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    rmSync(tmp, { force: true });
    throw new RingtrainError(ErrorCode.InvalidArgument, `cannot write ${path}: ${(err as Error).message}; check that the directory exists and is writable.`, { path }, { cause: err });
  }
  // Make the rename itself durable; not every platform lets us fsync a directory.
  try {
    const dfd = openSync(dir, 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    /* best effort */
  }
}

export function saveCheckpoint(path: string, c: TrainingCheckpoint): void {
  writeFileAtomic(path, encodeCheckpoint(c));
}

export function loadCheckpoint(path: string): TrainingCheckpoint {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `cannot read checkpoint ${path} (${code === 'ENOENT' ? 'no such file' : code ?? String(err)}); give the path a --save wrote.`,
      { path },
      { cause: err },
    );
  }
  return decodeCheckpoint(bytes, path);
}
