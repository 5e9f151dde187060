import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { resolveUnder } from '../../server/static.ts';
import { RawPeer, jobSpec, rawGet } from './helpers.ts';
import { joinMessage } from '../support/signing-key.ts';

describe('signaling server: HTTP side', () => {
  let server: RunningServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ringtrain-static-'));
    const site = join(dir, 'site');
    mkdirSync(join(site, 'assets'), { recursive: true });
    writeFileSync(join(site, 'index.html'), '<!doctype html><title>ringtrain page</title>');
    writeFileSync(join(site, 'assets', 'app.js'), 'console.log("page");');
    writeFileSync(join(dir, 'secret.txt'), 'TOP SECRET');
    symlinkSync(join(dir, 'secret.txt'), join(site, 'link.txt'));
    server = await startServer({ staticDir: site, jobs: [jobSpec('alpha', 'ta'), jobSpec('beta', 'tb')] });
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves a job's data file to token holders only, and says so when it was not given the file", async () => {
    const bytes = new TextEncoder().encode('some text\n');
    const sha = createHash('sha256').update(bytes).digest('hex');
    const missing = 'f'.repeat(64);
    const job = (id: string, textSha256: string, isPublic: boolean) => {
      const spec = jobSpec(id, `tok-${id}`);
      return {
        ...spec,
        config: {
          ...spec.config,
          ...(isPublic ? { public: true } : {}),
          model: 'transformer',
          hyperparameters: { text: 'a.txt', textSha256, context: 4 },
        },
      };
    };
    const s = await startServer({
      staticDir: null,
      jobs: [job('open', sha, true), job('lost', missing, false)],
      files: [bytes],
    });
    try {
      const get = (id: string, file: string, token?: string) =>
        fetch(
          `${s.url}/api/jobs/${id}/files/${file}`,
          token ? { headers: { authorization: `Bearer ${token}` } } : undefined,
        );
      // A public job may be watched by anyone; its data goes to its peers only.
      const anonymous = await get('open', sha);
      expect(anonymous.status).toBe(403);
      expect(((await anonymous.json()) as { error: string }).error).toContain(
        "the files of job 'open' go to its peers only",
      );
      expect(new Uint8Array(await (await get('open', sha, 'tok-open')).arrayBuffer())).toEqual(bytes);
      const notGiven = await get('lost', missing, 'tok-lost');
      expect(notGiven.status).toBe(404);
      expect(((await notGiven.json()) as { error: string }).error).toContain(
        `this server was not given the file with SHA-256 ${missing} that job 'lost' trains on; start it with the file`,
      );
    } finally {
      await s.close();
    }
  });

  it('answers /healthz with 200', async () => {
    const res = await fetch(`${server.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok\n');
  });

  it('serves the page with content types', async () => {
    const index = await fetch(`${server.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toContain('text/html');
    expect(await index.text()).toContain('ringtrain page');
    const js = await fetch(`${server.url}/assets/app.js`);
    expect(js.headers.get('content-type')).toContain('text/javascript');
    expect(await js.text()).toBe('console.log("page");');
    expect((await fetch(`${server.url}/missing.js`)).status).toBe(404);
    expect((await fetch(`${server.url}/`, { method: 'POST', body: 'x' })).status).toBe(405);
  });

  it('refuses every way out of the page folder', async () => {
    for (const path of [
      '/../secret.txt',
      '/assets/../../secret.txt',
      '/%2e%2e/secret.txt',
      '/..%2fsecret.txt',
      '/..%5csecret.txt',
      '/%2e%2e%2f%2e%2e%2fetc/passwd',
      '/link.txt',
      '/a%00b',
      '/%E0%A4%A',
    ]) {
      const res = await rawGet(server.port, path);
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.body, path).not.toContain('TOP SECRET');
    }
    expect(resolveUnder('/srv/page', '/../x')).toBeNull();
    expect(resolveUnder('/srv/page', '/a/../b.js')).toBe('/srv/page/b.js');
    expect(resolveUnder('/srv/page', '/%2e%2e/x')).toBeNull();
  });

  it('says the page is not built when its folder is missing', async () => {
    const s = await startServer({ staticDir: join(dir, 'not-built') });
    try {
      const res = await fetch(`${s.url}/`);
      expect(res.status).toBe(404);
      expect(await res.text()).toContain('npm run build:page');
    } finally {
      await s.close();
    }
  });

  it('answers malformed HTTP and upgrade requests with 4xx and keeps serving', async () => {
    const first = (text: string) =>
      new Promise<string>((resolve) => {
        const sock = netConnect(server.port, '127.0.0.1', () => sock.write(text));
        let out = '';
        sock.on('data', (d) => (out += d));
        sock.on('close', () => resolve(out.split('\r\n')[0]));
        sock.on('error', () => resolve('socket error'));
      });
    const upgrade =
      'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
    expect(await first(`GET http://[ HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`)).toBe('HTTP/1.1 404 Not Found');
    expect(await first('GET http://[ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).toBe(
      'HTTP/1.1 400 Bad Request',
    );
    expect(await first('GET /api/jobs/%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).toBe(
      'HTTP/1.1 400 Bad Request',
    );
    expect(await first('GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n')).toBe(
      'HTTP/1.1 400 Bad Request',
    );
    expect(await first('\u0000\u0001garbage\r\n\r\n')).toBe('');
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('exports Prometheus metrics: jobs, peers, messages and errors by code', async () => {
    const a = await RawPeer.join(server.wsUrl, 'alpha', 'ta', 'a');
    const b = await RawPeer.join(server.wsUrl, 'alpha', 'ta', 'b');
    await a.membership(2);
    a.sendJson({ type: 'signal', epoch: 2, to: 1, data: { x: 1 } });
    await b.waitFor((m) => m.type === 'signal', 'signal');
    a.sendJson({ type: 'nonsense' });
    await a.error('unknown-type');
    const bad = await RawPeer.open(server.wsUrl);
    bad.sendJson(joinMessage({ job: 'alpha', token: 'wrong' }));
    await bad.closed;
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain('ringtrain_jobs 2');
    expect(text).toContain('ringtrain_peers{job="alpha"} 2');
    expect(text).toContain('ringtrain_peers{job="beta"} 0');
    expect(text).toContain('ringtrain_membership_epoch{job="alpha"} 2');
    expect(text).toContain('ringtrain_signals_relayed{job="alpha"} 1');
    expect(text).toMatch(/ringtrain_messages_total\{direction="in",type="signal"\} 1\b/);
    expect(text).toMatch(/ringtrain_messages_total\{direction="in",type="other"\} 1\b/);
    expect(text).toMatch(/ringtrain_messages_total\{direction="out",type="membership"\} [3-9]/);
    expect(text).toMatch(/ringtrain_errors_total\{code="unknown-type"\} 1\b/);
    expect(text).toMatch(/ringtrain_errors_total\{code="bad-token"\} 1\b/);
    expect(text).toMatch(/# TYPE ringtrain_connections gauge/);
    a.close();
    b.close();
  });
});
