/**
 * Rows of features from a file's bytes, for `ringtrain predict`: JSON (an
 * array of rows, each an array of numbers), CSV (one row per line, a header
 * line of names skipped) or NPY (NumPy's .npy: a 1-D or 2-D array of floats or
 * integers, C order). Each parser names the file and the place that is wrong
 * (a CSV file's line, csv.ts).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { csvNumbers, parseCsvCells } from './csv.ts';

export type RowFormat = 'json' | 'csv' | 'npy';

/** The format a file name says (.json, .csv, .npy), or undefined. */
export function rowFormatOf(file: string): RowFormat | undefined {
  const m = /\.(json|csv|npy)$/i.exec(file);
  return m ? (m[1].toLowerCase() as RowFormat) : undefined;
}

const bad = (file: string, what: string, detail: Record<string, unknown> = {}) =>
  new RingtrainError(ErrorCode.BadData, `${file}: ${what}`, { file, ...detail });

export function parseRowsJson(text: string, file: string): number[][] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw bad(file, `is not JSON (${(err as Error).message}); give an array of rows, e.g. [[0.1, 0.2], [0.3, 0.4]]`);
  }
  // One row alone is accepted as a list of one.
  if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'number')) value = [value];
  if (!Array.isArray(value) || value.length === 0)
    throw bad(file, 'holds no rows; give an array of rows, e.g. [[0.1, 0.2], [0.3, 0.4]]');
  return value.map((row, i) => {
    if (!Array.isArray(row))
      throw bad(file, `row ${i} is ${JSON.stringify(row)?.slice(0, 40)}, not an array of numbers`, { row: i });
    row.forEach((v, j) => {
      if (typeof v !== 'number' || !Number.isFinite(v))
        throw bad(file, `row ${i}, column ${j} is ${JSON.stringify(v)}, not a finite number`, { row: i, column: j });
    });
    return row as number[];
  });
}

export function parseRowsCsv(text: string, file: string): number[][] {
  return csvNumbers(parseCsvCells(text, file), file);
}

const NPY_TYPES: Record<string, { bytes: number; read: (v: DataView, at: number, little: boolean) => number }> = {
  f4: { bytes: 4, read: (v, at, le) => v.getFloat32(at, le) },
  f8: { bytes: 8, read: (v, at, le) => v.getFloat64(at, le) },
  i1: { bytes: 1, read: (v, at) => v.getInt8(at) },
  u1: { bytes: 1, read: (v, at) => v.getUint8(at) },
  i2: { bytes: 2, read: (v, at, le) => v.getInt16(at, le) },
  i4: { bytes: 4, read: (v, at, le) => v.getInt32(at, le) },
  i8: { bytes: 8, read: (v, at, le) => Number(v.getBigInt64(at, le)) },
};

export function parseRowsNpy(bytes: Uint8Array, file: string): number[][] {
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
  if (bytes.length < 10 || magic.some((b, i) => bytes[i] !== b))
    throw bad(file, 'is not a .npy file (no \\x93NUMPY magic); save it with numpy.save');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const major = bytes[6];
  const headerLength = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const start = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(bytes.subarray(start, start + headerLength));
  const descr = /'descr':\s*'([<>|=])([a-z]\d+)'/.exec(header);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shapeText) throw bad(file, `has a .npy header without descr or shape: ${header.trim()}`);
  if (/'fortran_order':\s*True/.test(header))
    throw bad(file, 'is in Fortran order; save a C-order array (numpy.ascontiguousarray)');
  const type = NPY_TYPES[descr[2]];
  if (!type)
    throw bad(file, `holds ${descr[1]}${descr[2]} values; give floats (f4, f8) or integers`, { dtype: descr[2] });
  const shape = shapeText[1]
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map(Number);
  if (shape.length < 1 || shape.length > 2)
    throw bad(
      file,
      `holds an array of shape (${shape.join(', ')}); give rows: a 2-D array [rows, features] (or 1-D for one row)`,
      { shape },
    );
  const [rows, cols] = shape.length === 1 ? [1, shape[0]] : shape;
  const little = descr[1] !== '>';
  const data = start + headerLength;
  if (bytes.length < data + rows * cols * type.bytes)
    throw bad(
      file,
      `is cut short: shape (${shape.join(', ')}) needs ${rows * cols * type.bytes} bytes of data, it has ${bytes.length - data}`,
    );
  const out: number[][] = [];
  for (let r = 0; r < rows; r++) {
    const row: number[] = [];
    for (let c = 0; c < cols; c++) row.push(type.read(view, data + (r * cols + c) * type.bytes, little));
    out.push(row);
  }
  return out;
}

export function parseRows(bytes: Uint8Array, file: string, format: RowFormat): number[][] {
  if (format === 'npy') return parseRowsNpy(bytes, file);
  const text = new TextDecoder().decode(bytes);
  return format === 'json' ? parseRowsJson(text, file) : parseRowsCsv(text, file);
}
