import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mnistFromDigits, MNIST_PIXELS, parseDigitFile } from '../../src/data/mnist.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';

function checksum(x: Float32Array, labels: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < x.length; i += 97) s += x[i] * ((i % 13) + 1);
  for (let i = 0; i < labels.length; i++) s += labels[i] * (i % 7);
  return Math.round(s * 1000) / 1000;
}

describe('MNIST from the mnist package', () => {
  it('is a fixed 8000/2000 split of real digits, every class in both parts', async () => {
    const { train, test } = await loadMnist();
    expect([train.count, test.count]).toEqual([8000, 2000]);
    expect(train.images.length).toBe(8000 * 784);
    for (const d of [train, test]) {
      const perClass = new Array(10).fill(0);
      for (const l of d.labels) perClass[l]++;
      for (const n of perClass) expect(n).toBeGreaterThan(d.count / 20);
      let ink = 0;
      for (let i = 0; i < d.images.length; i++) ink += d.images[i];
      // Real digits: 10–20% of a 28×28 image is ink.
      expect(ink / d.images.length).toBeGreaterThan(0.05);
      expect(ink / d.images.length).toBeLessThan(0.3);
    }
    // Nothing in the test part is also in the train part.
    const key = (x: Float32Array, i: number) => x.subarray(i * MNIST_PIXELS, (i + 1) * MNIST_PIXELS).join(',');
    const trainKeys = new Set(Array.from({ length: train.count }, (_, i) => key(train.images, i)));
    let shared = 0;
    for (let i = 0; i < test.count; i++) if (trainKeys.has(key(test.images, i))) shared++;
    expect(shared).toBeLessThan(5);
  });

  it('is the same split under Deno', async () => {
    const { train, test } = await loadMnist();
    const deno = 'node_modules/.bin/deno';
    expect(existsSync(deno), 'deno is missing: run npm ci (the deno npm package ships it)').toBe(true);
    const script = `import { loadMnist } from './src/data/mnist.node.ts';
const { train, test } = await loadMnist();
function checksum(x, labels) { let s = 0; for (let i = 0; i < x.length; i += 97) s += x[i] * ((i % 13) + 1);
  for (let i = 0; i < labels.length; i++) s += labels[i] * (i % 7); return Math.round(s * 1000) / 1000; }
console.log(JSON.stringify([checksum(train.images, train.labels), checksum(test.images, test.labels)]));`;
    const r = spawnSync(deno, ['eval', '--ext=ts', script], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual([
      checksum(train.images, train.labels),
      checksum(test.images, test.labels),
    ]);
  });

  it('rejects a broken package with a clear error', () => {
    expect(() => parseDigitFile('{"data": [0, 0.5', 3)).toThrow(/digit file 3 is not valid JSON/);
    expect(() => parseDigitFile('{"values": []}', 4)).toThrow(/digit file 4 has no 'data' array/);
    const digits = Array.from({ length: 10 }, () => new Array(MNIST_PIXELS * 1000).fill(0));
    digits[2] = digits[2].slice(0, 100);
    expect(() => mnistFromDigits(digits)).toThrow(/digit file 2 holds 100 values/);
    digits[2] = new Array(MNIST_PIXELS * 1000).fill(0);
    digits[5][7] = 3;
    expect(() => mnistFromDigits(digits)).toThrow(/pixel value 3 at 7/);
  });
});
