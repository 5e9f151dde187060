/**
 * The response cache, after Horovod's: once every rank has agreed on a
 * collective (same kind, name, dtype, shape, op, scale factors...), each rank
 * remembers the agreed requests. The next time the same collective comes
 * round, a rank that finds it here sends nothing extra at all: its data goes
 * out at once, with a 12-byte fingerprint of the cached agreement in front of
 * the first message to each peer, and each rank checks the first message from
 * each peer against its own (run.ts). All equal along the way: done, no round
 * trip spent on agreeing. A rank that misses, or a fingerprint that differs,
 * sends everyone to full negotiation, which names the disagreement and
 * refreshes the cache.
 *
 * Every rank updates its cache from the same verdicts, but concurrent
 * collectives may see verdicts in different orders, so the fingerprint is a
 * hash of the agreement itself, never a slot number. One cache per
 * communicator: a new membership epoch brings a new communicator, hence an
 * empty cache.
 */
import type { Communicator } from '../../comm/interface.ts';
import { fnv1a32 } from '../../core/hash.ts';
import type { Request } from './negotiate.ts';

/** Horovod's default capacity (HOROVOD_CACHE_CAPACITY). */
export const DEFAULT_CACHE_CAPACITY = 1024;

interface Entry {
  requests: Request[];
  /** JSON of each rank's request, for the hit test. */
  perRank: string[];
  fingerprint: Uint8Array;
}

export class ResponseCache {
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  private entries = new Map<string, Entry>();
  constructor(readonly capacity = DEFAULT_CACHE_CAPACITY) {}

  get size(): number {
    return this.entries.size;
  }

  /** The agreement for `mine` (this rank's request), if every field matches what was agreed before. */
  lookup(rank: number, mine: Request): Entry | null {
    const e = this.entries.get(keyOf(mine));
    return e && e.perRank[rank] === JSON.stringify(mine) ? e : null;
  }

  /** Marks an entry used (all ranks did so at the same collective). */
  touch(mine: Request, e: Entry): void {
    const k = keyOf(mine);
    this.entries.delete(k);
    this.entries.set(k, e);
  }

  /** Forgets the agreement for `mine`'s kind and name (tests: a rank whose cache lost an entry). */
  delete(mine: Request): void {
    this.entries.delete(keyOf(mine));
  }

  /** Remembers an agreement (a new one for the same kind and name replaces the old). */
  store(requests: Request[]): void {
    const perRank = requests.map((r) => JSON.stringify(r));
    const k = keyOf(requests[0]);
    this.entries.delete(k);
    this.entries.set(k, { requests, perRank, fingerprint: fingerprintOf(perRank.join('\n')) });
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }
}

function keyOf(r: Request): string {
  return `${r.kind}\u0000${r.name}`;
}

/**
 * Two independent 32-bit FNV-1a hashes of the agreement (64 bits against chance collisions), behind
 * a check word over them: a fingerprint damaged on its way fails `fingerprintIntact`, so a receiver
 * tells a link that changed bytes from a rank that went ahead on another agreement.
 */
function fingerprintOf(text: string): Uint8Array {
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  const out = new Uint8Array(12);
  const v = new DataView(out.buffer);
  v.setUint32(4, a >>> 0, true);
  v.setUint32(8, b >>> 0, true);
  v.setUint32(0, fnv1a32(out.subarray(4)), true);
  return out;
}

/** Whether a received fingerprint's check word matches its hashes: false if any of its bytes changed on the way. */
export function fingerprintIntact(fingerprint: Uint8Array): boolean {
  if (fingerprint.byteLength !== 12) return false;
  const v = new DataView(fingerprint.buffer, fingerprint.byteOffset, 12);
  return v.getUint32(0, true) === fnv1a32(fingerprint.subarray(4));
}

export function sameBytes(x: Uint8Array, y: Uint8Array): boolean {
  if (x.byteLength !== y.byteLength) return false;
  for (let i = 0; i < x.byteLength; i++) if (x[i] !== y[i]) return false;
  return true;
}

const caches = new WeakMap<Communicator, ResponseCache>();

/** The cache of one communicator (created on first use). */
export function cacheOf(comm: Communicator): ResponseCache {
  let c = caches.get(comm);
  if (!c) caches.set(comm, (c = new ResponseCache()));
  return c;
}
