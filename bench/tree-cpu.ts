/**
 * CPU seconds of a process and all its descendants, read from /proc (Linux):
 * what a run of co-located peers costs the host, the software adapter's
 * threads and the WebRTC network threads included. A process that has ended
 * keeps the last figure read for it (its final few hundred milliseconds are
 * lost; sample often). Processes are told apart by pid and start time, since
 * pids are reused.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS = 100; // USER_HZ on Linux

interface ProcStat {
  pid: number;
  ppid: number;
  start: string;
  cpuS: number;
  /** The command name, as /proc/PID/stat gives it (node, deno, …). */
  name: string;
}

function readStat(pid: string): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces or parentheses: the fields start after the last ')'.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const name = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
    return { pid: Number(pid), ppid: Number(f[1]), start: f[19], cpuS: (Number(f[11]) + Number(f[12])) / TICKS, name };
  } catch {
    return undefined; // ended between readdir and read
  }
}

export class TreeCpu {
  private readonly seen = new Map<string, { name: string; cpuS: number }>();
  constructor(private readonly rootPid: number) {}

  /** CPU seconds used so far by the root and every descendant seen alive at some sample. */
  sample(): number {
    const all = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(readStat)
      .filter((s): s is ProcStat => !!s);
    const children = new Map<number, ProcStat[]>();
    for (const s of all) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s]);
    const root = all.find((s) => s.pid === this.rootPid);
    const queue = root ? [root] : [];
    while (queue.length > 0) {
      const s = queue.pop()!;
      this.seen.set(`${s.pid}:${s.start}`, {
        name: s.pid === this.rootPid ? `${s.name} (root)` : s.name,
        cpuS: s.cpuS,
      });
      queue.push(...(children.get(s.pid) ?? []));
    }
    let total = 0;
    for (const v of this.seen.values()) total += v.cpuS;
    return total;
  }

  /** CPU seconds so far by command name (the root apart): where a run's CPU goes. */
  byName(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const v of this.seen.values()) out[v.name] = (out[v.name] ?? 0) + v.cpuS;
    return out;
  }

  /** How many distinct processes the tree has had. */
  get processes(): number {
    return this.seen.size;
  }
}
