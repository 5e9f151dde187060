/**
 * Runs every oracle case under the current runtime (meant for Deno) and prints
 * one JSON line: { runtime, adapter, results: [{ name, maxAbsErr, tol, ok, error? }] }.
 * Exits 0 even when cases fail: the spawning vitest test judges the results.
 *
 * LANES cases run at once on the one Gpu, each taking the next case of the list when it ends. Why: under
 * Deno every GPU→CPU wait costs ~11 ms of wgpu's polling whatever the work, so cases run one by one left
 * the process idle most of the time (52 s of wall for 19 s of CPU); at once, their waits overlap. Each case
 * makes and frees its own buffers and the queue runs work in the order it was recorded, so a case reads
 * what it wrote whatever the others do in between.
 */
import { acquireGpu } from '../../src/gpu/device.ts';
import { casesFor, ORACLE_CASES } from '../oracles/cases.ts';

const LANES = 4;

interface CaseResult {
  name: string;
  maxAbsErr: number | null;
  tol: number | null;
  ok: boolean;
  error?: string;
}

const gpu = await acquireGpu();
const cases = casesFor(ORACLE_CASES, 'deno');
// In list order, whichever lane ran each.
const results: CaseResult[] = new Array(cases.length);
let next = 0;
async function lane(): Promise<void> {
  for (let i = next++; i < cases.length; i = next++) {
    const c = cases[i];
    try {
      const r = await c.run(gpu);
      results[i] = {
        name: c.name,
        maxAbsErr: Number.isFinite(r.maxAbsErr) ? r.maxAbsErr : null,
        tol: r.tol,
        ok: r.maxAbsErr <= r.tol,
      };
    } catch (err) {
      results[i] = { name: c.name, maxAbsErr: null, tol: null, ok: false, error: String(err) };
    }
  }
}
await Promise.all(Array.from({ length: LANES }, lane));
console.log(JSON.stringify({ runtime: gpu.info.runtime, adapter: gpu.info.description, results }));
gpu.destroy();
