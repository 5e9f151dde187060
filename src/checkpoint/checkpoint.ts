/**
 * A training checkpoint: the model's parameters (one tensor per layout entry),
 * the optimizer's state, and where training stood, in one safetensors file.
 *
 * Tensor names: `param/<layout name>` for weights (with their real shapes),
 * `optim/<state key>` for optimizer state (flat). Metadata (strings, as the
 * format requires): format, model, optimizer, step, epoch, layout_hash, plus
 * whatever extra the caller records (seed, lr…).
 *
 * Works on plain arrays, so it needs no GPU: the caller reads the flat
 * parameter buffer and the optimizer state, and writes them back on resume.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import {
  decodeSafetensors,
  elementCount,
  encodeSafetensors,
  type Integrity,
  type Metadata,
  type NamedTensors,
  safetensorsPieces,
} from './safetensors.ts';
import { fnv1aHex } from '../core/hash.ts';

export const CHECKPOINT_FORMAT = 'ringtrain-checkpoint/1';
const PARAM_PREFIX = 'param/';
const OPTIM_PREFIX = 'optim/';
const RESERVED_KEYS = ['format', 'model', 'optimizer', 'step', 'epoch', 'layout_hash'];

/** How a model's named tensors sit in its flat parameter buffer (the engine's layout). */
export interface LayoutEntry {
  name: string;
  shape: readonly number[];
  offset: number;
  length: number;
}

export interface TrainingCheckpoint {
  /** Model kind ('mlp', 'cnn'). */
  model: string;
  /** Optimizer kind ('sgd', 'adamw'). */
  optimizer: string;
  /** Optimizer steps taken so far. */
  step: number;
  /** Epochs completed so far. */
  epoch: number;
  layoutHash: string;
  params: NamedTensors;
  optimizerState: Record<string, Float32Array>;
  /** Extra strings the caller recorded (seed, lr, …). */
  extra: Metadata;
  /** Set when read from bytes: 'verified' when every tensor matched its recorded checksum, 'unverified' for files that record none (older ringtrain). */
  integrity?: Integrity;
}

/** A short fingerprint of tensor names and shapes, in order: two models with the same hash load each other's weights. */
export function layoutHash(layout: readonly Pick<LayoutEntry, 'name' | 'shape'>[]): string {
  return fnv1aHex(layout.map((e) => `${e.name}:${e.shape.join('x')}`).join(';'));
}

/** Builds a checkpoint from the flat parameter buffer, cutting it into the layout's tensors. */
export function checkpointFromFlat(args: {
  model: string;
  optimizer: string;
  step: number;
  epoch?: number;
  layout: readonly LayoutEntry[];
  params: Float32Array;
  optimizerState?: Record<string, Float32Array>;
  extra?: Metadata;
}): TrainingCheckpoint {
  const params: NamedTensors = {};
  for (const e of args.layout) {
    if (e.offset + e.length > args.params.length || elementCount(e.shape) !== e.length) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `layout entry '${e.name}' [${e.shape}] at ${e.offset} does not fit the ${args.params.length} parameters.`,
        { tensor: e.name },
      );
    }
    params[e.name] = { shape: [...e.shape], data: args.params.slice(e.offset, e.offset + e.length) };
  }
  return {
    model: args.model,
    optimizer: args.optimizer,
    step: args.step,
    epoch: args.epoch ?? 0,
    layoutHash: layoutHash(args.layout),
    params,
    optimizerState: args.optimizerState ?? {},
    extra: args.extra ?? {},
  };
}

export function encodeCheckpoint(c: TrainingCheckpoint): Uint8Array {
  const { tensors, metadata } = checkpointContents(c);
  return encodeSafetensors(tensors, metadata);
}

/** encodeCheckpoint's bytes in pieces, the header and then one tensor at a time (safetensorsPieces): what a file is written from. */
export function checkpointPieces(c: TrainingCheckpoint): Generator<Uint8Array> {
  const { tensors, metadata } = checkpointContents(c);
  return safetensorsPieces(tensors, metadata);
}

/** The checkpoint's tensors (its own arrays, not copies) and metadata, as the file names them. */
function checkpointContents(c: TrainingCheckpoint): { tensors: NamedTensors; metadata: Metadata } {
  const tensors: NamedTensors = {};
  for (const [name, t] of Object.entries(c.params)) tensors[PARAM_PREFIX + name] = t;
  for (const [key, data] of Object.entries(c.optimizerState))
    tensors[OPTIM_PREFIX + key] = { shape: [data.length], data };
  for (const k of Object.keys(c.extra)) {
    if (RESERVED_KEYS.includes(k))
      throw new RingtrainError(ErrorCode.InvalidArgument, `checkpoint metadata key '${k}' is reserved.`);
  }
  const metadata = {
    ...c.extra,
    format: CHECKPOINT_FORMAT,
    model: c.model,
    optimizer: c.optimizer,
    step: String(c.step),
    epoch: String(c.epoch),
    layout_hash: c.layoutHash,
  };
  return { tensors, metadata };
}

/**
 * Parses and checks a checkpoint: the container, the checksums (when the file
 * has them) and that every value is finite, so a damaged or diverged file
 * never reaches a model.
 */
export function decodeCheckpoint(bytes: Uint8Array, file = 'checkpoint'): TrainingCheckpoint {
  const { tensors, metadata, integrity } = decodeSafetensors(bytes, file);
  if (metadata.format !== CHECKPOINT_FORMAT) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file}: not a ringtrain checkpoint (metadata format is ${JSON.stringify(metadata.format ?? null)}, expected '${CHECKPOINT_FORMAT}').`,
      { file },
    );
  }
  const int = (key: string): number => {
    const v = Number(metadata[key]);
    if (!Number.isInteger(v) || v < 0)
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: metadata '${key}' is ${JSON.stringify(metadata[key])}, not a count.`,
        { file, key },
      );
    return v;
  };
  const params: NamedTensors = {};
  const optimizerState: Record<string, Float32Array> = {};
  for (const [name, t] of Object.entries(tensors)) {
    if (name.startsWith(PARAM_PREFIX)) params[name.slice(PARAM_PREFIX.length)] = t;
    else if (name.startsWith(OPTIM_PREFIX)) optimizerState[name.slice(OPTIM_PREFIX.length)] = t.data;
    else
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: unexpected tensor '${name}' (neither ${PARAM_PREFIX}… nor ${OPTIM_PREFIX}…).`,
        { file, tensor: name },
      );
    refuseNonFinite(file, name, t.data);
  }
  const extra: Metadata = {};
  for (const [k, v] of Object.entries(metadata)) if (!RESERVED_KEYS.includes(k)) extra[k] = v;
  return {
    model: metadata.model ?? '',
    optimizer: metadata.optimizer ?? '',
    step: int('step'),
    epoch: int('epoch'),
    layoutHash: metadata.layout_hash ?? '',
    params,
    optimizerState,
    extra,
    integrity,
  };
}

/** A NaN or infinity in a checkpoint means the run that saved it had diverged (or the file was edited): never load it. */
function refuseNonFinite(file: string, tensor: string, data: Float32Array): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) {
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: tensor '${tensor}' holds ${data[i]} at index ${i}; the run that saved it had diverged. Resume from an earlier checkpoint.`,
        { file, tensor, index: i },
      );
    }
  }
}

const BUILT_IN_MODELS = ['mlp', 'cnn', 'transformer'];

/** A model file's base name from its registered name (`net@1a2b3c4d` → `net`). */
function modelFileBase(name: string): string {
  return name.replace(/@[0-9a-f]{8}$/, '');
}

/**
 * Checks model and optimizer kind only: cheap, so a command can refuse a wrong checkpoint before any GPU work.
 * Two models from files are not told apart here: a model file's name carries a hash of its text, and a
 * comment is no reason to refuse; their layouts (names and shapes) and options decide (flatParamsFor).
 */
export function checkCheckpointKind(
  c: TrainingCheckpoint,
  expect: { model: string; optimizer?: string },
  file = 'checkpoint',
): void {
  const fromFile = (m: string) => !BUILT_IN_MODELS.includes(m);
  if (c.model !== expect.model && !(fromFile(c.model) && fromFile(expect.model))) {
    // Every "pass" names a value --model accepts: a built-in kind, or the path of a model file.
    const pass = fromFile(c.model)
      ? `--model ./${modelFileBase(c.model)}.ts (the model file it was trained from)`
      : `--model ${c.model}`;
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} holds a '${c.model}' model, not '${expect.model}'; pass ${pass} or another checkpoint.`,
      {
        file,
        checkpointModel: c.model,
        model: expect.model,
      },
    );
  }
  if (expect.optimizer !== undefined && c.optimizer !== expect.optimizer) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} was saved with the ${c.optimizer} optimizer, not ${expect.optimizer}; pass --optimizer ${c.optimizer} to resume it.`,
      { file, checkpointOptimizer: c.optimizer, optimizer: expect.optimizer },
    );
  }
}

/**
 * Checks a checkpoint against the model about to receive it and returns the
 * flat parameter buffer in the model's layout. Errors name the tensor and both
 * shapes, so "wrong model" is told apart from "damaged file".
 */
export function flatParamsFor(
  c: TrainingCheckpoint,
  expect: { model: string; layout: readonly LayoutEntry[]; optimizer?: string; flatLength?: number },
  file = 'checkpoint',
): Float32Array {
  checkCheckpointKind(c, expect, file);
  // The model's flat buffer may pad between tensors; padding stays zero.
  const total = expect.flatLength ?? expect.layout.reduce((n, e) => Math.max(n, e.offset + e.length), 0);
  const flat = new Float32Array(total);
  for (const e of expect.layout) {
    const t = c.params[e.name];
    if (!t) {
      const theirs = Object.entries(c.params)[expect.layout.indexOf(e)];
      const there = theirs ? `; in its place the checkpoint has '${theirs[0]}' [${theirs[1].shape}]` : '';
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file} has no tensor '${e.name}' (the model expects shape [${e.shape}])${there}; it belongs to a different model.`,
        {
          file,
          tensor: e.name,
          expectedShape: [...e.shape],
          checkpointTensor: theirs?.[0],
          checkpointShape: theirs ? [...theirs[1].shape] : undefined,
        },
      );
    }
    if (t.shape.length !== e.shape.length || t.shape.some((d, i) => d !== e.shape[i])) {
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: tensor '${e.name}' has shape [${t.shape}] in the checkpoint but [${e.shape}] in the model; it was saved from a model of another size.`,
        { file, tensor: e.name, checkpointShape: t.shape, expectedShape: [...e.shape] },
      );
    }
    flat.set(t.data, e.offset);
  }
  const known = new Set(expect.layout.map((e) => e.name));
  const unknown = Object.keys(c.params).filter((n) => !known.has(n));
  if (unknown.length > 0) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} has tensors the model does not: ${unknown.map((n) => `${n} [${c.params[n].shape}]`).join(', ')}; it belongs to a different model.`,
      { file, unknown },
    );
  }
  for (let i = 0; i < flat.length; i++) {
    if (!Number.isFinite(flat[i])) {
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: parameter ${i} is ${flat[i]}; the run that saved it diverged. Resume from an earlier checkpoint.`,
        { file, index: i },
      );
    }
  }
  return flat;
}

/** Checks the optimizer state arrays against the lengths the optimizer expects (by key). */
export function checkOptimizerState(
  c: TrainingCheckpoint,
  expected: Record<string, number>,
  file = 'checkpoint',
): void {
  for (const [key, length] of Object.entries(expected)) {
    const got = c.optimizerState[key];
    if (!got)
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file} has no optimizer state '${key}' (${c.optimizer}); it is incomplete.`,
        { file, tensor: OPTIM_PREFIX + key },
      );
    if (got.length !== length) {
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: optimizer state '${key}' has shape [${got.length}] in the checkpoint but [${length}] in the optimizer.`,
        {
          file,
          tensor: OPTIM_PREFIX + key,
          checkpointShape: [got.length],
          expectedShape: [length],
        },
      );
    }
  }
}
