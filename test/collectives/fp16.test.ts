import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { float16ToFloat32, float32ToFloat16, FP16_MAX } from '../../src/collectives/codecs/fp16.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const half = (x: number) => float32ToFloat16(Float32Array.of(x))[0];
const wide = (h: number) => float16ToFloat32(Uint16Array.of(h))[0];

describe('float16 conversion', () => {
  it('encodes known values bit-exactly', () => {
    expect(half(0)).toBe(0x0000);
    expect(half(-0)).toBe(0x8000);
    expect(half(1)).toBe(0x3c00);
    expect(half(-2)).toBe(0xc000);
    expect(half(0.5)).toBe(0x3800);
    expect(half(65504)).toBe(0x7bff);
    expect(half(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(half(2 ** -14)).toBe(0x0400); // smallest normal
    expect(half(1 + 2 ** -11)).toBe(0x3c00); // a tie rounds to even (down)
    expect(half(1 + 3 * 2 ** -11)).toBe(0x3c02); // a tie rounds to even (up)
  });

  it('saturates finite overflow, keeps infinities and NaN', () => {
    expect(half(1e6)).toBe(0x7bff);
    expect(half(-1e6)).toBe(0xfbff);
    expect(half(65520)).toBe(0x7bff); // would round up to Infinity
    expect(wide(half(Infinity))).toBe(Infinity);
    expect(Number.isNaN(wide(half(NaN)))).toBe(true);
  });

  it('round-trips every half value exactly', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const back = float32ToFloat16(float16ToFloat32(all));
    const wrong: string[] = [];
    for (let h = 0; h < 65536; h++) {
      const isNaN = (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
      if (!isNaN && back[h] !== h) wrong.push(`0x${h.toString(16)} -> 0x${back[h].toString(16)}`);
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('stays within half an ulp on random floats', () => {
    let seed = 42;
    for (let i = 0; i < 10000; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      const x = ((seed / 2 ** 32) * 2 - 1) * 1000;
      const y = wide(half(x));
      const ulp = 2 ** (Math.floor(Math.log2(Math.abs(x))) - 10);
      expect(Math.abs(y - x)).toBeLessThanOrEqual(ulp / 2);
    }
    expect(FP16_MAX).toBe(65504);
  });

  it("uses Deno's native Float16Array, bit for bit the same as the portable code", () => {
    const out = execFileSync(
      `${ROOT}node_modules/.bin/deno`,
      ['run', '-A', '--quiet', 'test/collectives/fp16-native.ts'],
      { cwd: ROOT, encoding: 'utf8' },
    );
    const r = JSON.parse(out.trim().split('\n').pop()!);
    expect(r.native, 'this Deno has no Float16Array').toBe(true);
    expect(r.differ, JSON.stringify(r)).toBe(-1);
    expect(r.checked).toBeGreaterThan(300_000);
  });
});
