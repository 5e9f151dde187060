/**
 * broadcastVariables and broadcastOptimizerState for TF.js: before the first
 * step every rank takes the root's weights (and optimizer state), so the
 * replicas start identical. Both check first that every rank has the same
 * layout, then send everything as one flat buffer.
 */
import * as tf from '@tensorflow/tfjs-core';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/communicator.ts';
import { broadcast } from '../collectives/broadcast.ts';
import { agreeOnLayout, describeVariables, gatherLayouts, type VariableSpec } from './layout.ts';
import { resolveRing, type RingSource } from './ring.ts';

export interface TfBroadcastOptions {
  comm?: RingSource;
  timeoutMs?: number;
}

/** A tf.Variable, or a layers LayerVariable (read/write instead of assign). */
type AnyVariable = tf.Variable | LayerVariableLike;
interface LayerVariableLike {
  readonly name: string;
  /** Layers types allow null (unknown) dimensions; a created variable has none. */
  readonly shape: readonly (number | null)[];
  readonly dtype: tf.DataType;
  read(): tf.Tensor;
  write(t: tf.Tensor): unknown;
}

/** Anything whose variables can be listed: a LayersModel (all its weights, trainable or not) or a list of variables. */
export type VariableSource =
  readonly tf.Variable[] | readonly LayerVariableLike[] | { readonly weights: readonly LayerVariableLike[] };

function variablesOf(source: VariableSource): readonly AnyVariable[] {
  if (Array.isArray(source)) return source as readonly AnyVariable[];
  const weights = (source as { weights?: unknown }).weights;
  if (Array.isArray(weights)) return weights as AnyVariable[];
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    'broadcastVariables: pass a TF.js LayersModel or an array of tf.Variable',
  );
}

function readValue(v: AnyVariable): tf.Tensor {
  return 'read' in v ? v.read() : v;
}

function writeValue(v: AnyVariable, t: tf.Tensor): void {
  if ('write' in v) v.write(t);
  else v.assign(t);
}

function sizeOf(s: VariableSpec): number {
  return s.shape.reduce((a, b) => a * b, 1);
}

function checkRoot(comm: Communicator, root: number, what: string): void {
  if (!Number.isInteger(root) || root < 0 || root >= comm.size) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: root ${root} is not a rank of this ring (0..${comm.size - 1})`,
    );
  }
}

/** Packs tensors (any numeric dtype) into one float32 buffer. int32 values up to 2^24 travel exactly. */
async function pack(tensors: readonly tf.Tensor[], total: number): Promise<Float32Array> {
  const flat = new Float32Array(total);
  let offset = 0;
  for (const t of tensors) {
    const data = await t.data();
    flat.set(data as ArrayLike<number>, offset);
    offset += t.size;
  }
  return flat;
}

/** Every rank ends with the root's values of the model's (or the list's) variables. */
export async function broadcastVariables(
  source: VariableSource,
  rootRank = 0,
  o: TfBroadcastOptions = {},
): Promise<void> {
  const comm = resolveRing(o.comm, 'broadcastVariables');
  checkRoot(comm, rootRank, 'broadcastVariables');
  const vars = variablesOf(source);
  const layout = describeVariables(vars.map((v) => ({ name: v.name, shape: v.shape as number[], dtype: v.dtype })));
  for (const s of layout) {
    if (s.dtype !== 'float32')
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `broadcastVariables: variable '${s.name}' is ${s.dtype}; only float32 variables are sent`,
      );
  }
  await agreeOnLayout(comm, layout, 'broadcastVariables', o.timeoutMs);
  const total = layout.reduce((a, s) => a + sizeOf(s), 0);
  const mine = comm.rank === rootRank ? await pack(vars.map(readValue), total) : new Float32Array(total);
  const got = await broadcast(comm, mine, { root: rootRank, name: 'tfjs/variables', timeoutMs: o.timeoutMs });
  if (comm.rank === rootRank) return;
  let offset = 0;
  vars.forEach((v, i) => {
    const n = sizeOf(layout[i]);
    const value = tf.tensor(got.subarray(offset, offset + n), layout[i].shape, 'float32');
    offset += n;
    writeValue(v, value);
    value.dispose();
  });
}

/**
 * Every rank ends with the root's optimizer state (step count, moments...),
 * in the root's layout: a rank whose optimizer has made no step yet (so has
 * no moments) takes the root's as they are.
 */
export async function broadcastOptimizerState(
  optimizer: tf.Optimizer,
  rootRank = 0,
  o: TfBroadcastOptions = {},
): Promise<void> {
  const comm = resolveRing(o.comm, 'broadcastOptimizerState');
  checkRoot(comm, rootRank, 'broadcastOptimizerState');
  const weights = await optimizer.getWeights();
  try {
    const rootLayout = (
      await gatherLayouts(
        comm,
        describeVariables(weights.map((w) => ({ name: w.name, shape: w.tensor.shape, dtype: w.tensor.dtype }))),
        'broadcastOptimizerState',
        o.timeoutMs,
      )
    )[rootRank];
    const total = rootLayout.reduce((a, s) => a + sizeOf(s), 0);
    const mine =
      comm.rank === rootRank
        ? await pack(
            weights.map((w) => w.tensor),
            total,
          )
        : new Float32Array(total);
    const got = await broadcast(comm, mine, { root: rootRank, name: 'tfjs/optimizer-state', timeoutMs: o.timeoutMs });
    if (comm.rank === rootRank) return;
    let offset = 0;
    const values = rootLayout.map((s) => {
      const n = sizeOf(s);
      const tensor = tf.tensor(got.subarray(offset, offset + n), s.shape, s.dtype as tf.DataType);
      offset += n;
      return { name: s.name, tensor };
    });
    await optimizer.setWeights(values);
    tf.dispose(values.map((v) => v.tensor));
  } finally {
    // getWeights hands out the optimizer's own variables (moments) beside fresh tensors (the step count): free only the
    // latter.
    tf.dispose(weights.map((w) => w.tensor).filter((t) => !(t instanceof tf.Variable)));
  }
}
