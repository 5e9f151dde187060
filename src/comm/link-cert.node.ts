/**
 * The certificate a worker serves its TCP links with under `--link-tls`: a
 * fresh self-signed P-256 certificate made at start (the `openssl` command,
 * as the project's test certificates are), never written anywhere but a
 * temporary directory that is removed at once. Nobody trusts it by a CA:
 * its SHA-256 fingerprint travels in the hello, through the signaling
 * server, and the dialer pins it.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export interface LinkCertificate {
  key: string;
  cert: string;
  /** SHA-256 of the certificate, as X509Certificate.fingerprint256 writes it (AB:CD:…). */
  fingerprint: string;
}

export function makeLinkCertificate(): LinkCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-link-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        'key.pem',
        '-out',
        'cert.pem',
        '-days',
        '7',
        '-subj',
        '/CN=ringtrain link',
      ],
      { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    return {
      key: readFileSync(join(dir, 'key.pem'), 'utf8'),
      cert,
      fingerprint: new X509Certificate(cert).fingerprint256,
    };
  } catch (e) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--link-tls needs the openssl command to make this worker's certificate, and it failed: ${(e as Error).message.split('\n')[0]}; install openssl, or leave --link-tls off`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
