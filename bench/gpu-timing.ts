/**
 * What the kernel benches (bench/reductions.ts, bench/matmul-f16.ts) time a set of dispatches by.
 */
import type { Dispatch, Gpu } from '../src/gpu/gpu.ts';

/** CPU and wall milliseconds per run of `reps` runs of `steps`, recorded into one submit and waited for. */
export async function timeRuns(gpu: Gpu, steps: Dispatch[], reps: number): Promise<{ cpu: number; wall: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) gpu.record(steps);
  await gpu.sync();
  const cpu = process.cpuUsage(cpu0);
  return { cpu: (cpu.user + cpu.system) / 1e3 / reps, wall: (performance.now() - t0) / reps };
}
