/**
 * A step submitted in parts, for runtimes whose GPU waits hold the JavaScript thread.
 *
 * Under Deno (wgpu) awaiting `mapAsync` or `onSubmittedWorkDone` polls the device until its queue
 * is empty, on the JavaScript thread: a read at the end of a 100 s step on a software adapter is a
 * 100 s gap in which no timer fires and no socket is read, and a server or a link that hears nothing
 * for 15-60 s drops the peer. So there the Gpu cuts what it records into small command buffers
 * (`Gpu.record` ends one once it has bound `chunkBytes`) and holds them; before a wait it submits
 * them a group at a time, waits for each group and lets the event loop turn (a macrotask) before
 * the next. A group is sized from the measured time of the groups before it toward `partMs`, so
 * each wait stays short however fast the adapter is; one long kernel is a group of its own.
 *
 * The dispatches are the same and in the same order, whatever the grouping: only where the queue
 * is submitted and waited for changes, so results are equal bit for bit. Runtimes whose waits let
 * the loop turn (Dawn under Node, browsers) keep one submit per wait.
 */

export interface PartOptions {
  /** How long one waited group should take, in ms; 0 makes every held command buffer a group of its own. */
  partMs: number;
  /** Bytes a command buffer binds (added over its dispatches, plus DISPATCH_COST each) before it is ended. */
  chunkBytes: number;
}

/**
 * Where the runtime's waits block (Deno): groups of about a second, in command buffers of 8 MiB bound
 * (GPT-2 124M on lavapipe at load 35: 32 MiB took 2-4 s, more than a group should).
 */
export const DEFAULT_PART_OPTIONS: PartOptions = { partMs: 1000, chunkBytes: 8 * 1024 * 1024 };

/** What a dispatch costs beside the bytes it binds, in bytes bound: its launch and the barrier after it. */
export const DISPATCH_COST = 64 * 1024;

/**
 * The most command buffers one group takes, whatever the estimate says. Bytes bound are a poor
 * measure of time across kernels (an elementwise pass binds as much per millisecond as a matmul
 * binds per second), so a pace learned on cheap buffers could put a hundred costly ones in one
 * group (the likely cause of a GPT-2 124M ring on lavapipe losing a link to 15 s of silence in
 * its first step, one run in three, on a quiet machine).
 */
export const MAX_GROUP_BUFFERS = 4;

/** A measured part's weight in the running estimate of ms per byte bound (the rest is the estimate so far). */
const LEARNING_RATE = 0.5;

interface HeldBuffer {
  commands: GPUCommandBuffer;
  cost: number;
}

export class PartQueue {
  private held: HeldBuffer[] = [];
  /** Command buffers submitted so far (as parts, or all at once by `submitAll`). */
  private submittedCount = 0;
  /** The group on the queue now, whose wait is in progress; null between groups. */
  private inFlight: Promise<void> | null = null;
  /** Measured ms per byte bound; null until a group has been timed. */
  private msPerCost: number | null = null;
  /** Whether `submitAll` put work on the queue since the last group: the next group's wait includes it, so it teaches nothing. */
  private unwaited = false;

  constructor(
    private readonly queue: GPUQueue,
    readonly options: PartOptions,
    /** Awaits a GPU promise, a failure reported as the Gpu reports it (Gpu.waitFor, not counted in its `waits`). */
    private readonly wait: (what: string, promise: Promise<unknown>) => Promise<unknown>,
  ) {}

  /** Command buffers submitted so far. */
  get submitted(): number {
    return this.submittedCount;
  }

  /** Command buffers ended and not yet submitted. */
  get heldCount(): number {
    return this.held.length;
  }

  hold(commands: GPUCommandBuffer, cost: number): void {
    this.held.push({ commands, cost });
  }

  /** Submits every held buffer now, unwaited: for work that must land on the queue after them (a write). */
  submitAll(): void {
    if (this.held.length === 0) return;
    this.queue.submit(this.held.map((h) => h.commands));
    this.submittedCount += this.held.length;
    this.held = [];
    this.unwaited = true;
  }

  /**
   * Resolves once every buffer held when it was called is submitted, having submitted them a group
   * at a time, each waited for, with the event loop turning between groups. Callers may overlap: one
   * group is on the queue at a time, so a caller's own wait after this one holds the thread for at
   * most the group still running (its last buffer's, or a later caller's).
   */
  async submitInParts(): Promise<void> {
    const through = this.submittedCount + this.held.length;
    while (this.submittedCount < through) {
      this.inFlight ??= this.runGroup().finally(() => (this.inFlight = null));
      await this.inFlight;
    }
  }

  /** Submits the next group (at least one buffer), waits for it, learns its pace and lets timers and sockets run. */
  private async runGroup(): Promise<void> {
    const group = this.nextGroup();
    if (group.length === 0) return;
    const cost = group.reduce((sum, h) => sum + h.cost, 0);
    const learn = !this.unwaited;
    this.unwaited = false;
    const started = performance.now();
    this.queue.submit(group.map((h) => h.commands));
    this.submittedCount += group.length;
    await this.wait('waiting for a part of the step', this.queue.onSubmittedWorkDone());
    const measured = (performance.now() - started) / Math.max(1, cost);
    if (learn)
      this.msPerCost =
        this.msPerCost === null ? measured : this.msPerCost + LEARNING_RATE * (measured - this.msPerCost);
    await new Promise((resolve) => setTimeout(resolve, 0));
  }

  /** The held buffers from the front that together should take about `partMs` (the first one whatever it costs). */
  private nextGroup(): HeldBuffer[] {
    let n = 0;
    let cost = 0;
    // Before anything was timed, a group is one buffer: the first measurement sizes the rest.
    const budget = this.msPerCost === null ? 0 : this.options.partMs / Math.max(this.msPerCost, Number.MIN_VALUE);
    while (n < this.held.length && n < MAX_GROUP_BUFFERS && (n === 0 || cost + this.held[n].cost <= budget))
      cost += this.held[n++].cost;
    return this.held.splice(0, n);
  }
}
