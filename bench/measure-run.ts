/**
 * One `ringtrain run` (or `train`) measured from outside: its steady-state
 * steps per second and the CPU seconds its whole process tree (launcher,
 * signaling server, every worker with its software adapter and WebRTC
 * threads) spent per step over the same window. The window runs from the
 * second progress line to the last, so the first steps, where every worker
 * compiles its kernels, stay out of it; the CLI's own steps / train_seconds
 * is kept beside it.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { TreeCpu } from './tree-cpu.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const CLI = fileURLToPath(new URL('../bin/ringtrain.js', import.meta.url));

/** `run`'s progress line (about ten a run without a terminal) and `train`'s. */
const PROGRESS = /^step (\d+)\/(\d+)/;

export interface RunMeasurement {
  command: string;
  steps: number;
  /** Steady-state steps per second: (last step - first step in the window) / seconds between their lines. */
  steps_per_s: number;
  /** The CLI's figure: steps / train_seconds (every step, the compiling ones included). */
  cli_steps_per_s: number;
  /** CPU seconds of the whole process tree per step, over the window. */
  cpu_s_per_step: number;
  /** cpu_s_per_step times steps_per_s: how many cores the run kept busy. */
  cores_busy: number;
  /** Cores busy with anything else over the window (the machine's busy time from /proc/stat less the run's). */
  others_cores: number;
  /** Cores idle over the window. */
  idle_cores: number;
  /** cpu_s_per_step by command name: the launcher with its in-process signaling server ('node (root)'), the workers ('deno'). */
  cpu_s_per_step_by_process: Record<string, number>;
  window: { from_step: number; to_step: number; seconds: number };
  load_before: number;
  load_after: number;
  result: Record<string, unknown>;
}

interface Mark {
  step: number;
  t: number;
  cpu: number;
  machine: number;
  byName: Record<string, number>;
}

/** CPU seconds every core of the machine has been busy (not idle, not waiting on I/O), from /proc/stat. */
function machineBusyS(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((s, x) => s + x, 0);
  return (total - f[3] - f[4]) / 100; // minus idle and iowait; USER_HZ is 100
}

export function measureRun(args: string[]): Promise<RunMeasurement> {
  const loadBefore = loadavg()[0];
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const tree = new TreeCpu(child.pid!);
  const marks: Mark[] = [];
  let stdout = '';
  let stderrTail = '';
  // Sample between progress lines too, so that workers that end keep nearly all their CPU time.
  const sampler = setInterval(() => tree.sample(), 250);
  let partial = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderrTail = (stderrTail + d).slice(-3000);
    const lines = (partial + d).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const m = PROGRESS.exec(line);
      if (m)
        marks.push({
          step: Number(m[1]),
          t: performance.now() / 1000,
          cpu: tree.sample(),
          machine: machineBusyS(),
          byName: tree.byName(),
        });
    }
  });
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => {
      clearInterval(sampler);
      const command = `ringtrain ${args.join(' ')}`;
      const line = stdout
        .trim()
        .split('\n')
        .reverse()
        .find((l) => l.startsWith('{'));
      if (code !== 0 || !line) return reject(new Error(`${command} exited with ${code}: ${stderrTail}`));
      if (marks.length < 3)
        return reject(
          new Error(
            `${command} printed ${marks.length} progress lines; give it more steps (it needs 3 to measure a window past the first)`,
          ),
        );
      const result = JSON.parse(line) as Record<string, unknown>;
      const [a, b] = [marks[1], marks.at(-1)!];
      const steps = b.step - a.step;
      const seconds = b.t - a.t;
      resolve({
        command,
        steps: Number(result.steps),
        steps_per_s: steps / seconds,
        cli_steps_per_s: Number(result.steps) / Number(result.train_seconds),
        cpu_s_per_step: (b.cpu - a.cpu) / steps,
        cores_busy: (b.cpu - a.cpu) / seconds,
        others_cores: (b.machine - a.machine - (b.cpu - a.cpu)) / seconds,
        idle_cores: cpus().length - (b.machine - a.machine) / seconds,
        cpu_s_per_step_by_process: Object.fromEntries(
          Object.entries(b.byName).map(([k, v]) => [k, Math.round(((v - (a.byName[k] ?? 0)) / steps) * 1e4) / 1e4]),
        ),
        window: { from_step: a.step, to_step: b.step, seconds },
        load_before: loadBefore,
        load_after: loadavg()[0],
        result,
      });
    });
  });
}
