import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { connect } from '../../src/signaling/client.node.ts';
import { jobSpec } from '../server/helpers.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const deno = `${root}node_modules/.bin/deno`;

function runDeno(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(deno, ['run', '-A', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('signaling client under Deno (global WebSocket)', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ staticDir: null, jobs: [jobSpec('mixed', 'tm', 2, 2), jobSpec('doom', 'td', 2, 2)] });
  });
  afterAll(async () => {
    await server.close();
  });

  it('a Deno peer and a Node peer join one job and exchange signals', async () => {
    expect(existsSync(deno), `Deno is missing at ${deno}: run npm install (the deno package ships it)`).toBe(true);
    const node = await connect(server.url, { job: 'mixed', token: 'tm', name: 'node-peer' });
    try {
      const answer = new Promise<[number, unknown]>((resolve) => {
        node.on('membership', (m) => {
          if (!m.ready) return;
          const s = node.signaler(m.epoch);
          s.onSignal((from, data) => resolve([from, data]));
          s.send(1, { offer: 'from node' });
        });
      });
      const run = runDeno(['test/signaling/fixtures/deno-peer.ts', server.url, 'mixed', 'tm']);
      const [from, data] = await answer;
      expect(from).toBe(1);
      expect(data).toEqual({ answer: 'from deno', echo: { offer: 'from node' } });
      const { code, stdout, stderr } = await run;
      expect(code, stderr).toBe(0);
      const report = JSON.parse(stdout.trim().split('\n').pop() ?? '{}');
      expect(report).toMatchObject({
        runtime: 'deno',
        rank: 1,
        size: 2,
        received: { from: 0, data: { offer: 'from node' } },
      });
      const left = await node.nextMembership((m) => m.size === 1);
      expect(left.change).toMatchObject({ kind: 'leave', name: 'deno-peer' });
    } finally {
      await node.leave();
    }
  });

  it('a peer process killed with SIGKILL is noticed and announced by name', async () => {
    const node = await connect(server.url, { job: 'doom', token: 'td', name: 'survivor' });
    try {
      const child = spawn(deno, ['run', '-A', 'test/signaling/fixtures/deno-hang.ts', server.url, 'doom', 'td'], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal)));
      const joined = await node.nextMembership((m) => m.size === 2, 30_000);
      expect(joined.peers[1].name).toBe('doomed');
      for (let i = 0; i < 1000 && !out.includes('\n'); i++) await new Promise((r) => setTimeout(r, 10));
      // The process we are about to kill is the peer the server named.
      expect(JSON.parse(out)).toEqual({ peerId: joined.peers[1].peerId, rank: 1 });
      const left = new Promise((resolve) => node.on('peer-left', resolve));
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      expect(await left).toMatchObject({
        peerId: joined.peers[1].peerId,
        name: 'doomed',
        rank: 1,
        reason: 'disconnected',
      });
      expect(node.membership).toMatchObject({ size: 1, rank: 0 });
    } finally {
      await node.leave();
    }
  });
});
