/**
 * Where whole messages meet the receives that want them. A ring's neighbours
 * do not move in lockstep, so a message may arrive before anyone asks for it
 * (it is held, and counted against its sender's budget) or a receive may ask
 * before its message arrives (it waits, with an optional timeout). Each
 * message is named by its sender and tag and is received once. Kept apart
 * from the communicator so that the bookkeeping of who owes whom what can be
 * read on its own; the communicator decides what to do when a peer is over
 * its budget or gone.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { UnconsumedBudget } from './budget.ts';
import { tagKey } from './frame.ts';
import type { Tag } from './interface.ts';

interface Waiter {
  peer: number;
  tag: Tag;
  resolve(p: Uint8Array): void;
  reject(e: RingtrainError): void;
  timer?: ReturnType<typeof setTimeout>;
}

/** How many forgotten collectives are remembered (their late messages are dropped on arrival). */
const FORGOTTEN_IDS = 4096;

/** How far beyond this rank's next collective id a held message counts as far ahead (see heldFarAhead). */
const FAR_AHEAD_IDS = 1 << 16;

export class Inbox {
  private arrived = new Map<string, Uint8Array>();
  private waiters = new Map<string, Waiter>();
  /** Collective id -> which of its steps are forgotten (insertion order: oldest first). */
  private forgotten = new Map<number, (step: number) => boolean>();

  constructor(
    private readonly rank: number,
    /** What each peer has left here unconsumed; read by the communicator when it weighs a flood report. */
    readonly budget: UnconsumedBudget,
  ) {}

  /** The message `peer` sent with `tag`, if it is held here already (it is then no longer held). */
  take(peer: number, tag: Tag): Uint8Array | undefined {
    const key = `${peer}|${tagKey(tag)}`;
    const have = this.arrived.get(key);
    if (have) {
      this.arrived.delete(key);
      this.budget.release(peer, have.byteLength);
    }
    return have;
  }

  /** Waits for the message `peer` will send with `tag`; rejects with Timeout after `timeoutMs` (0: never). */
  wait(peer: number, tag: Tag, timeoutMs: number): Promise<Uint8Array> {
    const key = `${peer}|${tagKey(tag)}`;
    if (this.waiters.has(key)) {
      return Promise.reject(
        new RingtrainError(
          ErrorCode.InvalidArgument,
          `two receives wait for the same message ${key}; each tag is received once`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = { peer, tag, resolve, reject };
      if (timeoutMs > 0) {
        w.timer = setTimeout(() => {
          this.waiters.delete(key);
          reject(
            new RingtrainError(
              ErrorCode.Timeout,
              `rank ${this.rank} waited ${timeoutMs} ms for rank ${peer} (message ${tagKey(tag)}) and got nothing; rank ${peer} is stalled or far behind`,
              { waitingFor: [peer], rank: this.rank, timeoutMs },
            ),
          );
        }, timeoutMs);
      }
      this.waiters.set(key, w);
    });
  }

  /**
   * A whole message from `peer`: handed to the receive waiting for it, or else held.
   * Says whether it was held and, if holding it broke `peer`'s budget, why.
   */
  deliver(peer: number, tag: Tag, payload: Uint8Array): { held: boolean; over: string | null } {
    if (this.forgotten.get(tag.id)?.(tag.step)) return { held: false, over: null };
    const key = `${peer}|${tagKey(tag)}`;
    const w = this.waiters.get(key);
    if (w) {
      this.waiters.delete(key);
      clearTimeout(w.timer);
      w.resolve(payload);
      return { held: false, over: null };
    }
    const earlier = this.arrived.get(key);
    if (earlier) this.budget.release(peer, earlier.byteLength);
    this.arrived.set(key, payload);
    return { held: true, over: this.budget.hold(peer, payload.byteLength) };
  }

  /** Fails the waiting receives `which` picks with `err`. */
  rejectWaiters(which: (w: { peer: number }) => boolean, err: RingtrainError): void {
    for (const [key, w] of this.waiters) {
      if (!which(w)) continue;
      clearTimeout(w.timer);
      w.reject(err);
      this.waiters.delete(key);
    }
  }

  /**
   * Forgets the steps `step` accepts of collective `id`: held messages go (their budget is
   * released), waiting receives reject with Aborted, and later arrivals are dropped unheld.
   */
  forget(id: number, step: (step: number) => boolean): void {
    const prefix = `${id}:`;
    for (const [key, payload] of this.arrived) {
      const bar = key.indexOf('|');
      const rest = key.slice(bar + 1);
      if (!rest.startsWith(prefix) || !step(Number(rest.split(':')[1]))) continue;
      this.arrived.delete(key);
      this.budget.release(Number(key.slice(0, bar)), payload.byteLength);
    }
    for (const [key, w] of this.waiters) {
      if (w.tag.id !== id || !step(w.tag.step)) continue;
      clearTimeout(w.timer);
      this.waiters.delete(key);
      w.reject(
        new RingtrainError(
          ErrorCode.Aborted,
          `the receive of ${tagKey(w.tag)} from rank ${w.peer} was forgotten: its collective moved on`,
          { rank: this.rank },
        ),
      );
    }
    const before = this.forgotten.get(id);
    this.forgotten.delete(id);
    this.forgotten.set(id, before ? (s) => before(s) || step(s) : step);
    if (this.forgotten.size > FORGOTTEN_IDS) this.forgotten.delete(this.forgotten.keys().next().value!);
  }

  /** Drops everything `peer` left here, and its budget with it. */
  drop(peer: number): void {
    for (const key of [...this.arrived.keys()]) if (key.startsWith(`${peer}|`)) this.arrived.delete(key);
    this.budget.forget(peer);
  }

  /**
   * Whether `peer` left here a message for a collective id more than FAR_AHEAD_IDS beyond
   * `nextId`, this rank's next one. Ranks run collectives in step (each waits for the others),
   * so an honest peer is never that far ahead: such a message is for a tag nobody will wait for.
   */
  heldFarAhead(peer: number, nextId: number): boolean {
    const prefix = `${peer}|`;
    for (const key of this.arrived.keys()) {
      if (key.startsWith(prefix) && Number(key.slice(prefix.length).split(':')[0]) > nextId + FAR_AHEAD_IDS)
        return true;
    }
    return false;
  }
}
