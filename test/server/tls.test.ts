/**
 * TLS: the server over https and wss with a certificate made by openssl at
 * test time; the real signaling client joins over wss trusting the test CA;
 * a client that does not trust it, or speaks plain ws to the TLS port, gets nowhere.
 */
import { spawn } from 'node:child_process';
import { get } from 'node:https';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { connect } from '../../src/signaling/client.node.ts';
import type { WebSocketConstructor } from '../../src/signaling/client.ts';
import { describeTlsFailure } from '../../src/signaling/socket.ts';
import { RawPeer, jobSpec } from './helpers.ts';
import { makeTestCert, type TestCert } from './test-cert.ts';

function httpsGet(
  url: string,
  ca: Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, { ca, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

describe('signaling server over TLS', () => {
  let cert: TestCert;
  let server: RunningServer;
  beforeAll(async () => {
    cert = makeTestCert();
    server = await startServer({
      staticDir: null,
      tls: { cert: cert.cert, key: cert.key },
      jobs: [jobSpec('secure', 'tls-token', 2, 2)],
    });
  });
  afterAll(async () => {
    await server?.close();
    cert?.dispose();
  });

  it('serves https and wss, and two clients that trust the CA join one job', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(server.wsUrl).toMatch(/^wss:\/\/127\.0\.0\.1:\d+\/ws$/);
    expect(await httpsGet(`${server.url}/healthz`, cert.ca)).toEqual({ status: 200, body: 'ok\n' });
    const info = await httpsGet(`${server.url}/api/jobs/secure`, cert.ca, { authorization: 'Bearer tls-token' });
    expect(JSON.parse(info.body)).toMatchObject({ id: 'secure', size: 0 });

    const TrustingWs = class extends WebSocket {
      constructor(url: string) {
        super(url, { ca: cert.ca });
      }
    } as unknown as WebSocketConstructor;
    const a = await connect(server.url, { job: 'secure', token: 'tls-token', name: 'a', WebSocket: TrustingWs });
    const b = await connect(server.url, { job: 'secure', token: 'tls-token', name: 'b', WebSocket: TrustingWs });
    try {
      expect(a.url).toMatch(/^wss:/);
      expect(await a.waitForReady(15_000)).toMatchObject({ size: 2, ready: true });
      expect(b.rank).toBe(1);
    } finally {
      await a.leave();
      await b.leave();
    }
  });

  it('refuses a client that does not trust the certificate, and plain ws on the TLS port', async () => {
    await expect(RawPeer.open(server.wsUrl)).rejects.toThrow(/certificate/i);
    await expect(RawPeer.open(server.wsUrl.replace('wss:', 'ws:'))).rejects.toThrow();
    expect(await httpsGet(`${server.url}/healthz`, cert.ca)).toMatchObject({ status: 200 });
  });

  it('a client that does not trust the certificate is told so, with what to do, not that the server is down', async () => {
    const err = await connect(server.url, { job: 'secure', token: 'tls-token', name: 'untrusting' }).then(
      () => null,
      (e: unknown) => e as Error & { code: string },
    );
    expect(err?.code).toBe('ERR_SIGNALING');
    expect(err?.message).toMatch(
      /the signaling server at wss:\/\/127\.0\.0\.1:\d+\/ws answered, but its TLS certificate is not signed by an authority this runtime trusts \((SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)[^)]*\): .*NODE_EXTRA_CA_CERTS=ca\.pem \(Node\) or DENO_CERT=ca\.pem \(Deno\)/,
    );
    expect(err?.message).not.toMatch(/is it running/);
  });

  it('a certificate that does not name the address connected to is named as such', async () => {
    const WrongName = class extends WebSocket {
      constructor(url: string) {
        super(url, { ca: cert.ca, servername: 'elsewhere.example' } as WebSocket.ClientOptions);
      }
    } as unknown as WebSocketConstructor;
    await expect(connect(server.url, { job: 'secure', token: 'tls-token', WebSocket: WrongName })).rejects.toThrow(
      /TLS certificate does not name the address connected to \(ERR_TLS_CERT_ALTNAME_INVALID/,
    );
  });

  it('names an expired certificate and what to do', () => {
    expect(
      describeTlsFailure('wss://h.example:8080/ws', { code: 'CERT_HAS_EXPIRED', message: 'certificate has expired' }),
    ).toBe(
      "the signaling server at wss://h.example:8080/ws answered, but its TLS certificate is expired or not yet valid (CERT_HAS_EXPIRED: certificate has expired): renew the server's certificate (ringtrain server --tls-cert), and check both machines' clocks",
    );
    expect(describeTlsFailure('ws://h.example:8080/ws', { code: 'CERT_HAS_EXPIRED' })).toBeNull();
    expect(
      describeTlsFailure('wss://h.example:8080/ws', { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' }),
    ).toBeNull();
  });

  it('a Deno worker that does not trust the certificate exits naming it and DENO_CERT', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, RINGTRAIN_TOKEN: 'tls-token' };
    delete env.DENO_CERT;
    delete env.NODE_EXTRA_CA_CERTS;
    const child = spawn(
      'node_modules/.bin/deno',
      ['run', '-A', 'src/cli/main.ts', 'worker', '--server', server.url, '--job', 'secure'],
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, stderr).toBe(1);
    expect(stderr).toMatch(/TLS certificate .*DENO_CERT=ca\.pem \(Deno\).*\[ERR_SIGNALING\]/);
    expect(stderr).not.toMatch(/is it running/);
  }, 120_000);

  it('refuses a key that does not belong to the certificate, naming the problem', async () => {
    const other = makeTestCert();
    try {
      await expect(startServer({ staticDir: null, tls: { cert: cert.cert, key: other.key } })).rejects.toThrow(
        /cannot serve TLS with this certificate and key/,
      );
    } finally {
      other.dispose();
    }
  });
});
