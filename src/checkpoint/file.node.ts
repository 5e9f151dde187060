/**
 * Node and Deno: checkpoint files on disk. Saving is atomic: the bytes go to a
 * temporary file in the same directory, which is fsynced and then renamed over
 * the target (rename is atomic within one filesystem), so a crash leaves
 * either the old checkpoint or the new one, never half of one.
 *
 * A save never replaces a checkpoint of a later step unless asked
 * (`overwrite`): the file on disk is the user's best state so far.
 */
import {
  closeSync,
  fstatSync,
  fsyncSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import process from 'node:process';
import { ErrorCode, RingtrainError, unreadableReason } from '../core/errors.ts';
import { CHECKPOINT_FORMAT, checkpointPieces, decodeCheckpoint, type TrainingCheckpoint } from './checkpoint.ts';

/**
 * Writes `content` (the bytes, or pieces of them written one after another, so a
 * checkpoint never needs a copy of itself in memory) to a new, fsynced temporary
 * file beside `path` and returns its name: the caller moves it into place (rename
 * to replace, link to never replace) and removes it on failure. Throws the file
 * system's error as is.
 */
export function writeSyncedTemp(path: string, content: Uint8Array | Iterable<Uint8Array>): string {
  const tmp = join(
    dirname(path),
    `.${basename(path)}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`,
  );
  const fd = openSync(tmp, 'wx');
  try {
    for (const bytes of content instanceof Uint8Array ? [content] : content) {
      let written = 0;
      while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written);
    }
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  return tmp;
}

export function writeFileAtomic(path: string, content: Uint8Array | Iterable<Uint8Array>): void {
  const dir = dirname(path);
  let tmp: string | undefined;
  try {
    tmp = writeSyncedTemp(path, content);
    renameSync(tmp, path);
  } catch (err) {
    if (tmp !== undefined) rmSync(tmp, { force: true });
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot write ${path}: ${(err as Error).message}; check that the directory exists and is writable.`,
      { path },
      { cause: err },
    );
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

/** Our headers are a few KiB; a length beyond this is not one of ours (and is not worth allocating for). */
const MAX_PEEK_HEADER_BYTES = 16 * 1024 * 1024;

/** What a path holds, read from the safetensors header alone (cheap, even for a large file). */
export type CheckpointOnDisk =
  | { kind: 'absent' }
  | { kind: 'checkpoint'; step: number; model: string; optimizer: string }
  | { kind: 'other'; why: string };

export function peekCheckpoint(path: string): CheckpointOnDisk {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const code = (err as { code?: string }).code;
    // ENOTDIR: a folder on the way is a file, so nothing is at this path (writing there fails on its own, saying so).
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'absent' };
    return { kind: 'other', why: `cannot be read (${code ?? String(err)})` };
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) return { kind: 'other', why: 'it is a directory' };
    const head = new Uint8Array(8);
    if (st.size < 8 || readSync(fd, head, 0, 8, 0) !== 8) return { kind: 'other', why: 'it is not a safetensors file' };
    const n = new DataView(head.buffer).getBigUint64(0, true);
    if (n > BigInt(Math.min(st.size - 8, MAX_PEEK_HEADER_BYTES)))
      return { kind: 'other', why: 'it is not a safetensors file (or a damaged one)' };
    const json = new Uint8Array(Number(n));
    readSync(fd, json, 0, json.length, 8);
    let meta: Record<string, unknown> | undefined;
    try {
      meta = (JSON.parse(new TextDecoder().decode(json)) as { __metadata__?: Record<string, unknown> }).__metadata__;
    } catch {
      return { kind: 'other', why: 'its header is not valid JSON' };
    }
    const step = Number(meta?.step);
    if (meta?.format !== CHECKPOINT_FORMAT || !Number.isInteger(step))
      return { kind: 'other', why: 'it is not a ringtrain checkpoint' };
    return { kind: 'checkpoint', step, model: String(meta.model), optimizer: String(meta.optimizer) };
  } finally {
    closeSync(fd);
  }
}

export interface SaveOptions {
  /** Replace the file even when it holds a later step (or is not a ringtrain checkpoint). */
  overwrite?: boolean;
}

/** Throws unless `path` is free to take a checkpoint of `step`: absent, or a checkpoint of that step or an earlier one. */
export function refuseToReplace(path: string, step: number, flag = '--save'): void {
  const held = peekCheckpoint(path);
  if (held.kind === 'other') {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} ${path}: the file exists and ${held.why}; choose another path, or pass --overwrite to replace it.`,
      { path },
    );
  }
  if (held.kind === 'checkpoint' && held.step > step) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} ${path} holds a checkpoint of step ${held.step} (${held.model}, ${held.optimizer}); a checkpoint of step ${step} would replace it with an earlier one. ` +
        `Continue from it with --resume ${path}, save to another path, or pass --overwrite to replace it.`,
      { path, heldStep: held.step, step },
    );
  }
}

export function saveCheckpoint(path: string, c: TrainingCheckpoint, options: SaveOptions = {}): void {
  // Checked just before the rename's target is replaced; two runs racing on one path are not guarded.
  if (!options.overwrite) refuseToReplace(path, c.step);
  // Streamed: the header, then one tensor at a time, each written from the checkpoint's own arrays.
  writeFileAtomic(path, checkpointPieces(c));
}

/** Files already reported as unverifiable in this process: say it once per file, not on every load. */
const reportedUnverified = new Set<string>();

export function loadCheckpoint(path: string): TrainingCheckpoint {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `cannot read checkpoint ${path} (${unreadableReason(err)}); give the path a --save wrote.`,
      { path },
      { cause: err },
    );
  }
  const c = decodeCheckpoint(bytes, path);
  if (c.integrity === 'unverified' && !reportedUnverified.has(path)) {
    reportedUnverified.add(path);
    process.stderr.write(
      `ringtrain: ${path} records no checksums (saved by an older ringtrain), so its data cannot be verified; the next save writes them.\n`,
    );
  }
  return c;
}
