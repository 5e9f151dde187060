/**
 * The real processes of the NAT-traversal tests, each started inside one of
 * the topology's namespaces: coturn in its REST-credential mode (as the README
 * tells users to run it), `ringtrain server`, `ringtrain worker` under Deno.
 * Every process started here is killed by `killAll` (through its ChildProcess,
 * which knows whether it already exited: no pid is reused by mistake).
 */
import type { ChildProcess } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { forEachLine } from '../../src/core/lines.node.ts';
import { until } from '../support/workers.ts';
import type { Namespace } from './topology.ts';

export const TURN_PORT = 3478;

export interface Proc {
  child: ChildProcess;
  out: string;
  err: string;
  exit: Promise<number | null>;
  /** The JSON lines of its stdout, parsed. */
  lines: Record<string, unknown>[];
  /** What it logged so far (its stdout, or coturn's log file). */
  log(): string;
}

const started: ChildProcess[] = [];

export function start(ns: Namespace, cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  const child = ns.spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  started.push(child);
  const p: Proc = {
    child,
    out: '',
    err: '',
    lines: [],
    exit: new Promise((r) => child.on('exit', (code) => r(code))),
    log: () => p.out + p.err,
  };
  forEachLine(child.stdout!, (line) => {
    p.out += `${line}\n`;
    if (line.startsWith('{')) p.lines.push(JSON.parse(line));
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (p.err += d));
  return p;
}

/** Kills one process `start` started and waits until it has exited. */
export async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await p.exit;
}

/** Kills every process `start` started and waits until each has exited. */
export async function killAll(): Promise<void> {
  await Promise.all(
    started.splice(0).map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGKILL');
        }),
    ),
  );
}

/** One STUN Binding request; true when the server answers it (used to wait until coturn listens). */
function stunAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    const id = randomBytes(12);
    const done = (ok: boolean): void => {
      clearTimeout(t);
      s.close();
      resolve(ok);
    };
    const t = setTimeout(() => done(false), 200);
    s.on('message', (m) => done(m.readUInt16BE(0) === 0x0101 && m.subarray(8, 20).equals(id)));
    s.on('error', () => done(false));
    s.send(Buffer.concat([Buffer.from([0, 1, 0, 0, 0x21, 0x12, 0xa4, 0x42]), id]), port, host);
  });
}

/** Starts coturn on `ip` inside `ns` with `secret` as its static-auth-secret (state kept in `dir`), and waits until it answers STUN. */
export async function startCoturn(ns: Namespace, ip: string, secret: string, dir: string): Promise<Proc> {
  const conf = [
    `listening-ip=${ip}`,
    `relay-ip=${ip}`,
    `listening-port=${TURN_PORT}`,
    'min-port=50000',
    'max-port=50200',
    'use-auth-secret',
    `static-auth-secret=${secret}`,
    'realm=ringtrain.test',
    'no-tls',
    'no-dtls',
    'no-cli',
    `pidfile=${join(dir, 'turn.pid')}`,
    `userdb=${join(dir, 'turndb')}`,
    `log-file=${join(dir, 'turn.log')}`,
    'simple-log',
    'verbose',
  ];
  writeFileSync(join(dir, 'turnserver.conf'), `${conf.join('\n')}\n`);
  const coturn = start(ns, 'turnserver', ['-c', join(dir, 'turnserver.conf')]);
  // coturn's stdout is block-buffered into a pipe; its log file is written line by line.
  coturn.log = () => (existsSync(join(dir, 'turn.log')) ? readFileSync(join(dir, 'turn.log'), 'utf8') : '');
  const deadline = Date.now() + 30_000;
  while (!(await stunAnswers(ip, TURN_PORT))) {
    if (Date.now() > deadline)
      throw new Error(
        `coturn did not answer STUN within 30 s; it said: ${coturn.log().slice(-1500)}${coturn.err.slice(-500)}`,
      );
  }
  return coturn;
}

/** coturn's lines that tell why a relay failed, for a failure message. */
export function coturnTrouble(coturn: Proc): string {
  return coturn
    .log()
    .split('\n')
    .filter((l) => /error|refus|denied|quota|closed|timeout/i.test(l))
    .slice(-15)
    .join('\n');
}

/** The TURN REST usernames coturn saw allocate a relay (`<expiry>:<peer id>`), and the credential each one's password is. */
export function allocatedCredentials(coturn: Proc, secret: string): { username: string; credential: string }[] {
  const users = new Set<string>();
  for (const m of coturn.log().matchAll(/user <([^>]+)>: incoming packet ALLOCATE processed, success/g))
    users.add(m[1]);
  return [...users].map((username) => ({
    username,
    credential: createHmac('sha1', secret).update(username).digest('base64'),
  }));
}

/** Starts `ringtrain server` inside `ns` on `ip:port`, for job `job`, and waits until it listens. */
export async function startSignaling(ns: Namespace, ip: string, port: number, args: string[]): Promise<Proc> {
  const server = start(ns, process.execPath, [
    'bin/ringtrain.js',
    'server',
    '--host',
    ip,
    '--port',
    String(port),
    ...args,
  ]);
  await until(
    () => server.out.includes('listening on') || server.child.exitCode !== null,
    'the signaling server to listen',
    60_000,
    () => server.err.slice(-1000),
  );
  if (server.child.exitCode !== null)
    throw new Error(`the signaling server exited (${server.child.exitCode}): ${server.err}`);
  return server;
}
