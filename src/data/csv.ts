/**
 * A CSV file as cells, each row with the file's line number (from 1, counting
 * the header and blank lines), so every message points at a line a person can
 * open. Cells stay text until a caller knows which column holds numbers and
 * which holds class names (a label column of `setosa`, `versicolor`, …).
 *
 * The first line is a header when it cannot be a row of data: a cell that is
 * not a number above a cell of the next row that is one, or (a file of one
 * row, or of names throughout) no number in it at all. A headerless file whose
 * last column holds names (`5.1,3.5,1.4,0.2,setosa`) is thereby read as data.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export interface CsvRow {
  /** The file's line number, from 1. */
  line: number;
  cells: string[];
}

export interface CsvCells {
  header: string[] | undefined;
  rows: CsvRow[];
  /** Columns per row (every row has as many as the header, or as the first row). */
  width: number;
}

const isNumber = (c: string) => c !== '' && Number.isFinite(Number(c));

function looksLikeHeader(first: string[], next: string[] | undefined): boolean {
  if (next === undefined || next.every((c) => !isNumber(c))) return first.every((c) => !isNumber(c));
  return first.some((c, j) => !isNumber(c) && isNumber(next[j] ?? ''));
}

export function parseCsvCells(text: string, file: string): CsvCells {
  const rows: CsvRow[] = [];
  text.split(/\r?\n/).forEach((l, i) => {
    if (l.trim() !== '') rows.push({ line: i + 1, cells: l.split(',').map((c) => c.trim()) });
  });
  const header = rows.length > 0 && looksLikeHeader(rows[0].cells, rows[1]?.cells) ? rows.shift()!.cells : undefined;
  if (rows.length === 0)
    throw new RingtrainError(ErrorCode.BadData, `${file} holds no rows of data${header ? ' below its header' : ''}`, {
      file,
    });
  const width = header?.length ?? rows[0].cells.length;
  const against = header ? 'the header has' : `the first row (line ${rows[0].line}) has`;
  for (const r of rows) {
    if (r.cells.length !== width) {
      throw new RingtrainError(
        ErrorCode.BadData,
        `${file}: row at line ${r.line} has ${r.cells.length} columns, ${against} ${width}; every row needs the same columns`,
        { file, line: r.line },
      );
    }
  }
  return { header, rows, width };
}

/**
 * The index of a column named by the header or by its number from 0: `flag`
 * (the option that named it) and the file's columns are in the refusal.
 */
export function csvColumn(t: Pick<CsvCells, 'header' | 'width'>, name: string, file: string, flag: string): number {
  const byName = t.header ? t.header.indexOf(name) : -1;
  if (byName >= 0) return byName;
  if (/^\d+$/.test(name)) {
    const n = Number(name);
    if (n < t.width) return n;
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} ${name}: column ${name} does not exist; ${file} has ${t.width} (numbered 0 to ${t.width - 1}${t.header ? `: ${t.header.join(', ')}` : ''})`,
      { file, column: name },
    );
  }
  const has = t.header
    ? `the columns ${t.header.join(', ')}`
    : `no header, so give a column number 0 to ${t.width - 1}`;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `${flag} ${name}: ${file} has no column ${JSON.stringify(name)}; it has ${has}`,
    { file, column: name },
  );
}

/** The rows' numbers, leaving out column `skip`; a cell that is no number is refused with its line and column. */
export function csvNumbers(t: CsvCells, file: string, skip = -1): number[][] {
  return t.rows.map((r) =>
    r.cells.flatMap((c, j) => {
      if (j === skip) return [];
      if (!isNumber(c)) {
        const name = t.header ? ` (${t.header[j]})` : '';
        throw new RingtrainError(
          ErrorCode.BadData,
          `${file}: line ${r.line}, column ${j}${name} is ${JSON.stringify(c)}, not a finite number`,
          { file, line: r.line, column: j },
        );
      }
      return [Number(c)];
    }),
  );
}

/**
 * Class ids from a column's cells: whole numbers ≥ 0 as they are; names
 * (any cell that is not a number) mapped to their index in the sorted list of
 * distinct names, which is the same on every peer that reads the same file.
 */
export function classIds(
  cells: readonly { line: number; value: string }[],
  file: string,
): { ids: number[]; names?: string[] } {
  if (cells.every((c) => isNumber(c.value))) {
    for (const c of cells) {
      const y = Number(c.value);
      if (!Number.isInteger(y) || y < 0)
        throw new RingtrainError(
          ErrorCode.BadData,
          `${file}: the label at line ${c.line} is ${c.value}; labels are class numbers 0, 1, 2, … or class names`,
          { file, line: c.line },
        );
    }
    return { ids: cells.map((c) => Number(c.value)) };
  }
  const empty = cells.find((c) => c.value === '');
  if (empty)
    throw new RingtrainError(
      ErrorCode.BadData,
      `${file}: the label at line ${empty.line} is empty; give every row its class`,
      { file, line: empty.line },
    );
  // Code-unit order, not the locale's: every runtime and machine sorts the same.
  const names = [...new Set(cells.map((c) => c.value))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const id = new Map(names.map((n, i) => [n, i]));
  return { ids: cells.map((c) => id.get(c.value)!), names };
}
