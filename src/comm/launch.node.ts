import { spawn, type ChildProcess } from 'node:child_process';
import { forEachLine } from '../core/lines.node.ts';
import { ensureRuntimeDir } from '../core/runtime-dir.node.ts';
import { findDeno } from '../core/find-deno.node.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../core/package-root.node.ts';
import { nodeRuntimeFlags } from '../core/node-flags.node.ts';

/**
 * Starts a local ring: one process per rank, Node or Deno, each running
 * `script` with `--dir DIR --rank R --size N` plus extra arguments. The
 * processes meet through a FileStore in a fresh temp dir and talk WebRTC.
 * The caller must already be inside a network namespace (scripts/in-netns.sh).
 */
export type PeerRuntime = 'node' | 'deno';

const ROOT = PACKAGE_ROOT;

export interface PeerProcess {
  rank: number;
  runtime: PeerRuntime;
  child: ChildProcess;
  /** stdout lines so far. */
  lines: string[];
  stderr: string[];
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** Resolves with the first stdout line matching `pred` (or rejects when the process ends without one). */
  waitFor(pred: (line: string) => boolean): Promise<string>;
}

export interface LocalRing {
  dir: string;
  peers: PeerProcess[];
  /** Kill every process still running and remove the temp dir. */
  stop(): void;
}

export function commandFor(runtime: PeerRuntime, script: string): [string, string[]] {
  if (runtime === 'deno') return [findDeno() ?? 'deno', ['run', '-A', '--quiet', script]];
  // RINGTRAIN_PEER_NODE_ARGS lets one profile peers (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
  const extra = (process.env.RINGTRAIN_PEER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  return [process.execPath, [...nodeRuntimeFlags(), ...extra, '--import', 'tsx', script]];
}

function withRuntimeDir(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  ensureRuntimeDir(env);
  return env;
}

export function launchLocalRing(o: {
  size: number;
  script: string;
  runtimes?: PeerRuntime[];
  args?: (rank: number) => string[];
  env?: Record<string, string>;
}): LocalRing {
  if (process.env.RINGTRAIN_NETNS !== '1') {
    throw new Error(
      'launchLocalRing: WebRTC peers must run inside a private network namespace; run under scripts/in-netns.sh',
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-ring-'));
  const peers = Array.from({ length: o.size }, (_, rank): PeerProcess => {
    const runtime = o.runtimes?.[rank] ?? 'node';
    const [cmd, pre] = commandFor(runtime, o.script);
    const child = spawn(
      cmd,
      [...pre, '--dir', dir, '--rank', String(rank), '--size', String(o.size), ...(o.args?.(rank) ?? [])],
      {
        cwd: ROOT,
        // Quiet children: no Vulkan XDG_RUNTIME_DIR warning (runtime-dir.node.ts), no colour codes in the lines a test
        // reads.
        env: withRuntimeDir({ ...process.env, NO_COLOR: '1', ...o.env }),
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const lines: string[] = [];
    const stderr: string[] = [];
    const watchers: { pred: (l: string) => boolean; resolve: (l: string) => void }[] = [];
    forEachLine(child.stdout!, (line) => {
      lines.push(line);
      for (const w of [...watchers]) if (w.pred(line)) watchers.splice(watchers.indexOf(w), 1) && w.resolve(line);
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => stderr.push(d));
    const exited = new Promise<{ code: number | null; signal: string | null }>((res) =>
      child.on('exit', (code, signal) => res({ code, signal })),
    );
    return {
      rank,
      runtime,
      child,
      lines,
      stderr,
      exited,
      waitFor: (pred) =>
        new Promise((res, rej) => {
          const seen = lines.find(pred);
          if (seen) return res(seen);
          watchers.push({ pred, resolve: res });
          void exited.then(({ code, signal }) =>
            rej(
              new Error(
                `rank ${rank} (${runtime}) ended (code ${code}, signal ${signal}) without the expected line; stderr: ${stderr.join('').slice(-2000)}`,
              ),
            ),
          );
        }),
    };
  });
  return {
    dir,
    peers,
    stop() {
      for (const p of peers) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
