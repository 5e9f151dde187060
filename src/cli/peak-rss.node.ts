/**
 * This process's peak resident memory (its high-water mark), for the results
 * `train --json` and `run --json` print: on a CPU adapter the GPU's buffers are
 * the process's RAM too, so this is what a model costs a machine.
 */
import { readFileSync } from 'node:fs';
import process from 'node:process';

/** Bytes, or null where the runtime tells neither way. maxRSS is in KiB under Node and Deno alike (Linux). */
export function peakRssBytes(): number | null {
  try {
    const kib = process.resourceUsage?.().maxRSS;
    if (typeof kib === 'number' && kib > 0) return kib * 1024;
  } catch {
    // not implemented by this runtime: the kernel's own count below
  }
  try {
    const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return hwm === undefined ? null : Number(hwm) * 1024;
  } catch {
    return null;
  }
}
