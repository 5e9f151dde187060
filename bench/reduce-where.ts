/**
 * Where should received chunks be reduced when the gradient lives on the GPU?
 *
 *   cpu: read the gradient back once, reduce every received segment on the CPU
 *        (reduce.ts), write the result to the GPU once;
 *   gpu: upload every received segment, add it with the WGSL `add` kernel,
 *        read the reduced segment back (the ring must send it on).
 *
 * Both do the work of one rank's reduce-scatter for a two-rank ring (half the
 * tensor). Run: deno run -A bench/reduce-where.ts [MiB] (or npx tsx, with VK_ICD_FILENAMES set).
 * Prints one JSON line per size.
 */
import process from 'node:process';
import { acquireGpu } from '../src/gpu/device.ts';
import { planAdd } from '../src/gpu/kernels/elementwise.ts';
import { reduceInto } from '../src/collectives/codecs/reduce.ts';
import { DEFAULT_SEGMENT_BYTES } from '../src/collectives/codecs/types.ts';

const gpu = await acquireGpu();
const SEG = Math.floor(DEFAULT_SEGMENT_BYTES / 4 / 64) * 64; // whole 256-byte multiples, for binding offsets
const sizes = (process.argv.slice(2).length ? process.argv.slice(2) : ['1', '16', '64']).map(Number);

for (const mib of sizes) {
  const n = Math.floor((mib * 1024 * 1024) / 4 / SEG) * SEG;
  const half = n / 2;
  const mine = Float32Array.from({ length: n }, (_, i) => (i % 997) / 997);
  const received = Float32Array.from({ length: half }, (_, i) => (i % 991) / 991);
  const grad = gpu.upload(mine, 'grad');

  // cpu: one readback, CPU reduce per segment, one upload
  let t0 = performance.now();
  const host = await gpu.readF32(grad);
  for (let o = 0; o < half; o += SEG) reduceInto('sum', host.subarray(o, o + SEG), received.subarray(o, o + SEG));
  gpu.write(grad, host);
  await gpu.sync();
  const cpuMs = performance.now() - t0;
  const cpuCheck = (await gpu.readF32(grad, 0, 4))[3];

  // gpu: per segment upload, add kernel, readback
  gpu.write(grad, mine);
  const incoming = gpu.storage(half, 'incoming');
  t0 = performance.now();
  for (let o = 0; o < half; o += SEG) {
    gpu.write(incoming, received.subarray(o, o + SEG), o * 4);
    gpu.record(
      planAdd(
        gpu,
        { buffer: incoming, offset: o * 4, size: SEG * 4 },
        { buffer: grad, offset: o * 4, size: SEG * 4 },
        SEG,
      ),
    );
    await gpu.readF32(grad, o, SEG); // what the ring sends on
  }
  const gpuMs = performance.now() - t0;
  const gpuCheck = (await gpu.readF32(grad, 0, 4))[3];
  if (Math.abs(cpuCheck - gpuCheck) > 1e-6) throw new Error(`cpu and gpu disagree: ${cpuCheck} vs ${gpuCheck}`);
  console.log(
    JSON.stringify({
      bench: 'reduce-where',
      adapter: gpu.info.description,
      fallback: gpu.info.isFallbackAdapter,
      mib,
      segments: half / SEG,
      cpu_ms: Math.round(cpuMs),
      gpu_ms: Math.round(gpuMs),
      cpu_MBps: Math.round((half * 4) / cpuMs / 1e3),
      gpu_MBps: Math.round((half * 4) / gpuMs / 1e3),
    }),
  );
}
gpu.destroy();
