/**
 * Runs every oracle case under the current runtime (meant for Deno) and prints
 * one JSON line: { runtime, adapter, results: [{ name, maxAbsErr, tol, ok, error? }] }.
 * Exits 0 even when cases fail: the spawning vitest test judges the results.
 */
import { acquireGpu } from '../../src/gpu/device.ts';
import { casesFor, ORACLE_CASES } from '../oracles/cases.ts';

const gpu = await acquireGpu();
const results: { name: string; maxAbsErr: number | null; tol: number | null; ok: boolean; error?: string }[] = [];
for (const c of casesFor(ORACLE_CASES, 'deno')) {
  try {
    const r = await c.run(gpu);
    results.push({
      name: c.name,
      maxAbsErr: Number.isFinite(r.maxAbsErr) ? r.maxAbsErr : null,
      tol: r.tol,
      ok: r.maxAbsErr <= r.tol,
    });
  } catch (err) {
    results.push({ name: c.name, maxAbsErr: null, tol: null, ok: false, error: String(err) });
  }
}
console.log(JSON.stringify({ runtime: gpu.info.runtime, adapter: gpu.info.description, results }));
gpu.destroy();
