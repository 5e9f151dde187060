/** Node and Deno: a Hugging Face GPT-2 safetensors file from disk, for `train --init-from` (hf-gpt2.ts maps it). */
import { accessSync, constants, readFileSync } from 'node:fs';
import { ErrorCode, RingtrainError, unreadableReason } from '../core/errors.ts';
import { decodeSafetensors, type NamedTensors } from './safetensors.ts';

/** The file's tensors, F32, F16 or BF16, read into f32; a file that is not safetensors is refused naming it. */
export function loadHfWeights(path: string): NamedTensors {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw unreadable(path, err);
  }
  return decodeSafetensors(bytes, path, { halfFloats: true }).tensors;
}

/** Refuses a file this process cannot read, without reading it (`run` checks before its workers start; rank 0 loads it). */
export function refuseUnreadableHfWeights(path: string): void {
  try {
    accessSync(path, constants.R_OK);
  } catch (err) {
    throw unreadable(path, err);
  }
}

function unreadable(path: string, err: unknown): RingtrainError {
  return new RingtrainError(
    ErrorCode.InvalidArgument,
    `--init-from ${path}: cannot read it (${unreadableReason(err)}); give a GPT-2 model.safetensors.`,
    { path },
    { cause: err },
  );
}
