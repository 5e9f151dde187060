/**
 * Tables as people have them (no GPU): class names in a label column or a
 * labels file become ids in sorted order, recorded with the column; a file
 * without a header whose last column holds names is data; and every refusal
 * names the file's line (from 1, counting the header and blank lines).
 */
import { describe, expect, it } from 'vitest';
import { datasetMetadata } from '../../src/data/dataset.ts';
import { tableFromBytes } from '../../src/data/table.ts';

const bytes = (text: string) => new TextEncoder().encode(text);
const IRIS = [
  'sepal,petal,species',
  ...Array.from({ length: 10 }, (_, i) => `${i / 10},${1 - i / 10},${['virginica', 'setosa'][i % 2]}`),
].join('\n');

describe('a table with class names', () => {
  it('maps a label column of names to sorted ids and records them with the column', () => {
    const t = tableFromBytes(bytes(IRIS), 'iris.csv', 'csv', { labelColumn: 'species' });
    expect(t.classNames).toEqual(['setosa', 'virginica']);
    expect(t.features).toBe(2);
    // Rows 0..3 and 5..8 train; row 0 is virginica (id 1), row 1 setosa (id 0).
    expect(Array.from(t.train.labels.slice(0, 4))).toEqual([1, 0, 1, 0]);
    expect(datasetMetadata(t.train)).toEqual({ class_names: '["setosa","virginica"]', label_column: 'species' });
  });

  it('reads a file without a header whose last column holds names as data, its column by number', () => {
    const bare = IRIS.split('\n').slice(1).join('\n');
    const t = tableFromBytes(bytes(bare), 'bare.csv', 'csv', { labelColumn: '2' });
    expect(t.train.count + t.test.count).toBe(10);
    expect(datasetMetadata(t.test)).toEqual({ class_names: '["setosa","virginica"]', label_column: '2' });
  });

  it('takes names from a labels file, with or without a header line', () => {
    const rows = bytes(Array.from({ length: 5 }, (_, i) => `${i},${i * 2}`).join('\n'));
    const names = ['cat', 'dog', 'cat', 'bird', 'dog'];
    for (const text of [names.join('\n'), ['animal', ...names].join('\n')]) {
      const t = tableFromBytes(rows, 'x.csv', 'csv', { labels: { bytes: bytes(text), file: 'labels.txt' } });
      expect(t.classNames).toEqual(['bird', 'cat', 'dog']);
      expect(Array.from(t.train.labels)).toEqual([1, 2, 1, 0]);
    }
  });

  it('names the line of a short row, a missing column, and a cell that is not a number', () => {
    expect(() =>
      tableFromBytes(bytes('a,b,label\n1,2,x\n\n3,y\n'), 'short.csv', 'csv', { labelColumn: 'label' }),
    ).toThrow('short.csv: row at line 4 has 2 columns, the header has 3');
    expect(() => tableFromBytes(bytes('1,2,x\n3,4\n'), 'bare.csv', 'csv', { labelColumn: '2' })).toThrow(
      'bare.csv: row at line 2 has 2 columns, the first row (line 1) has 3',
    );
    expect(() => tableFromBytes(bytes(IRIS), 'iris.csv', 'csv', { labelColumn: '7' })).toThrow(
      '--label-column 7: column 7 does not exist; iris.csv has 3',
    );
    expect(() => tableFromBytes(bytes(IRIS), 'iris.csv', 'csv', { labelColumn: 'kind' })).toThrow(
      'iris.csv has no column "kind"; it has the columns sepal, petal, species',
    );
    expect(() =>
      tableFromBytes(bytes('a,b,label\n1,2,x\n3,oops,y\n'), 'word.csv', 'csv', { labelColumn: 'label' }),
    ).toThrow('word.csv: line 3, column 1 (b) is "oops", not a finite number');
    expect(() => tableFromBytes(bytes('[[1, 2, 0], [3, 4, 1]]'), 'rows.json', 'json', { labelColumn: '3' })).toThrow(
      'column 3 does not exist; rows.json has 3',
    );
    expect(() => tableFromBytes(bytes('[[1, 2, 0], [3, 4]]'), 'rows.json', 'json', { labelColumn: '2' })).toThrow(
      'rows.json: row 1 has 2 values, row 0 has 3',
    );
  });
});
