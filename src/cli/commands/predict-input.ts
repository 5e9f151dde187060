/**
 * What `ringtrain predict` reads besides the weights: the rows of features,
 * from any file a person has at hand, the training file included, and the
 * class names a checkpoint records.
 *
 * The training file's label column is left out of its rows: the one that
 * `--label-column` names, else the one the checkpoint records (`label_column`,
 * written when the model was trained on a table). A recorded column is looked
 * for by its header name; one recorded by number is left out only when the
 * rows are one column wider than the model reads, so rows of features alone
 * (a file without the labels) are taken as they are.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Metadata } from '../../checkpoint/safetensors.ts';
import { csvColumn, csvNumbers, parseCsvCells } from '../../data/csv.ts';
import { parseRows, type RowFormat } from '../../data/rows.ts';

export interface PredictInputOptions {
  /** `--label-column`: a header name or a column number from 0. */
  labelColumn?: string;
  /** The checkpoint's `label_column`. */
  recorded?: string;
  /** Features per row the model reads. */
  inputSize: number;
}

/** The column to leave out of rows `width` wide, or -1. */
function labelColumnOf(header: string[] | undefined, width: number, file: string, o: PredictInputOptions): number {
  if (o.labelColumn !== undefined) return csvColumn({ header, width }, o.labelColumn, file, '--label-column');
  if (o.recorded === undefined) return -1;
  const byName = header ? header.indexOf(o.recorded) : -1;
  if (byName >= 0) return byName;
  const n = /^\d+$/.test(o.recorded) ? Number(o.recorded) : -1;
  if (n >= 0 && n < width && width === o.inputSize + 1) return n;
  if (width === o.inputSize + 1) {
    // One column too many, and not the one training read its labels from: say which to leave out.
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${file} has ${width} columns, one more than the model reads (${o.inputSize}), but no column ${JSON.stringify(o.recorded)}, which held the labels in training; name the column to leave out: --label-column NAME or NUMBER`,
      { file, labelColumn: o.recorded },
    );
  }
  return -1;
}

/** The rows of features in `bytes`, without the label column (see the file's comment). */
export function predictRows(bytes: Uint8Array, file: string, format: RowFormat, o: PredictInputOptions): number[][] {
  if (format === 'csv') {
    const t = parseCsvCells(new TextDecoder().decode(bytes), file);
    return csvNumbers(t, file, labelColumnOf(t.header, t.width, file, o));
  }
  const rows = parseRows(bytes, file, format);
  const column = labelColumnOf(undefined, rows[0].length, file, o);
  return column < 0 ? rows : rows.map((r) => r.filter((_, j) => j !== column));
}

/** The class names a checkpoint records (`class_names`, a JSON array of strings), or undefined. */
export function classNamesOf(metadata: Metadata, file: string): string[] | undefined {
  const raw = metadata.class_names;
  if (raw === undefined) return undefined;
  let names: unknown;
  try {
    names = JSON.parse(raw);
  } catch {
    names = undefined;
  }
  if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file}: its class_names metadata is not a JSON array of names (${raw.slice(0, 80)}); the file was changed after training`,
      { file },
    );
  }
  return names;
}
