/**
 * The launcher's local workers: each is `ringtrain worker --events` in a child
 * process (Node or Deno) whose JSON lines on stdout go to the launcher's
 * listener and whose last stderr lines are kept to explain a failure. Their
 * timeline parts are merged into one file at the end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import process from 'node:process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { forEachLine } from '../../core/lines.node.ts';
import { isModelFile } from '../../engine/define.ts';
import { mergeTraces, type TraceEvent } from '../../distributed/observe/timeline.ts';
import type { JobSpec } from '../../signaling/protocol.ts';
import type { RunningServer } from '../../../server/index.ts';
import { cliCommand } from '../host.node.ts';
import { prefixedChildEnv, spawnFailure, stripAnsi } from '../child-output.node.ts';
import type { ScaledWorker } from './discovery.node.ts';
import type { RunOptions } from '../options/run-options.node.ts';
import { TOKEN_ENV } from '../options/secrets.node.ts';

export interface WorkerState extends ScaledWorker {
  index: number;
  child: ChildProcess;
  rank?: number;
  result?: Record<string, unknown>;
  stderrTail: string[];
  exit?: Promise<number>;
}

export function startWorker(
  index: number,
  server: RunningServer,
  job: JobSpec,
  o: RunOptions,
  runtime: 'node' | 'deno',
  onLine: (w: WorkerState, msg: Record<string, unknown>) => void,
): WorkerState {
  // The token goes by environment, never argv (which `ps` shows to everyone).
  const given = [
    ...cliCommand(runtime),
    'worker',
    '--server',
    server.url,
    '--job',
    job.id,
    '--name',
    `${runtime}-${index}`,
    '--events',
    '--runtime',
    runtime,
  ];
  // A worker loads a model file only from its own command line, never on the job's word.
  if (isModelFile(o.model)) given.push('--model', resolve(o.model));
  if (o.save) given.push('--save', o.save);
  if (o.resume) given.push('--resume', o.resume);
  if (o.initFrom) given.push('--init-from', resolve(o.initFrom));
  if (o.overwrite) given.push('--overwrite');
  // --transport is the job's (links.transport): every worker reads it from the job, as a hand-started one does.
  if (o.linkTls) given.push('--link-tls');
  if (o.timeline) given.push('--timeline', `${o.timeline}.part${index}`);
  // A table and its labels as absolute paths, like the text: each worker checks their hashes against the job's.
  if (o.data) given.push('--data', o.tableSha256 !== undefined ? resolve(o.data) : o.data);
  if (o.labels) given.push('--labels', resolve(o.labels));
  // The same text for every local worker; each checks its hash against the job's before it joins.
  if (o.text) given.push('--text', o.text.startsWith('@') ? o.text : resolve(o.text));
  const [exe, ...args] = o.workerCommand ? o.workerCommand(index, given) : given;
  const env: NodeJS.ProcessEnv = { ...prefixedChildEnv(process.env), [TOKEN_ENV]: job.token };
  // A self-signed certificate is its own authority: the workers trust it (Node and Deno read these).
  if (o.tls) Object.assign(env, { NODE_EXTRA_CA_CERTS: o.tls.certPath, DENO_CERT: o.tls.certPath });
  const child = spawn(exe, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const w: WorkerState = { index, child, stderrTail: [], exited: false, training: false };
  forEachLine(child.stdout!, (line) => {
    if (!line.startsWith('{')) return;
    try {
      onLine(w, JSON.parse(line));
    } catch {
      // not one of ours
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    for (const line of chunk.split('\n'))
      if (line.trim() && !line.includes('XDG_RUNTIME_DIR is invalid')) w.stderrTail.push(stripAnsi(line));
    if (w.stderrTail.length > 40) w.stderrTail.splice(0, w.stderrTail.length - 40);
  });
  w.exit = new Promise<number>((resolve) => {
    child.on('error', (err) => {
      w.stderrTail.push(spawnFailure(exe, err));
      resolve(127);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  }).then((code) => {
    w.exited = true;
    return code;
  });
  return w;
}

export function writeTimeline(path: string, parts: number): void {
  const traces: TraceEvent[][] = [];
  for (let i = 0; i < parts; i++) {
    const part = `${path}.part${i}`;
    if (!existsSync(part)) continue;
    traces.push(JSON.parse(readFileSync(part, 'utf8')) as TraceEvent[]);
    rmSync(part);
  }
  writeFileSync(path, JSON.stringify(mergeTraces(traces)));
}
