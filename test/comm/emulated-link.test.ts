/**
 * The link wrapper that emulates a long thin pipe (no netem in this kernel):
 * messages arrive whole and in order, held messages count as buffered (the
 * communicator's backpressure sees them), closing drops them, and bad
 * settings are refused. Its effect on time is measured by `ringtrain bench
 * wan`, never here.
 */
import { describe, expect, it } from 'vitest';
import { emulateLink, parseLinkEmulation } from '../../src/comm/emulated-link.ts';
import { memoryLinkPair } from '../../src/comm/memory-link.ts';
import { ErrorCode } from '../../src/core/errors.ts';

describe('emulated link', () => {
  it('delivers every message whole and in order, and counts held ones as buffered', async () => {
    const [a, b] = memoryLinkPair(0, 1);
    const slow = emulateLink(a, { delayMs: 5, rateBitsPerS: 8e6 });
    const got: number[][] = [];
    const done = new Promise<void>((resolve) => b.onMessage((m) => got.push(Array.from(m)) === 50 && resolve()));
    const sent: number[][] = [];
    for (let i = 0; i < 50; i++) {
      const m = Uint8Array.from({ length: 1 + ((i * 37) % 200) }, (_, j) => (i + j) & 0xff);
      sent.push(Array.from(m));
      slow.send(m);
      m.fill(0); // the caller may reuse its buffer at once
    }
    // Nothing can have left yet (timers run after this synchronous code): all of it is held.
    expect(slow.bufferedAmount()).toBe(sent.reduce((s, m) => s + m.length, 0));
    await done;
    expect(got).toEqual(sent);
    expect(slow.bufferedAmount()).toBe(0);
    slow.close();
  });

  it('drops what it holds on close and refuses later sends', () => {
    const [a, b] = memoryLinkPair(0, 1);
    const slow = emulateLink(a, { delayMs: 1000 });
    let arrived = 0;
    b.onMessage(() => arrived++);
    slow.send(new Uint8Array(10));
    slow.close();
    expect(slow.bufferedAmount()).toBe(0);
    expect(() => slow.send(new Uint8Array(1))).toThrow(expect.objectContaining({ code: ErrorCode.Transport }));
    expect(arrived).toBe(0);
  });

  it('reads "delay=50ms,rate=10mbit" and refuses what it cannot read', () => {
    expect(parseLinkEmulation('delay=50ms,rate=10mbit')).toEqual({ delayMs: 50, rateBitsPerS: 10e6 });
    expect(parseLinkEmulation('rate=512k')).toEqual({ delayMs: 0, rateBitsPerS: 512e3 });
    expect(() => parseLinkEmulation('loss=1%')).toThrow(/write e.g. delay=50ms,rate=10mbit/);
    expect(() => parseLinkEmulation('rate=0mbit')).toThrow(/rate must be > 0/);
  });
});
