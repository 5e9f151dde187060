/**
 * predict(model, rows): a model's outputs for rows of features, in eval mode
 * (the model's predict: Dropout off), as logits per row and the likeliest
 * class of every output row. Rows whose length is not the model's input size
 * are refused before any GPU work, naming where they came from, the model and
 * both shapes.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Model } from './model.ts';

export interface PredictOptions {
  /** Where the rows came from (a file name), for error messages. */
  source?: string;
  /** Rows per GPU pass (default 256). */
  chunk?: number;
}

export interface Prediction {
  /** Per input row: its logits, positions × classes (classes for a classifier). */
  logits: Float32Array[];
  /** The argmax of every output row: one class per input row for a classifier, `positions` per row for a sequence model (row-major). */
  classes: number[];
}

/** One sample's shape as the model reads it. */
export function inputShapeOf(model: Model): readonly number[] {
  return model.inputShape ?? [model.inputSize];
}

/** Turns rows (arrays of numbers, or one flat Float32Array of whole rows) into the model's flat input, checking their width. */
export function rowsToInput(
  model: Model,
  rows: readonly ArrayLike<number>[] | Float32Array,
  source = 'the rows',
): { x: Float32Array; count: number } {
  const want = model.inputSize;
  const shape = `[${inputShapeOf(model).join(', ')}]`;
  const refuse = (got: string, detail: Record<string, unknown>) =>
    new RingtrainError(
      ErrorCode.InvalidArgument,
      `${source}: ${got}, but model ${model.identity.name} reads inputShape ${shape} (${want} features per row); give rows of ${want} numbers`,
      {
        source,
        model: model.identity.name,
        inputShape: [...inputShapeOf(model)],
        ...detail,
      },
    );
  if (rows instanceof Float32Array) {
    if (rows.length === 0 || rows.length % want !== 0)
      throw refuse(`${rows.length} numbers are not whole rows`, { got: rows.length });
    return { x: rows, count: rows.length / want };
  }
  if (!Array.isArray(rows) || rows.length === 0) throw refuse('no rows', { rows: 0 });
  const x = new Float32Array(rows.length * want);
  rows.forEach((row, i) => {
    if (row === null || typeof row !== 'object' || typeof row.length !== 'number')
      throw refuse(`row ${i} is not an array of numbers`, { row: i });
    if (row.length !== want) throw refuse(`row ${i} has shape [${row.length}]`, { row: i, got: [row.length] });
    for (let j = 0; j < want; j++) {
      const v = row[j];
      if (typeof v !== 'number' || !Number.isFinite(v))
        throw refuse(`row ${i}, feature ${j} is ${JSON.stringify(v)}, not a finite number`, { row: i, feature: j });
      x[i * want + j] = v;
    }
  });
  return { x, count: rows.length };
}

export async function predict(
  model: Model,
  rows: readonly ArrayLike<number>[] | Float32Array,
  o: PredictOptions = {},
): Promise<Prediction> {
  const { x, count } = rowsToInput(model, rows, o.source);
  const chunk = o.chunk ?? 256;
  if (!Number.isInteger(chunk) || chunk < 1)
    throw new RingtrainError(ErrorCode.InvalidArgument, `predict: chunk must be a positive integer, got ${chunk}`, {
      chunk,
    });
  const perRow = (model.positions ?? 1) * model.classes;
  const logits: Float32Array[] = [];
  const classes: number[] = [];
  for (let start = 0; start < count; start += chunk) {
    const b = Math.min(chunk, count - start);
    const out = await model.predict(x.subarray(start * model.inputSize, (start + b) * model.inputSize), b);
    for (let i = 0; i < b; i++) logits.push(out.slice(i * perRow, (i + 1) * perRow));
    for (let r = 0; r < out.length / model.classes; r++) {
      let best = 0;
      for (let c = 1; c < model.classes; c++) if (out[r * model.classes + c] > out[r * model.classes + best]) best = c;
      classes.push(best);
    }
  }
  return { logits, classes };
}

/** A language model (a transformer): one token id in per position, one row of next-token logits out per position. */
export function isLanguageModel(model: Model): boolean {
  return (model.positions ?? 1) > 1 && model.positions === model.inputSize;
}

export interface NextTokens {
  /** Per input row: the logits at its last token, over the vocabulary. */
  logits: Float32Array[];
  /** Per input row: the argmax of those logits, the likeliest next token. */
  nextTokens: number[];
}

/**
 * A language model's next token after each row of token ids (1 to context ids;
 * rows may differ in length). Each row is padded after its end: attention is
 * causal, so what follows the last token changes nothing at it.
 */
export async function predictNextTokens(
  model: Model,
  rows: readonly ArrayLike<number>[],
  o: PredictOptions = {},
): Promise<NextTokens> {
  const context = model.inputSize;
  const vocab = model.classes;
  const source = o.source ?? 'the rows';
  if (!Array.isArray(rows) || rows.length === 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${source}: no rows; give rows of token ids, e.g. [[464, 3290]]`,
      { source },
    );
  const padded = rows.map((row, i) => {
    if (row.length < 1 || row.length > context) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${source}: row ${i} has ${row.length} token ids; model ${model.identity.name} reads 1 to ${context} (its context): keep the last ${context}`,
        { source, row: i, got: row.length, context },
      );
    }
    const ids = new Float32Array(context);
    for (let j = 0; j < row.length; j++) {
      const id = row[j];
      if (!Number.isInteger(id) || id < 0 || id >= vocab) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `${source}: row ${i}, position ${j} is ${JSON.stringify(id)}, not a token id of this model's vocabulary (0 to ${vocab - 1})`,
          { source, row: i, position: j },
        );
      }
      ids[j] = id;
    }
    return ids;
  });
  const { logits: all } = await predict(model, padded, o);
  const logits = all.map((l, i) => l.slice((rows[i].length - 1) * vocab, rows[i].length * vocab));
  const nextTokens = logits.map((l) => l.reduce((best, v, c) => (v > l[best] ? c : best), 0));
  return { logits, nextTokens };
}
