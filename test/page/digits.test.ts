import { describe, expect, it } from 'vitest';
import { argmax, SIDE, softmax, toMnist } from '../../demo/src/digits.ts';

/** A width×height canvas with a filled rectangle of ink. */
function rect(width: number, height: number, x0: number, y0: number, w: number, h: number): Float32Array {
  const ink = new Float32Array(width * height);
  for (let y = y0; y < y0 + h; y++) for (let x = x0; x < x0 + w; x++) ink[y * width + x] = 1;
  return ink;
}

describe('a drawn digit becomes an MNIST-style 28x28 image', () => {
  it('a blank pad is no digit', () => {
    expect(toMnist(new Float32Array(100 * 100), 100, 100)).toBeNull();
  });

  it('a tall stroke anywhere on the pad is scaled to 20 pixels high and centred', () => {
    // A bar in the top-left corner, 10 wide and 100 high on a 196x196 pad.
    const out = toMnist(rect(196, 196, 5, 3, 10, 100), 196, 196)!;
    expect(out).toHaveLength(SIDE * SIDE);
    let rows = 0;
    let mass = 0;
    let cx = 0;
    let cy = 0;
    for (let y = 0; y < SIDE; y++) {
      let any = false;
      for (let x = 0; x < SIDE; x++) {
        const v = out[y * SIDE + x];
        if (v > 0) any = true;
        mass += v;
        cx += v * x;
        cy += v * y;
      }
      if (any) rows++;
    }
    expect(rows).toBe(20);
    expect(Math.abs(cx / mass - 14)).toBeLessThanOrEqual(1);
    expect(Math.abs(cy / mass - 14)).toBeLessThanOrEqual(1);
    for (const v of out) expect(v >= 0 && v <= 1).toBe(true);
  });

  it('softmax and argmax', () => {
    const p = softmax([1, 3, 2]);
    expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
    expect(argmax(p)).toBe(1);
    expect(softmax([1000, 1000]).every((v) => Math.abs(v - 0.5) < 1e-9)).toBe(true);
  });
});
