/**
 * A test certificate authority and a server certificate for 127.0.0.1 and
 * localhost, made with the `openssl` CLI at test time (nothing secret is kept
 * in the repository). Clients trust `ca` (ws's `ca` option, NODE_EXTRA_CA_CERTS,
 * DENO_CERT); the server serves `cert` (the leaf, then the CA) with `key`.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCert {
  dir: string;
  caPath: string;
  certPath: string;
  keyPath: string;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
  dispose(): void;
}

export function makeTestCert(): TestCert {
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-tls-'));
  const p = (name: string) => join(dir, name);
  const openssl = (...args: string[]) =>
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca-key.pem',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=ringtrain test CA',
  );
  openssl('req', ...ec, '-keyout', 'key.pem', '-out', 'server.csr', '-subj', '/CN=localhost');
  writeFileSync(
    p('ext.cnf'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-out',
    'leaf.pem',
    '-days',
    '2',
    '-extfile',
    'ext.cnf',
  );
  writeFileSync(p('cert.pem'), Buffer.concat([readFileSync(p('leaf.pem')), readFileSync(p('ca.pem'))]));
  return {
    dir,
    caPath: p('ca.pem'),
    certPath: p('cert.pem'),
    keyPath: p('key.pem'),
    ca: readFileSync(p('ca.pem')),
    cert: readFileSync(p('cert.pem')),
    key: readFileSync(p('key.pem')),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}
