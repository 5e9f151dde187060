import type { Link } from './link.ts';

// A macrotask, as a network would give: setImmediate where it exists (Node), else a timer.
const later: (f: () => void) => void =
  (globalThis as { setImmediate?: (f: () => void) => void }).setImmediate ?? ((f) => setTimeout(f, 0));

/** Items handed to `drain` in order, in batches, each batch on a later macrotask. */
class LaterBatches<T> {
  private items: T[] = [];
  private scheduled = false;

  constructor(private readonly drain: (batch: T[]) => void) {}

  push(item: T): void {
    this.items.push(item);
    if (this.scheduled) return;
    this.scheduled = true;
    later(() => {
      this.scheduled = false;
      const batch = this.items;
      this.items = [];
      this.drain(batch);
    });
  }
}

/** A message sent in place: its body is read (copied) only when the link gets to it. */
interface Lent {
  head: Uint8Array;
  body: Uint8Array;
  taken: (error?: Error) => void;
}

/**
 * In-memory links for unit tests and the page's teaching mode. Messages are
 * copied (so nobody shares buffers by accident) and delivered in order on a
 * later macrotask, like a real network would. A message sent in place is read
 * on that later macrotask too, as a socket reads what it was lent once the
 * kernel has room: a collective that writes lent memory too soon sends what it wrote.
 */
class MemoryLink implements Link {
  private handler: ((m: Uint8Array) => void) | null = null;
  private closeHandlers: ((reason?: Error) => void)[] = [];
  private readonly outbox = new LaterBatches<Uint8Array | Lent>((batch) => this.hand(batch));
  private closed = false;
  other!: MemoryLink;

  constructor(readonly peer: number) {}

  send(message: Uint8Array): void {
    if (this.closed) throw new Error(`memory link to rank ${this.peer} is closed`);
    this.outbox.push(message.slice());
  }

  sendInPlace(head: Uint8Array, body: Uint8Array): Promise<void> {
    if (this.closed) throw new Error(`memory link to rank ${this.peer} is closed`);
    return new Promise((resolve, reject) => {
      this.outbox.push({ head, body, taken: (error) => (error ? reject(error) : resolve()) });
    });
  }

  /** Hands a batch of the outbox to the other end in order, reading lent bodies now. */
  private hand(batch: (Uint8Array | Lent)[]): void {
    for (const m of batch) {
      if (m instanceof Uint8Array) {
        this.other.deliver(m);
        continue;
      }
      if (this.closed) {
        m.taken(new Error(`memory link to rank ${this.peer} closed before the message went`));
        continue;
      }
      const whole = new Uint8Array(m.head.byteLength + m.body.byteLength);
      whole.set(m.head);
      whole.set(m.body, m.head.byteLength);
      this.other.deliver(whole);
      m.taken();
    }
  }

  bufferedAmount(): number {
    return 0;
  }

  onMessage(handler: (m: Uint8Array) => void): void {
    this.handler = handler;
  }

  onClose(handler: (reason?: Error) => void): void {
    this.closeHandlers.push(handler);
  }

  close(): void {
    this.shut(undefined);
    this.other.shut(new Error('the other end closed the link'));
  }

  private shut(reason?: Error): void {
    if (this.closed) return;
    this.closed = true;
    setTimeout(() => {
      for (const h of this.closeHandlers) h(reason);
    }, 0);
  }

  /** A message from the other end, on the macrotask that sent it (one hop, as a network's arrival). */
  private deliver(m: Uint8Array): void {
    if (!this.closed) this.handler?.(m);
  }
}

/** Two connected ends: `[a, b]` where `a` lives on `rankA` and talks to `rankB`. */
export function memoryLinkPair(rankA: number, rankB: number): [Link, Link] {
  const a = new MemoryLink(rankB);
  const b = new MemoryLink(rankA);
  a.other = b;
  b.other = a;
  return [a, b];
}

/** A full mesh of memory links: `mesh[r]` maps every other rank to rank r's end of the link. */
export function memoryMesh(size: number): Map<number, Link>[] {
  const mesh = Array.from({ length: size }, () => new Map<number, Link>());
  for (let a = 0; a < size; a++) {
    for (let b = a + 1; b < size; b++) {
      const [la, lb] = memoryLinkPair(a, b);
      mesh[a].set(b, la);
      mesh[b].set(a, lb);
    }
  }
  return mesh;
}
