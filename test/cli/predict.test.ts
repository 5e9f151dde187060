/**
 * `ringtrain predict`: an MLP trained 20 steps with --save predicts 5 rows from
 * a JSON file; its logits are those of the library's forward (createModel,
 * loadSafetensors, predict from 'ringtrain') on the same weights. CSV and NPY
 * give the same rows as JSON; rows of the wrong width are refused naming the
 * file, the model and both shapes.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { acquireGpu, createModel, loadSafetensors, predict, type ModelSpec } from 'ringtrain';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { parseRows } from '../../src/data/rows.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-predict-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let s = 3;
const rand = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
const rows = Array.from({ length: 5 }, () => Array.from({ length: 784 }, () => Math.round(rand() * 1000) / 1000));

function npy(values: number[][]): Uint8Array {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${values.length}, ${values[0].length}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const out = new Uint8Array(10 + header.length + values.length * values[0].length * 4);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]);
  new DataView(out.buffer).setUint16(8, header.length, true);
  out.set(new TextEncoder().encode(header), 10);
  new Float32Array(out.buffer, 10 + header.length).set(values.flat());
  return out;
}

describe('ringtrain predict', () => {
  it('JSON, CSV and NPY files give the same rows', () => {
    const fromJson = parseRows(new TextEncoder().encode(JSON.stringify(rows)), 'rows.json', 'json');
    // A header names every column (one of another width is refused, naming its line: csv.ts).
    const csv = [rows[0].map((_, j) => `p${j}`).join(','), ...rows.map((r) => r.join(','))].join('\n');
    expect(parseRows(new TextEncoder().encode(csv), 'rows.csv', 'csv')).toEqual(fromJson);
    const fromNpy = parseRows(npy(rows), 'rows.npy', 'npy');
    expect(fromNpy.map((r) => r.map((v) => Math.fround(v)))).toEqual(fromJson.map((r) => r.map((v) => Math.fround(v))));
    expect(() => parseRows(new TextEncoder().encode('[[1, "x"]]'), 'bad.json', 'json')).toThrow(
      /bad\.json: row 0, column 1 is "x"/,
    );
  });

  it('predicts rows of a JSON file as the library does, and refuses rows of another width', async () => {
    const ckpt = join(dir, 'mlp.safetensors');
    const train = await ringtrain([
      'train',
      '--model',
      'mlp',
      '--steps',
      '20',
      '--eval-limit',
      '100',
      '--save',
      ckpt,
      '--json',
    ]);
    expect(train.code, train.stderr).toBe(0);

    const input = join(dir, 'rows.json');
    writeFileSync(input, JSON.stringify(rows));
    const r = await ringtrain(['predict', '--checkpoint', ckpt, '--input', input, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      model: string;
      rows: number;
      classes: number[];
      logits: number[][];
    };
    expect(out).toMatchObject({ model: 'mlp', rows: 5 });
    expect(out.logits).toHaveLength(5);
    expect(out.logits[0]).toHaveLength(10);

    // The library's forward on the same weights.
    const bytes = readFileSync(ckpt);
    const spec = JSON.parse(decodeSafetensors(bytes).metadata.model_spec) as ModelSpec;
    const gpu = await acquireGpu();
    try {
      const model = createModel(gpu, spec);
      loadSafetensors(model, bytes, ckpt);
      const want = await predict(model, rows);
      model.destroy();
      expect(out.classes).toEqual(want.classes);
      want.logits.forEach((l, i) => l.forEach((v, j) => expect(Math.abs(out.logits[i][j] - v)).toBeLessThan(1e-5)));
      // A trained model, not a fresh one: the logits are not all alike.
      expect(new Set(out.logits.flat().map((v) => v.toFixed(3))).size).toBeGreaterThan(10);
    } finally {
      gpu.destroy();
    }

    const narrow = join(dir, 'narrow.json');
    writeFileSync(narrow, JSON.stringify(rows.map((row) => row.slice(1))));
    const bad = await ringtrain(['predict', '--checkpoint', ckpt, '--input', narrow]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain(`${narrow}: row 0 has shape [783], but model mlp reads inputShape [784]`);
  }, 300_000);
});
