/**
 * Two peers that cannot reach each other (each in its own network namespace,
 * joined only to a relay namespace that does not forward) form a ring through
 * a real coturn and train a few MLP steps; without TURN the same peers fail
 * with an error that names the peer and says to configure --turn.
 * Everything runs as the real commands: coturn, `ringtrain server`, `ringtrain worker`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoveryArgs, requireNetns, until } from '../support/workers.ts';
import {
  TURN_PORT,
  coturnTrouble,
  killAll,
  start,
  startCoturn,
  startSignaling as startServerIn,
  type Proc,
} from './processes.ts';
import { makeTopology, type Topology } from './topology.ts';

const SECRET = randomBytes(18).toString('base64');
const TOKEN = randomBytes(12).toString('hex');
const STEPS = 3;

let topo: Topology;
let dir: string;
let coturn: Proc;

function startSignaling(port: number, extra: string[]): Promise<Proc> {
  return startServerIn(topo.relay, '0.0.0.0', port, [
    '--job',
    'nat',
    '--token-file',
    join(dir, 'token'),
    '--model',
    'mlp',
    '--batch',
    '16',
    '--steps',
    String(STEPS),
    '--min-peers',
    '2',
    '--max-peers',
    '2',
    '--no-static',
    ...extra,
  ]);
}

function startWorkers(port: number, timeoutMs: number): Proc[] {
  const args = [
    'worker',
    '--server',
    `http://${topo.relayIp}:${port}`,
    '--job',
    'nat',
    '--events',
    '--connect-timeout-ms',
    String(timeoutMs),
  ];
  const env = { RINGTRAIN_TOKEN: TOKEN };
  // Deno (wgpu + lavapipe) trains several times faster than Node's SwiftShader here: a Node peer's
  // final evaluation outlasted the ring's silence limit on this starved machine (seen), nothing to do with TURN.
  return [1, 2].map((i) =>
    start(
      topo.peers[i - 1],
      'node_modules/.bin/deno',
      ['run', '-A', 'src/cli/main.ts', ...args, '--name', `peer-${i}`, ...recoveryArgs()],
      env,
    ),
  );
}

/** Exit codes of `procs`; once one has exited, the others get `graceMs` before they are killed (a lone peer would wait for the ring forever). */
async function exits(procs: Proc[], graceMs: number): Promise<(number | null)[]> {
  await Promise.race(procs.map((p) => p.exit));
  await until(
    () => procs.every((p) => p.child.exitCode !== null || p.child.signalCode !== null),
    'the other workers to exit',
    graceMs,
  ).catch(() => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  });
  return Promise.all(procs.map((p) => p.exit));
}

beforeAll(async () => {
  requireNetns();
  dir = mkdtempSync(join(tmpdir(), 'ringtrain-turn-'));
  writeFileSync(join(dir, 'token'), `${TOKEN}\n`);
  writeFileSync(join(dir, 'turn-secret'), `${SECRET}\n`);
  topo = await makeTopology(2, 1);
  coturn = await startCoturn(topo.relay, topo.relayIp, SECRET, dir);
}, 120_000);

afterAll(async () => {
  await killAll();
  await topo?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('peers behind NATs', () => {
  it('form a ring through coturn and train, with TURN credentials in no public place', async () => {
    const port = 18081;
    const server = await startSignaling(port, [
      '--turn',
      `turn:${topo.relayIp}:${TURN_PORT}?transport=udp`,
      '--turn-secret-file',
      join(dir, 'turn-secret'),
      '--turn-ttl',
      '600',
      '--ice-transport',
      'relay',
    ]);
    const workers = startWorkers(port, 60_000);
    await until(
      () =>
        workers.every((w) => w.lines.some((l) => l.event === 'joined')) ||
        workers.some((w) => w.child.exitCode !== null),
      'both workers to join the ring',
      240_000,
    ).catch(() => undefined);
    // While they train: what the server shows holds no credential.
    const api = await (
      await fetch(`http://${topo.relayIp}:${port}/api/jobs/nat`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).text();
    const metrics = await (await fetch(`http://${topo.relayIp}:${port}/metrics`)).text();
    const codes = await exits(workers, 120_000);
    expect(codes, `${workers.map((w) => w.err).join('\n')}\ncoturn:\n${coturnTrouble(coturn)}`).toEqual([0, 0]);
    for (const w of workers) {
      const result = w.lines.find((l) => l.event === 'result') as { steps: number; size: number; stopped_by: unknown };
      expect(result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
    }
    expect(api).toContain('peer-1');
    const shown = [api, metrics, server.out, server.err, ...workers.flatMap((w) => [w.out, w.err])].join('\n');
    expect(shown).not.toContain(SECRET);
    expect(shown).not.toMatch(/"(credential|username)"/);
  }, 400_000);

  it('without TURN, fail with an error naming the peer and --turn, not a hang', async () => {
    const port = 18082;
    await startSignaling(port, []);
    const workers = startWorkers(port, 10_000);
    // The first peer to give up leaves the job; a peer still connecting then waits for a new
    // quorum (elastic membership), so only the peers that gave up on their own are judged.
    await exits(workers, 15_000);
    const gaveUp = workers.filter((w) => w.child.exitCode !== null);
    expect(gaveUp.length, workers.map((w) => w.err).join('\n')).toBeGreaterThan(0);
    for (const w of gaveUp) {
      expect(w.child.exitCode, w.err).not.toBe(0);
      expect(w.err).toMatch(/rank (\d) found no network path to rank (?!\1)\d: ICE was still/);
      expect(w.err).toContain('--turn turn:HOST:3478 --turn-secret-file');
      expect(w.err).toContain('[ERR_TRANSPORT]');
    }
  }, 400_000);
});
