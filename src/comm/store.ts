import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Signaler } from './signaler.ts';

/**
 * A rendezvous store, as in gloo: ranks that know nothing of each other yet
 * meet by setting and waiting for keys. The memory store serves ranks in one
 * process; FileStore (file-store.node.ts) serves processes on one machine.
 */
export interface Store {
  set(key: string, value: string): Promise<void>;
  /** The value, or undefined if the key is not there (yet). */
  get(key: string): Promise<string | undefined>;
  /** Resolves with the values once every key is there; Timeout naming the missing keys otherwise. */
  wait(keys: string[], timeoutMs: number): Promise<string[]>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `store` until all `keys` exist. Shared by stores that cannot push. */
export async function pollWait(store: Store, keys: string[], timeoutMs: number, pollMs = 10): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  const values: (string | undefined)[] = keys.map(() => undefined);
  for (;;) {
    for (let i = 0; i < keys.length; i++) values[i] ??= await store.get(keys[i]);
    const missing = keys.filter((_, i) => values[i] === undefined);
    if (missing.length === 0) return values as string[];
    if (Date.now() >= deadline) {
      throw new RingtrainError(
        ErrorCode.Timeout,
        `store keys never appeared within ${timeoutMs} ms: ${missing.join(', ')}; did every rank start?`,
        { missing },
      );
    }
    await sleep(pollMs);
  }
}

export class MemoryStore implements Store {
  private data = new Map<string, string>();
  async set(key: string, value: string): Promise<void> {
    this.data.set(key, value);
  }
  async get(key: string): Promise<string | undefined> {
    return this.data.get(key);
  }
  wait(keys: string[], timeoutMs: number): Promise<string[]> {
    return pollWait(this, keys, timeoutMs, 1);
  }
}

/**
 * A Signaler over a Store: signal number n from rank a to rank b is key
 * `sig/a/b/n`. Each receiver polls for the next number from every sender, so
 * signals arrive in order. Call close() when the links are up.
 */
export class StoreSignaler implements Signaler {
  private handlers = new Set<(from: number, data: unknown) => void>();
  private sent = new Map<number, number>();
  private running = false;
  private stopped = false;
  private writes: Promise<void> = Promise.resolve();

  constructor(
    private store: Store,
    private rank: number,
    private size: number,
    private pollMs = 10,
    private prefix = 'sig',
  ) {}

  send(toRank: number, data: unknown): void {
    const n = this.sent.get(toRank) ?? 0;
    this.sent.set(toRank, n + 1);
    const key = `${this.prefix}/${this.rank}/${toRank}/${n}`;
    this.writes = this.writes.then(() => this.store.set(key, JSON.stringify(data)));
  }

  onSignal(handler: (fromRank: number, data: unknown) => void): () => void {
    this.handlers.add(handler);
    if (!this.running) void this.poll();
    return () => this.handlers.delete(handler);
  }

  close(): void {
    this.stopped = true;
  }

  private async poll(): Promise<void> {
    this.running = true;
    const next = new Map<number, number>();
    while (!this.stopped && this.handlers.size > 0) {
      let got = false;
      for (let from = 0; from < this.size; from++) {
        if (from === this.rank) continue;
        const n = next.get(from) ?? 0;
        const raw = await this.store.get(`${this.prefix}/${from}/${this.rank}/${n}`);
        if (raw === undefined) continue;
        next.set(from, n + 1);
        got = true;
        const data = JSON.parse(raw);
        for (const h of this.handlers) h(from, data);
      }
      if (!got) await sleep(this.pollMs);
    }
    this.running = false;
  }
}
