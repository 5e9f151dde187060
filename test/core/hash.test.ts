import { describe, expect, it } from 'vitest';
import { fnv1a32, fnv1aHex } from '../../src/core/hash.ts';

describe('fnv1a32', () => {
  it('matches the published FNV-1a test vectors', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('hashes bytes as bytes, and pads the hex form to 8 digits', () => {
    expect(fnv1a32(new TextEncoder().encode('foobar'))).toBe(0xbf9cf968);
    expect(fnv1aHex('a')).toBe('e40c292c');
    expect(fnv1aHex('')).toHaveLength(8);
  });
});
