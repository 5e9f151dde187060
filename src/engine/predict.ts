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
export function rowsToInput(model: Model, rows: readonly ArrayLike<number>[] | Float32Array, source = 'the rows'): { x: Float32Array; count: number } {
  const want = model.inputSize;
  const shape = `[${inputShapeOf(model).join(', ')}]`;
  const refuse = (got: string, detail: Record<string, unknown>) =>
    new RingtrainError(ErrorCode.InvalidArgument, `${source}: ${got}, but model ${model.identity.name} reads inputShape ${shape} (${want} features per row); give rows of ${want} numbers`, {
      source,
      model: model.identity.name,
      inputShape: [...inputShapeOf(model)],
      ...detail,
    });
  if (rows instanceof Float32Array) {
    if (rows.length === 0 || rows.length % want !== 0) throw refuse(`${rows.length} numbers are not whole rows`, { got: rows.length });
    return { x: rows, count: rows.length / want };
  }
  if (!Array.isArray(rows) || rows.length === 0) throw refuse('no rows', { rows: 0 });
  const x = new Float32Array(rows.length * want);
  rows.forEach((row, i) => {
    if (row === null || typeof row !== 'object' || typeof row.length !== 'number') throw refuse(`row ${i} is not an array of numbers`, { row: i });
    if (row.length !== want) throw refuse(`row ${i} has shape [${row.length}]`, { row: i, got: [row.length] });
    for (let j = 0; j < want; j++) {
      const v = row[j];
      if (typeof v !== 'number' || !Number.isFinite(v)) throw refuse(`row ${i}, feature ${j} is ${JSON.stringify(v)}, not a finite number`, { row: i, feature: j });
      x[i * want + j] = v;
    }
  });
  return { x, count: rows.length };
}

export async function predict(model: Model, rows: readonly ArrayLike<number>[] | Float32Array, o: PredictOptions = {}): Promise<Prediction> {
  const { x, count } = rowsToInput(model, rows, o.source);
  const chunk = o.chunk ?? 256;
  if (!Number.isInteger(chunk) || chunk < 1) throw new RingtrainError(ErrorCode.InvalidArgument, `predict: chunk must be a positive integer, got ${chunk}`, { chunk });
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
