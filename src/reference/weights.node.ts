/**
 * Node and Deno: a transformer's weights from a safetensors file on disk,
 * either a ringtrain checkpoint (`param/…` and `optim/…` tensors, model in the
 * metadata) or a plain state dict such as `safetensors.torch.save_file(
 * model.state_dict(), path)` writes (F32 tensors).
 */
import { readFileSync } from 'node:fs';
import { decodeSafetensors } from '../checkpoint/safetensors.ts';
import { ErrorCode, RingtrainError, unreadableReason } from '../core/errors.ts';
import { transformerWeights, type TransformerWeights } from './transformer.ts';

/** The metadata keys that may name the number of heads (shapes do not show it). */
function headsFromMetadata(metadata: Record<string, string>): number | undefined {
  if (metadata.heads !== undefined) return Number(metadata.heads);
  // model_spec: what `ringtrain train --save` records (kind, seed, vocab, context, layers, width, heads).
  for (const key of ['model_spec', 'model_options', 'options']) {
    if (metadata[key] === undefined) continue;
    try {
      const heads = (JSON.parse(metadata[key]) as { heads?: unknown }).heads;
      if (typeof heads === 'number') return heads;
    } catch {
      /* not JSON: no heads there */
    }
  }
  return undefined;
}

export function loadTransformerWeights(path: string, heads?: number): TransformerWeights {
  return loadTransformerFile(path, heads).weights;
}

/** The weights and the file's metadata (a text model's vocabulary is there). */
export function loadTransformerFile(
  path: string,
  heads?: number,
): { weights: TransformerWeights; metadata: Record<string, string> } {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `cannot read ${path} (${unreadableReason(err)}); give a checkpoint that --save wrote.`,
      { path },
      { cause: err },
    );
  }
  const { tensors, metadata } = decodeSafetensors(bytes, path);
  if (metadata.model !== undefined && metadata.model !== 'transformer') {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${path} holds a '${metadata.model}' model, not a transformer; generate needs a checkpoint of --model transformer.`,
      {
        path,
        model: metadata.model,
      },
    );
  }
  return { weights: transformerWeights(tensors, heads ?? headsFromMetadata(metadata), path), metadata };
}
