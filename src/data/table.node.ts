/**
 * Node and Deno: `--data FILE.csv|FILE.npy|FILE.json` with `--label-column
 * NAME` (a CSV header's name, or a column number from 0) or `--labels FILE`
 * (one label per row: a one-column CSV/NPY/JSON, or a text file with one
 * number per line).
 */
import { readFileSync } from 'node:fs';
import { ErrorCode, RingtrainError, unreadableReason } from '../core/errors.ts';
import { rowFormatOf } from './rows.ts';
import { tableFromBytes, type TableSplit } from './table.ts';

export interface TableChoice {
  labels?: string;
  labelColumn?: string;
}

function read(file: string, flag: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} ${file}: cannot read it (${unreadableReason(err)})`,
      { file },
      { cause: err },
    );
  }
}

export function loadTable(file: string, choice: TableChoice): TableSplit {
  const format = rowFormatOf(file);
  if (!format)
    throw new RingtrainError(ErrorCode.InvalidArgument, `--data ${file}: a table must be .csv, .npy or .json`);
  if ((choice.labels === undefined) === (choice.labelColumn === undefined)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--data ${file} needs its labels: --label-column NAME (a column of the file) or --labels FILE (one label per row), one of them`,
      { file },
    );
  }
  const bytes = read(file, '--data');
  if (choice.labelColumn !== undefined) return tableFromBytes(bytes, file, format, { labelColumn: choice.labelColumn });
  return tableFromBytes(bytes, file, format, {
    labels: { bytes: read(choice.labels!, '--labels'), file: choice.labels! },
  });
}
