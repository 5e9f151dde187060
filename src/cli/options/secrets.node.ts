/**
 * Where the CLI finds secrets, so they stay out of argv (which every user on
 * the machine can read with `ps`): a job's token from RINGTRAIN_TOKEN or a
 * file, and the PEM files of a TLS certificate. `--token` still works, with a
 * warning.
 */
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

/** The environment variable a worker reads the job's token from (`ringtrain run` sets it for its workers). */
export const TOKEN_ENV = 'RINGTRAIN_TOKEN';

export const TOKEN_IN_ARGV_WARNING = `ringtrain: warning: --token is visible to every user of this machine (ps); use ${TOKEN_ENV}=… or --token-file PATH instead`;

function invalid(message: string): RingtrainError {
  return new RingtrainError(ErrorCode.InvalidArgument, message);
}

/** A token file holds the token alone; a trailing newline (as editors and `echo` write) is not part of it. */
export function readTokenFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw invalid(`cannot read --token-file ${path}: ${(err as Error).message}`);
  }
  const token = text.replace(/\r?\n$/, '');
  if (!token || /[\s]/.test(token))
    throw invalid(
      `--token-file ${path} must hold the token alone on one line (no spaces), got ${token ? 'several words' : 'nothing'}.`,
    );
  return token;
}

/**
 * The job token from, in order: --token (warned about), --token-file, RINGTRAIN_TOKEN.
 * Undefined when none is given (the caller says whether that is an error).
 */
export function tokenFrom(o: { token?: string; tokenFile?: string }, warn: (line: string) => void): string | undefined {
  if (o.token !== undefined && o.tokenFile !== undefined)
    throw invalid('give the token once: --token-file or --token, not both.');
  if (o.token !== undefined) {
    warn(TOKEN_IN_ARGV_WARNING);
    return o.token;
  }
  if (o.tokenFile !== undefined) return readTokenFile(o.tokenFile);
  const fromEnv = process.env[TOKEN_ENV];
  return fromEnv ? fromEnv : undefined;
}

/** The PEM certificate and key of --tls-cert/--tls-key, read now so a bad path stops the command before it listens. */
export function readTlsFiles(
  certPath: string | undefined,
  keyPath: string | undefined,
): { cert: Buffer; key: Buffer; certPath: string } | undefined {
  if (certPath === undefined && keyPath === undefined) return undefined;
  if (certPath === undefined || keyPath === undefined)
    throw invalid('TLS needs both --tls-cert (PEM certificate chain) and --tls-key (PEM private key).');
  const read = (flag: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw invalid(`cannot read ${flag} ${path}: ${(err as Error).message}`);
    }
  };
  const cert = read('--tls-cert', certPath);
  const key = read('--tls-key', keyPath);
  if (!cert.includes('-----BEGIN CERTIFICATE-----'))
    throw invalid(`--tls-cert ${certPath} is not a PEM certificate (no BEGIN CERTIFICATE line).`);
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key.toString('latin1')))
    throw invalid(`--tls-key ${keyPath} is not a PEM private key (no BEGIN … PRIVATE KEY line).`);
  return { cert, key, certPath };
}
