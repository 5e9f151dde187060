/**
 * `Gpu`: one WebGPU device plus everything kernels share: the shader registry
 * lookups, the pipeline cache, the buffer pool, the command encoder that
 * batches a step's dispatches, uniform buffers, and reading results back.
 *
 * Recording model: kernels are *planned* once (pipeline, bind group, uniform
 * buffer: see `Dispatch`), then `record()`ed every step into one open compute
 * pass. `flush()` ends the pass and submits one command buffer. Reads and
 * `write()` flush first, so queue order always matches call order.
 *
 * GPU→CPU waits: every `mapAsync` / `onSubmittedWorkDone` the library awaits
 * goes through `waitFor`, which counts it (`waits`). Under Deno such a wait
 * costs ~11 ms whatever the work (wgpu polls), so training loops read results
 * a few steps behind (see readback.ts) and `--json` results report the count.
 * Under Deno a wait also holds the JavaScript thread until the queue is empty:
 * there what is recorded goes to the queue in parts, each waited for with the
 * event loop turning in between (parts.ts), so a long step stays responsive.
 * A read also carries the scalars that `ReadbackRider`s (DeferredScalars)
 * have pending, so a read that happens anyway costs them no second wait.
 *
 * Failures: device loss and uncaptured (validation/out-of-memory) errors are
 * caught here, in one place, and turned into a DeviceLost RingtrainError that
 * the next call on this Gpu throws.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { BufferPool } from './buffers.ts';
import { DEFAULT_PART_OPTIONS, DISPATCH_COST, PartQueue, type PartOptions } from './parts.ts';
import { moduleSource } from './shaders.ts';
import {
  bindingBytes,
  MAX_GROUPS_PER_DIM,
  storageUsage,
  writeFields,
  type Binding,
  type Dispatch,
  type DispatchCapture,
  type GpuInfo,
  type PipelineOptions,
  type ReadbackRider,
  type UniformField,
} from './types.ts';

export * from './types.ts';

/**
 * The most one staged read brings back at once: the default fusion threshold (64 MiB), so a
 * gradient bucket is one read, and a whole model's weights are a few.
 */
export const READ_SLICE_BYTES = 64 * 1024 * 1024;

/**
 * The most one `write` hands the queue before a submit. The runtime stages what writeBuffer is
 * given until a submit carries it (wgpu and Dawn alike), so a 498 MB gradient written in one call
 * staged a second 498 MB; in slices, each followed by an empty submit, the staging is freed as
 * the queue goes (measured on lavapipe and SwiftShader: 525 MB of staging became 66-133 MB).
 */
export const WRITE_SLICE_BYTES = 16 * 1024 * 1024;

export class Gpu {
  readonly pool: BufferPool;
  private pipelines = new Map<string, GPUComputePipeline>();
  /** Pipelines being compiled off the event loop (compileAhead), by cache key. */
  private compiling: Map<string, Promise<GPUComputePipeline>> | null = null;
  private modules = new Map<string, GPUShaderModule>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private failure: RingtrainError | null = null;
  private destroyed = false;
  private waitCount = 0;
  private readonly riders = new Set<ReadbackRider>();
  private readonly captures = new Set<Dispatch[]>();
  private submitted = 0;
  /** Where waits hold the thread (Deno): the command buffers ended and held, to submit in parts. */
  private readonly parts: PartQueue | null;
  /** Bytes bound by the dispatches of the open command encoder (with DISPATCH_COST each). */
  private openCost = 0;
  /** The pipeline last set on the open pass: a run of dispatches of one kernel sets it once. */
  private passPipeline: GPUComputePipeline | null = null;
  /** Reused by writeUniform (queue.writeBuffer copies the bytes at once), so a step allocates no ArrayBuffer for it. */
  private uniformScratch = new ArrayBuffer(256);
  /** A 16-byte storage buffer bound where a kernel's optional input is absent. */
  readonly dummy: GPUBuffer;
  /**
   * The most bytes one storage binding may cover: the adapter's maxStorageBufferBindingSize, or less
   * when `GpuOptions.maxBindingBytes` asks for less. Kernels plan their slices against this, never
   * against the device limit, so a small value makes every slicing path run on any adapter.
   */
  readonly maxBindingBytes: number;
  /**
   * Whether kernels plan the subgroup versions of their reductions (docs/KERNELS.md, "Subgroups"): the
   * device has 'subgroups' (acquireGpu asks for it wherever the adapter offers it) and
   * `GpuOptions.subgroups` is not false. Fixed for the Gpu's life, so a plan is the same every step.
   */
  readonly subgroups: boolean;
  /**
   * The most multiply-adds one dispatch of a sliced matmul does (matmul-slices.ts): GPT-2's head
   * products are billions each, which a CPU adapter takes seconds to tens of seconds to run, and
   * under Deno a wait holds the thread for as long (parts.ts), so they are cut along rows and
   * columns of C (the same bits) into dispatches of about a second or less there.
   */
  readonly maxDispatchMacs: number;

  constructor(
    readonly device: GPUDevice,
    readonly info: GpuInfo,
    options: GpuOptions = {},
  ) {
    this.maxBindingBytes = bindingLimit(device.limits, options.maxBindingBytes);
    this.subgroups = options.subgroups !== false && (device.features?.has('subgroups') ?? false);
    this.maxDispatchMacs = options.maxDispatchMacs ?? DEFAULT_MAX_DISPATCH_MACS;
    const parts = options.stepParts ?? (waitsHoldTheThread(info) ? DEFAULT_PART_OPTIONS : false);
    // A part's wait paces the queue; it reads nothing, so `waits` (what latency hiding counts) leaves it out.
    this.parts = parts ? new PartQueue(device.queue, parts, (what, p) => this.settle(what, p)) : null;
    this.pool = new BufferPool(device);
    void device.lost.then((lost) => {
      if (this.destroyed) return;
      this.fail(`the GPU device was lost (${lost.reason}: ${lost.message})`, { reason: lost.reason });
    });
    device.addEventListener('uncapturederror', (event) => {
      const error = (event as GPUUncapturedErrorEvent).error;
      this.fail(`the GPU reported an error: ${error?.message ?? String(error)}`, {
        gpuError: error?.constructor?.name,
      });
    });
    this.dummy = this.pool.create(16, GPUBufferUsage.STORAGE, 'dummy');
  }

  private fail(message: string, detail: Record<string, unknown>): void {
    if (this.failure) return;
    this.failure = new RingtrainError(
      ErrorCode.DeviceLost,
      `${message}; results on this device are no longer valid: acquire a new Gpu (acquireGpu()) and reload parameters`,
      { adapter: this.info.description, ...detail },
    );
  }

  /** Throws the pending DeviceLost error, if any. Every public method calls it. */
  check(): void {
    if (this.failure) throw this.failure;
    if (this.destroyed)
      throw new RingtrainError(ErrorCode.DeviceLost, 'this Gpu was destroyed; acquire a new one with acquireGpu()');
  }

  get lost(): boolean {
    return this.failure !== null;
  }

  /** Neither lost nor destroyed: calls will not throw DeviceLost. */
  get alive(): boolean {
    return this.failure === null && !this.destroyed;
  }

  /** GPU buffers created so far (pool + uniforms + model buffers). */
  get allocations(): number {
    return this.pool.allocations;
  }

  /** Whether the device runs shaders with `enable f16;` (acquireGpu asks for 'shader-f16' wherever the adapter has it). */
  get hasShaderF16(): boolean {
    return this.device.features?.has('shader-f16') ?? false;
  }

  get limits(): GPUSupportedLimits {
    return this.device.limits;
  }

  module(key: string): GPUShaderModule {
    let m = this.modules.get(key);
    if (!m) {
      m = this.device.createShaderModule({ code: moduleSource(key), label: key });
      this.modules.set(key, m);
    }
    return m;
  }

  /** A compute pipeline from `shaders/<key>.wgsl`, cached by key, entry point and override constants. */
  pipeline(key: string, options: PipelineOptions = {}): GPUComputePipeline {
    this.check();
    const entryPoint = options.entryPoint ?? 'main';
    const constants = options.constants ?? {};
    const cacheKey = `${key}#${entryPoint}#${Object.keys(constants)
      .sort()
      .map((k) => `${k}=${constants[k]}`)
      .join(',')}`;
    let p = this.pipelines.get(cacheKey);
    if (!p) {
      const descriptor: GPUComputePipelineDescriptor = {
        label: cacheKey,
        layout: 'auto',
        compute: { module: this.module(key), entryPoint, constants },
      };
      if (this.compiling) {
        if (!this.compiling.has(cacheKey))
          this.compiling.set(cacheKey, this.device.createComputePipelineAsync(descriptor));
        throw new PipelineNotReady(cacheKey);
      }
      p = this.device.createComputePipeline(descriptor);
      this.pipelines.set(cacheKey, p);
    }
    return p;
  }

  /**
   * Runs `work` until it asks for no pipeline this Gpu has not built, building each missing one
   * with createComputePipelineAsync in between, and returns what it returned: some runtimes (Dawn
   * under Node, wgpu under Deno) build a pipeline synchronously, and on a software adapter a
   * model's first step holds the event loop for tens of seconds, long enough for a signaling
   * server to drop a silent peer. `work` is run again from the start after each missing
   * pipeline; the buffers an abandoned attempt created are destroyed, so `work` may make the
   * real thing (a model, its plans) as long as it keeps nothing of an attempt that threw.
   * Nothing else may use this Gpu meanwhile.
   */
  async compileAhead<T>(work: () => T | Promise<T>): Promise<T> {
    if (this.compiling)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        'Gpu.compileAhead: already compiling ahead; run one warm-up at a time',
      );
    for (;;) {
      this.compiling = new Map();
      this.pool.startTracking();
      let missing: Map<string, Promise<GPUComputePipeline>>;
      try {
        const done = await work();
        this.pool.stopTracking();
        return done;
      } catch (err) {
        missing = this.compiling!;
        const notReady =
          err instanceof PipelineNotReady || (err instanceof Error && err.cause instanceof PipelineNotReady);
        const abandoned = this.pool.stopTracking();
        if (!notReady || missing.size === 0) throw err;
        // Queued work may still use them (a step recorded before the missing pipeline): flush first.
        this.flush();
        this.pool.destroyNow(abandoned);
      } finally {
        this.compiling = null;
      }
      for (const [cacheKey, pending] of missing) this.pipelines.set(cacheKey, await pending);
      // Deno builds a pipeline holding the thread and resolves it at once: let timers and sockets run between attempts.
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
  }

  get pipelineCount(): number {
    return this.pipelines.size;
  }

  /** A bind group for group 0 of `pipeline`, bindings numbered 0..n-1 in order. */
  bind(pipeline: GPUComputePipeline, bindings: Binding[], label?: string): GPUBindGroup {
    bindings.forEach((b, i) => this.checkBinding(label ?? 'a kernel', i, b));
    return this.device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: bindings.map((b, i) => ({ binding: i, resource: 'buffer' in b ? b : { buffer: b } })),
    });
  }

  /**
   * Refuses a binding past `maxBindingBytes`, naming the kernel, the binding, its buffer, its size and
   * the limit. A kernel that can slice the operand never gets here; the planner (nn/plan.ts) adds the
   * layer and the change that helps.
   */
  checkBinding(label: string, index: number, b: Binding): void {
    const size = bindingBytes(b);
    if (size <= this.maxBindingBytes) return;
    const buffer = 'buffer' in b ? b.buffer : b;
    const device = this.device.limits.maxStorageBufferBindingSize;
    const limit =
      this.maxBindingBytes < device
        ? `the ${this.maxBindingBytes}-byte binding limit this Gpu was created with (maxBindingBytes; the adapter's maxStorageBufferBindingSize is ${device})`
        : `this adapter's maxStorageBufferBindingSize of ${device} bytes`;
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${label} would bind ${size} bytes of buffer '${buffer.label || 'unnamed'}' (binding ${index}), more than ${limit}`,
      { kernel: label, binding: index, buffer: buffer.label, size, max: this.maxBindingBytes },
    );
  }

  /** A small uniform buffer holding `fields` (4 bytes each, padded to 16). Counted as an allocation. */
  uniform(fields: UniformField[], label?: string): GPUBuffer {
    this.check();
    const buffer = this.pool.create(fields.length * 4, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, label, true);
    writeFields(buffer.getMappedRange(), fields);
    buffer.unmap();
    return buffer;
  }

  /**
   * Rewrites a uniform buffer made by `uniform`, ordered after everything
   * recorded so far; with `ahead`, before what is recorded but not yet
   * submitted instead (see `writeAhead`: the caller vouches that none of it uses the buffer).
   */
  writeUniform(buffer: GPUBuffer, fields: UniformField[], ahead = false): void {
    const size = Math.ceil((fields.length * 4) / 16) * 16;
    if (size > this.uniformScratch.byteLength) this.uniformScratch = new ArrayBuffer(size);
    writeFields(this.uniformScratch, fields);
    const bytes = new Uint8Array(this.uniformScratch, 0, size);
    if (ahead) this.writeAhead(buffer, bytes);
    else this.write(buffer, bytes);
  }

  /** Plans a dispatch of `key` with the given bindings and workgroup counts. */
  plan(
    key: string,
    bindings: Binding[],
    workgroups: [number, number?, number?],
    options: PipelineOptions = {},
  ): Dispatch {
    const pipeline = this.pipeline(key, options);
    const label = `${key}:${options.entryPoint ?? 'main'}`;
    const [x, y = 1, z = 1] = workgroups;
    if (x > MAX_GROUPS_PER_DIM || y > MAX_GROUPS_PER_DIM || z > MAX_GROUPS_PER_DIM) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${label}: ${x}x${y}x${z} workgroups exceed ${MAX_GROUPS_PER_DIM} per dimension; split the work`,
        { workgroups },
      );
    }
    return {
      label,
      pipeline,
      bindGroup: this.bind(pipeline, bindings, label),
      workgroups: [x, y, z],
      boundBytes: bindings.reduce((sum, b) => sum + bindingBytes(b), 0),
    };
  }

  /** Starts collecting every dispatch `record` appends, until `stop()`. */
  capture(): DispatchCapture {
    const dispatches: Dispatch[] = [];
    this.captures.add(dispatches);
    return { dispatches, stop: () => void this.captures.delete(dispatches) };
  }

  /** Appends dispatches to the open compute pass (opening one if needed); in parts, a full command buffer is ended first. */
  record(dispatches: Dispatch | Dispatch[]): void {
    this.check();
    if (Array.isArray(dispatches)) for (const d of dispatches) this.recordOne(d);
    else this.recordOne(dispatches);
  }

  private recordOne(d: Dispatch): void {
    if (this.parts && this.openCost >= this.parts.options.chunkBytes) this.cut();
    if (!this.pass) {
      this.encoder ??= this.device.createCommandEncoder({ label: 'ringtrain-step' });
      this.pass = this.encoder.beginComputePass();
      this.passPipeline = null;
    }
    const pass = this.pass;
    this.openCost += d.boundBytes + DISPATCH_COST;
    // Each call into the runtime costs (a native call under Node and Deno): skip the ones that change nothing.
    if (d.pipeline !== this.passPipeline) {
      pass.setPipeline(d.pipeline);
      this.passPipeline = d.pipeline;
    }
    pass.setBindGroup(0, d.bindGroup);
    pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
    if (this.captures.size > 0) for (const c of this.captures) c.push(d);
  }

  /**
   * The open command encoder, after everything recorded so far (ends the open
   * compute pass). Copies recorded on it run in call order with dispatches.
   */
  commandEncoder(): GPUCommandEncoder {
    this.check();
    this.endPass();
    this.encoder ??= this.device.createCommandEncoder({ label: 'ringtrain-step' });
    return this.encoder;
  }

  /** Records a buffer-to-buffer copy (ends the open compute pass). */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    this.commandEncoder().copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  /** GPU→CPU waits this Gpu has awaited so far (mapAsync, onSubmittedWorkDone). */
  get waits(): number {
    return this.waitCount;
  }

  /**
   * Awaits a GPU promise (a mapAsync or onSubmittedWorkDone), counted in
   * `waits`; a rejection becomes DeviceLost (or the pending device failure).
   */
  async waitFor<T>(what: string, promise: Promise<T>): Promise<T> {
    this.waitCount++;
    return this.settle(what, promise);
  }

  /** waitFor, uncounted. */
  private async settle<T>(what: string, promise: Promise<T>): Promise<T> {
    try {
      return await promise;
    } catch (err) {
      this.check();
      throw new RingtrainError(ErrorCode.DeviceLost, `${what} failed: ${String(err)}; acquire a new Gpu`, undefined, {
        cause: err,
      });
    }
  }

  /** Registers a rider whose pending values every later read carries along. */
  addRider(rider: ReadbackRider): void {
    this.riders.add(rider);
  }

  removeRider(rider: ReadbackRider): void {
    this.riders.delete(rider);
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
      this.passPipeline = null;
    }
  }

  /** Command buffers submitted so far: work recorded while `recordedThrough` read k is on the queue once this is more than k. */
  get submits(): number {
    return this.parts ? this.parts.submitted : this.submitted;
  }

  /** What a caller keeps to tell later (against `submits`) whether what it records now was submitted: see `writeAhead`. */
  get recordedThrough(): number {
    return this.parts ? this.parts.submitted + this.parts.heldCount : this.submitted;
  }

  /** Submits everything recorded so far at once (unwaited, held parts too): what must follow it on the queue can. */
  flush(): void {
    this.check();
    if (this.parts) {
      this.cut();
      this.parts.submitAll();
      return;
    }
    this.endPass();
    if (this.encoder) {
      const cb = this.encoder.finish();
      this.encoder = null;
      this.device.queue.submit([cb]);
      this.submitted++;
    }
    this.openCost = 0;
  }

  /**
   * Submits everything recorded so far before a wait: at once, or where waits hold the thread in
   * parts, each waited for with the event loop turning between them (parts.ts). After it, a wait
   * holds the thread for at most the last part.
   */
  async submitRecorded(): Promise<void> {
    this.check();
    if (!this.parts) return this.flush();
    this.cut();
    await this.parts.submitInParts();
    this.check();
  }

  /** Ends the open command encoder into a held part (parts only). */
  private cut(): void {
    this.endPass();
    if (this.encoder) {
      this.parts!.hold(this.encoder.finish(), this.openCost);
      this.encoder = null;
    }
    this.openCost = 0;
  }

  /**
   * Writes CPU data into a buffer, after everything already recorded; more than
   * WRITE_SLICE_BYTES goes in slices, each submitted before the next is staged.
   */
  write(buffer: GPUBuffer, data: ArrayBufferView, byteOffset = 0): void {
    this.flush();
    if (data.byteLength % 4 !== 0) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `GPU writes must be a multiple of 4 bytes, got ${data.byteLength}`,
      );
    }
    const queue = this.device.queue;
    for (let at = 0; at < data.byteLength; at += WRITE_SLICE_BYTES) {
      const n = Math.min(WRITE_SLICE_BYTES, data.byteLength - at);
      queue.writeBuffer(buffer, byteOffset + at, data.buffer, data.byteOffset + at, n);
      // Nothing recorded rides on it (flushed above): the submit only carries the slice's staging.
      if (at + n < data.byteLength) queue.submit([]);
    }
  }

  /**
   * Writes CPU data into a buffer WITHOUT flushing: the write lands on the
   * queue before everything recorded but not yet submitted. Only for a buffer
   * that none of that pending work reads or writes (a uniform whose reader was
   * submitted already, see `submits`); it spares the step a submit of its own.
   */
  writeAhead(buffer: GPUBuffer, data: ArrayBufferView, byteOffset = 0): void {
    this.check();
    if (data.byteLength % 4 !== 0) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `GPU writes must be a multiple of 4 bytes, got ${data.byteLength}`,
      );
    }
    this.device.queue.writeBuffer(buffer, byteOffset, data.buffer, data.byteOffset, data.byteLength);
  }

  /**
   * Reads `byteLength` bytes at `byteOffset` of `buffer` (which needs
   * COPY_SRC), after everything recorded: one counted wait, which also brings
   * back what the registered riders have pending. A read larger than
   * READ_SLICE_BYTES goes in slices, one wait each, straight into the result:
   * a whole model's weights would otherwise keep a staging buffer of their
   * size in the pool for good, beside a second copy while it is mapped.
   */
  async read(buffer: GPUBuffer, byteOffset = 0, byteLength = buffer.size - byteOffset): Promise<ArrayBuffer> {
    if (byteLength <= READ_SLICE_BYTES) return this.readSlice(buffer, byteOffset, byteLength);
    const out = new ArrayBuffer(byteLength);
    await this.readInto(buffer, byteOffset, new Uint8Array(out));
    return out;
  }

  /** read, into `into` (its whole length) rather than a new buffer. */
  private async readInto(buffer: GPUBuffer, byteOffset: number, into: Uint8Array): Promise<void> {
    const byteLength = into.byteLength;
    for (let at = 0; at < byteLength; at += READ_SLICE_BYTES) {
      const n = Math.min(READ_SLICE_BYTES, byteLength - at);
      // The riders go with the last slice: the full ones then share one staging buffer of the pool.
      await this.readSlice(buffer, byteOffset + at, n, into.subarray(at, at + n), at + n >= byteLength);
    }
  }

  /**
   * One staged read, copied into `into` (then its buffer is returned) or else into a new buffer of
   * `byteLength`; it brings back what the riders have pending unless `withRiders` is false.
   */
  private async readSlice(
    buffer: GPUBuffer,
    byteOffset: number,
    byteLength: number,
    into?: Uint8Array,
    withRiders = true,
  ): Promise<ArrayBuffer> {
    this.check();
    const size = Math.ceil(byteLength / 4) * 4;
    const riders = withRiders ? [...this.riders].filter((r) => r.pendingBytes > 0) : [];
    const offsets: number[] = [];
    let total = size;
    for (const r of riders) {
      offsets.push(total);
      total += r.pendingBytes;
    }
    const staging = this.pool.acquire(total, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, 'staging');
    const encoder = this.commandEncoder();
    encoder.copyBufferToBuffer(buffer, byteOffset, staging, 0, size);
    const deliveries = riders.map((r, i) => r.copyPendingInto(encoder, staging, offsets[i]));
    try {
      await this.submitRecorded();
      await this.waitFor('reading a GPU buffer', staging.mapAsync(GPUMapMode.READ, 0, total));
    } catch (err) {
      for (const d of deliveries) d.fail(err);
      throw err;
    }
    const mapped = staging.getMappedRange(0, total);
    into?.set(new Uint8Array(mapped, 0, byteLength));
    const out = into ? (into.buffer as ArrayBuffer) : mapped.slice(0, byteLength);
    deliveries.forEach((d, i) => d.deliver(mapped.slice(offsets[i], i + 1 < offsets.length ? offsets[i + 1] : total)));
    staging.unmap();
    this.pool.release(staging);
    this.check();
    return out;
  }

  async readF32(
    buffer: GPUBuffer,
    offsetFloats = 0,
    count = buffer.size / 4 - offsetFloats,
  ): Promise<Float32Array<ArrayBuffer>> {
    return new Float32Array(await this.read(buffer, offsetFloats * 4, count * 4));
  }

  /** readF32 into `into` (as many floats as it holds, from `offsetFloats`): a caller that keeps one buffer for every read. */
  async readF32Into(buffer: GPUBuffer, offsetFloats: number, into: Float32Array): Promise<Float32Array> {
    await this.readInto(buffer, offsetFloats * 4, new Uint8Array(into.buffer, into.byteOffset, into.byteLength));
    return into;
  }

  async readU32(
    buffer: GPUBuffer,
    offsetWords = 0,
    count = buffer.size / 4 - offsetWords,
  ): Promise<Uint32Array<ArrayBuffer>> {
    return new Uint32Array(await this.read(buffer, offsetWords * 4, count * 4));
  }

  /** A new storage buffer holding `data` (counted). Usable as kernel input/output and copy source/target. */
  upload(
    data: Float32Array | Uint32Array | Int32Array,
    label?: string,
    extraUsage: GPUBufferUsageFlags = 0,
  ): GPUBuffer {
    this.check();
    const buffer = this.pool.create(data.byteLength, storageUsage() | extraUsage, label, true);
    new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    buffer.unmap();
    return buffer;
  }

  /** A new zero-filled storage buffer of `floats` 4-byte words (counted). */
  storage(floats: number, label?: string, extraUsage: GPUBufferUsageFlags = 0): GPUBuffer {
    this.check();
    return this.pool.create(Math.max(1, floats) * 4, storageUsage() | extraUsage, label);
  }

  /** Waits until the GPU has finished everything submitted. */
  async sync(): Promise<void> {
    await this.submitRecorded();
    await this.waitFor('waiting for the GPU queue', this.device.queue.onSubmittedWorkDone());
    this.check();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.pool.destroy();
    this.device.destroy();
  }
}

/** 2^28 multiply-adds: a fraction of a second on lavapipe, some 30 µs on a data-centre GPU. */
export const DEFAULT_MAX_DISPATCH_MACS = 2 ** 28;

export interface GpuOptions {
  /** Plan as if one storage binding could hold at most this many bytes (clamped to the adapter's maxStorageBufferBindingSize). */
  maxBindingBytes?: number;
  /** false: plan the workgroup-memory reductions even where the device has 'subgroups'. */
  subgroups?: boolean;
  /** The most multiply-adds one dispatch of a sliced matmul may do (`Gpu.maxDispatchMacs`; default 2^28). */
  maxDispatchMacs?: number;
  /**
   * Submit recorded work in parts, each waited for with the event loop turning between them (parts.ts), or
   * false for one submit per wait. Default: parts where the runtime's GPU waits hold the JavaScript thread.
   */
  stepParts?: PartOptions | false;
}

/**
 * Whether awaiting a GPU promise holds the JavaScript thread until the queue is empty: Deno's WebGPU
 * (wgpu) polls the device on that thread (measured: a 4.1 s wait was a 4.1 s gap between timers);
 * Dawn under Node and browsers wait off the thread.
 */
export function waitsHoldTheThread(info: GpuInfo): boolean {
  return info.runtime === 'deno';
}

function bindingLimit(limits: GPUSupportedLimits, wanted: number | undefined): number {
  const device = limits.maxStorageBufferBindingSize;
  if (wanted === undefined) return device;
  const align = limits.minStorageBufferOffsetAlignment;
  if (!Number.isInteger(wanted) || wanted < align || wanted % 4 !== 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `maxBindingBytes must be a whole number of 4-byte words, at least minStorageBufferOffsetAlignment (${align}); got ${wanted}`,
      { maxBindingBytes: wanted },
    );
  }
  return Math.min(wanted, device);
}

/** Thrown inside Gpu.compileAhead's work when it asks for a pipeline still being built. */
class PipelineNotReady extends Error {
  constructor(readonly cacheKey: string) {
    super(`pipeline ${cacheKey} is being built ahead`);
  }
}
