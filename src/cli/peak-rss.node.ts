/**
 * This process's peak resident memory (its high-water mark), for the results
 * `train --json` and `run --json` print: on a CPU adapter the GPU's buffers are
 * the process's RAM too, so this is what a model costs a machine. And the peaks of
 * chosen stretches of a process's life (PeakRssWindows), for `bench allreduce`.
 */
import { closeSync, constants, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
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

/** What PeakRssWindows saw: the windows' peak and the whole process's, or why the windows could not be measured. */
export interface WindowedPeaks {
  /** The highest resident memory inside any window (bytes); null when unavailable says why. */
  window_peak_bytes: number | null;
  /** The highest resident memory over the process's whole life so far (bytes). */
  process_peak_bytes: number | null;
  /** Why there is no window peak (no /proc, not Linux, the reset refused); null when there is one. */
  unavailable: string | null;
}

/**
 * The high-water mark of chosen stretches of this process (`open()` … `close()`; the timed
 * allreduces of `bench allreduce`): Linux restarts VmHWM from the current RSS when "5" is
 * written to clear_refs (kernel 4.0 and later), so a window's peak is VmHWM at its close.
 * A reset loses the process's own peak, so it is read first and kept. Where the reset is refused
 * the windows have no peak (null and the reason), never the process's peak in their place.
 */
export class PeakRssWindows {
  private windowPeak: number | null = null;
  private processPeak = 0;
  private why: string | null = null;

  /** procSelf: the process's own /proc directory. */
  constructor(private readonly procSelf = '/proc/self') {}

  open(): void {
    if (this.why !== null) return;
    const before = this.highWater();
    if (before === null) return;
    this.processPeak = Math.max(this.processPeak, before);
    const clearRefs = join(this.procSelf, 'clear_refs');
    try {
      // Write-only and never created: a directory that is not /proc must refuse, not gain a file.
      const fd = openSync(clearRefs, constants.O_WRONLY);
      try {
        writeSync(fd, '5');
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      this.why = `cannot reset the high-water mark through ${clearRefs} (${(e as Error).message}); it takes Linux 4.0 or later, and under Deno --allow-write for that file`;
    }
  }

  close(): void {
    if (this.why !== null) return;
    const peak = this.highWater();
    if (peak !== null) this.windowPeak = Math.max(this.windowPeak ?? 0, peak);
  }

  report(): WindowedPeaks {
    // After a reset the runtime's own count (getrusage) restarts too: the peaks kept before each reset count.
    const processPeak = Math.max(this.processPeak, this.windowPeak ?? 0, peakRssBytes() ?? 0);
    return {
      window_peak_bytes: this.why === null ? this.windowPeak : null,
      process_peak_bytes: processPeak || null,
      unavailable: this.why ?? (this.windowPeak === null ? 'no window was measured' : null),
    };
  }

  /** VmHWM in bytes; on failure records why and gives null. */
  private highWater(): number | null {
    const status = join(this.procSelf, 'status');
    try {
      const kib = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(status, 'utf8'))?.[1];
      if (kib !== undefined) return Number(kib) * 1024;
      this.why = `${status} has no VmHWM line`;
    } catch (e) {
      this.why = `cannot read ${status} (${(e as Error).message}); it takes Linux's /proc, and under Deno --allow-all`;
    }
    return null;
  }
}
