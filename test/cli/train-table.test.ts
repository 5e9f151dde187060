/**
 * `ringtrain train --data FILE.csv --label-column NAME` (or `--labels FILE`):
 * a classifier on rows of features, every fifth row held out for the test
 * accuracy; a table whose width does not fit the model is refused naming the
 * file, the model and both shapes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tableSplit } from '../../src/data/table.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-table-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Three separable classes in `width` features: class c puts its mass on feature c. */
function csv(rows: number, width: number): string {
  const lines = [[...Array.from({ length: width }, (_, j) => `f${j}`), 'label'].join(',')];
  for (let i = 0; i < rows; i++) {
    const c = i % 3;
    lines.push(
      [...Array.from({ length: width }, (_, j) => (j === c ? 1 : 0) + ((i * 7 + j * 3) % 10) / 50), c].join(','),
    );
  }
  return lines.join('\n') + '\n';
}

const MODEL = `import type { ModelFactory } from 'ringtrain';
const model: ModelFactory = (nn) => ({ module: new nn.Sequential(new nn.Linear(4, 8), new nn.ReLU(), new nn.Linear(8, 3)), inputShape: [4], classes: 3 });
export default model;
`;

describe('train --data FILE.csv', () => {
  it('splits every fifth row off for testing', () => {
    const s = tableSplit([[0], [1], [2], [3], [4], [5], [6], [7], [8], [9]], [0, 1, 0, 1, 0, 1, 0, 1, 0, 1], 'x.csv');
    expect(s.train.count).toBe(8);
    expect(Array.from(s.test.inputs)).toEqual([4, 9]);
    expect(() => tableSplit([[0], [1]], [0], 'x.csv', 'y.txt')).toThrow('x.csv has 2 rows but y.txt 1 labels');
  });

  it('trains the mlp from a label column, and refuses a table of the wrong width for a model file', async () => {
    const data = join(dir, 'three.csv');
    writeFileSync(data, csv(150, 4));
    const mlp = await ringtrain([
      'train',
      '--data',
      data,
      '--label-column',
      'label',
      '--steps',
      '60',
      '--batch',
      '16',
      '--optimizer',
      'adamw',
      '--lr',
      '0.02',
      '--runtime',
      'deno',
      '--json',
    ]);
    expect(mlp.code, mlp.stderr).toBe(0);
    const r = JSON.parse(mlp.stdout.trim().split('\n').pop()!);
    expect(r.steps).toBe(60);
    expect(r.test_accuracy).toBeGreaterThan(0.9); // 30 held-out rows of three separable classes

    const modelFile = join(dir, 'four.ts');
    writeFileSync(modelFile, MODEL);
    const labels = join(dir, 'labels.txt');
    writeFileSync(labels, Array.from({ length: 150 }, (_, i) => i % 3).join('\n'));
    const wide = join(dir, 'wide.csv');
    writeFileSync(
      wide,
      csv(150, 5)
        .split('\n')
        .map((l) => l.split(',').slice(0, 5).join(','))
        .join('\n'),
    );
    const refused = await ringtrain([
      'train',
      '--model',
      modelFile,
      '--data',
      wide,
      '--labels',
      labels,
      '--steps',
      '2',
      '--runtime',
      'deno',
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      new RegExp(
        `${wide.replace(/[.]/g, '\\.')} has examples of shape \\[120, 5\\] with labels of 3 classes, but model four@[0-9a-f]+ reads \\[batch, 4\\] and has 3 classes`,
      ),
    );
  }, 120_000);
});
