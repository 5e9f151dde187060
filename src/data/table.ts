/**
 * A classifier's data set from a table of rows (CSV, NPY or JSON, rows.ts):
 * one example per row, its features as inputs and one integer class label.
 *
 * Test split: row i is a test row when i % TEST_STRIDE == TEST_STRIDE − 1
 * (every fifth row, 20%): deterministic, the same on every peer, and spread
 * over the file, so a table sorted by class (as many are) still tests every
 * class, where "the last 20%" would hold out one class.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type Dataset, makeDataset } from './dataset.ts';
import { classIds, csvColumn, csvNumbers, parseCsvCells } from './csv.ts';
import { parseRows, rowFormatOf, type RowFormat } from './rows.ts';

export const TEST_STRIDE = 5;

export interface TableSplit {
  train: Dataset;
  test: Dataset;
  features: number;
  classes: number;
  /** Class names, when the label column held names: class i is names[i]. */
  classNames?: string[];
}

/** Where a table's labels came from and what they name: both splits carry it into checkpoints. */
interface LabelSource {
  classNames?: string[];
  labelColumn?: string;
}

/** Train and test sets from feature rows and their labels; `file` names the data in every message. */
export function tableSplit(
  features: readonly (readonly number[])[],
  labels: readonly number[],
  file: string,
  labelsFile = file,
  source: LabelSource = {},
): TableSplit {
  if (features.length !== labels.length) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${file} has ${features.length} rows but ${labelsFile} ${labels.length} labels; give one label per row`,
      { rows: features.length, labels: labels.length },
    );
  }
  const width = features[0]?.length ?? 0;
  if (width === 0)
    throw new RingtrainError(ErrorCode.BadData, `${file}: its rows have no feature columns (besides the label)`);
  features.forEach((row, i) => {
    if (row.length !== width)
      throw new RingtrainError(
        ErrorCode.BadData,
        `${file}: row ${i} has ${row.length} features, row 0 has ${width}; every row needs the same columns`,
        { row: i },
      );
  });
  labels.forEach((y, i) => {
    if (!Number.isInteger(y) || y < 0)
      throw new RingtrainError(
        ErrorCode.BadData,
        `${labelsFile}: the label of row ${i} is ${y}; labels are class numbers 0, 1, 2, …`,
        { row: i, label: y },
      );
  });
  if (features.length < TEST_STRIDE)
    throw new RingtrainError(
      ErrorCode.BadData,
      `${file} has ${features.length} rows; at least ${TEST_STRIDE} are needed (every ${TEST_STRIDE}th row is a test row)`,
    );
  const classes = Math.max(2, source.classNames?.length ?? 0, ...labels.map((y) => y + 1));
  const part = (test: boolean): Dataset => {
    const idx = features.map((_, i) => i).filter((i) => (i % TEST_STRIDE === TEST_STRIDE - 1) === test);
    const inputs = new Float32Array(idx.length * width);
    idx.forEach((i, k) => inputs.set(features[i], k * width));
    return {
      ...makeDataset({ inputs, inputSize: width, labels: idx.map((i) => labels[i]), positions: 1, classes }, file),
      source: file,
      ...source,
    };
  };
  return {
    train: part(false),
    test: part(true),
    features: width,
    classes,
    ...(source.classNames ? { classNames: source.classNames } : {}),
  };
}

/**
 * A table's split from its bytes, in every runtime: what a worker reads from
 * its disk and a tab downloads. The labels are a column of the table (a CSV
 * header's name, or a column number from 0) or another file's rows (one label
 * per row; a 1-D .npy or JSON array is one row of labels). `file` names the
 * table in every message.
 */
export function tableFromBytes(
  bytes: Uint8Array,
  file: string,
  format: RowFormat,
  labels: { labelColumn: string } | { labels: { bytes: Uint8Array; file: string } },
): TableSplit {
  if ('labelColumn' in labels && format === 'csv')
    return csvTable(new TextDecoder().decode(bytes), file, labels.labelColumn);
  const rows =
    format === 'csv'
      ? csvNumbers(parseCsvCells(new TextDecoder().decode(bytes), file), file)
      : parseRows(bytes, file, format);
  if ('labelColumn' in labels) {
    const width = rows[0].length;
    const short = rows.findIndex((r) => r.length !== width);
    if (short >= 0)
      throw new RingtrainError(
        ErrorCode.BadData,
        `${file}: row ${short} has ${rows[short].length} values, row 0 has ${width}; every row needs the same columns`,
        { file, row: short },
      );
    const column = csvColumn({ header: undefined, width }, labels.labelColumn, file, '--label-column');
    return tableSplit(
      rows.map((r) => r.filter((_, j) => j !== column)),
      rows.map((r) => r[column]),
      file,
      file,
      { labelColumn: String(column) },
    );
  }
  const labelsFile = labels.labels.file;
  const labelsFormat = rowFormatOf(labelsFile) ?? 'csv';
  if (labelsFormat === 'csv') return labelLines(rows, file, new TextDecoder().decode(labels.labels.bytes), labelsFile);
  const table = parseRows(labels.labels.bytes, labelsFile, labelsFormat);
  // A 1-D .npy or JSON array reads as one row: its values are the labels.
  const values =
    table.length === 1 && rows.length > 1
      ? table[0]
      : table.map((r, i) => {
          if (r.length !== 1)
            throw new RingtrainError(
              ErrorCode.BadData,
              `${labelsFile}: row ${i} has ${r.length} values; give one label per row`,
              { file: labelsFile, row: i },
            );
          return r[0];
        });
  return tableSplit(rows, values, file, labelsFile);
}

/** A CSV table whose label column holds class numbers or class names (mapped to sorted ids, csv.ts). */
function csvTable(text: string, file: string, labelColumn: string): TableSplit {
  const t = parseCsvCells(text, file);
  const column = csvColumn(t, labelColumn, file, '--label-column');
  const { ids, names } = classIds(
    t.rows.map((r) => ({ line: r.line, value: r.cells[column] })),
    file,
  );
  // The header's name when there is one: predict finds the column by it in a file of other order.
  const recorded = t.header ? t.header[column] : String(column);
  return tableSplit(csvNumbers(t, file, column), ids, file, file, {
    labelColumn: recorded,
    ...(names ? { classNames: names } : {}),
  });
}

/**
 * A text labels file (.csv, .txt): one label per line, class numbers or class
 * names (mapped as a label column's are). A first line more than the table's
 * rows is its header: a column of names alone cannot tell a header apart.
 */
function labelLines(rows: number[][], file: string, text: string, labelsFile: string): TableSplit {
  const lines: { line: number; value: string }[] = [];
  text.split(/\r?\n/).forEach((l, i) => {
    if (l.trim() === '') return;
    const cells = l.split(',');
    if (cells.length !== 1)
      throw new RingtrainError(
        ErrorCode.BadData,
        `${labelsFile}: line ${i + 1} has ${cells.length} values; give one label per line`,
        { file: labelsFile, line: i + 1 },
      );
    lines.push({ line: i + 1, value: cells[0].trim() });
  });
  const body = lines.length === rows.length + 1 ? lines.slice(1) : lines;
  const { ids, names } = classIds(body, labelsFile);
  return tableSplit(rows, ids, file, labelsFile, names ? { classNames: names } : {});
}
