/**
 * Node and Deno: `--data FILE.csv|FILE.npy|FILE.json` with `--label-column
 * NAME` (a CSV header's name, or a column number from 0) or `--labels FILE`
 * (one label per row: a one-column CSV/NPY/JSON, or a text file with one
 * number per line).
 */
import { readFileSync } from 'node:fs';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { parseCsvTable, parseRows, rowFormatOf } from './rows.ts';
import { tableSplit, type TableSplit } from './table.ts';

export interface TableChoice {
  labels?: string;
  labelColumn?: string;
}

function read(file: string, flag: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw new RingtrainError(ErrorCode.InvalidArgument, `${flag} ${file}: cannot read it (${code === 'ENOENT' ? 'no such file' : code ?? String(err)})`, { file }, { cause: err });
  }
}

export function loadTable(file: string, choice: TableChoice): TableSplit {
  const format = rowFormatOf(file);
  if (!format) throw new RingtrainError(ErrorCode.InvalidArgument, `--data ${file}: a table must be .csv, .npy or .json`);
  if ((choice.labels === undefined) === (choice.labelColumn === undefined)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `--data ${file} needs its labels: --label-column NAME (a column of the file) or --labels FILE (one label per row), one of them`, { file });
  }
  const bytes = read(file, '--data');
  let header: string[] | undefined;
  let rows: number[][];
  if (format === 'csv') ({ header, rows } = parseCsvTable(new TextDecoder().decode(bytes), file));
  else rows = parseRows(bytes, file, format);
  if (choice.labelColumn !== undefined) {
    const name = choice.labelColumn;
    let column = header ? header.indexOf(name) : -1;
    if (column < 0 && /^\d+$/.test(name)) column = Number(name);
    const width = rows[0].length;
    if (column < 0 || column >= width) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `--label-column ${name}: ${file} has ${header ? `the columns ${header.join(', ')}` : `no header and ${width} columns (give a number 0..${width - 1})`}`, { file, column: name });
    }
    return tableSplit(rows.map((r) => r.filter((_, j) => j !== column)), rows.map((r) => r[column]), file);
  }
  const labelsFile = choice.labels!;
  const labelBytes = read(labelsFile, '--labels');
  const labelFormat = rowFormatOf(labelsFile) ?? 'csv';
  const table = parseRows(labelBytes, labelsFile, labelFormat);
  // A 1-D .npy or JSON array reads as one row: its values are the labels.
  const labels = table.length === 1 && rows.length > 1 ? table[0] : table.map((r, i) => {
    if (r.length !== 1) throw new RingtrainError(ErrorCode.BadData, `${labelsFile}: row ${i} has ${r.length} values; give one label per row`, { file: labelsFile, row: i });
    return r[0];
  });
  return tableSplit(rows, labels, file, labelsFile);
}
