/**
 * The STUN/TURN flags of `ringtrain server` and `ringtrain run`: which servers
 * a job's peers use to meet across NATs, and the file holding the secret the
 * signaling server shares with the TURN server (coturn's static-auth-secret),
 * from which it mints each peer's short-lived credentials. The secret is read
 * from a file, never from argv (which `ps` shows to every user).
 */
import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { DEFAULT_TURN_TTL_S, checkIceOptions, type IceOptions } from '../../../server/ice.ts';

function invalid(message: string): RingtrainError {
  return new RingtrainError(ErrorCode.InvalidArgument, message);
}

/** Adds --stun, --turn, --turn-secret-file, --turn-ttl and --ice-transport to `cmd`. */
export function addIceOptions(cmd: Command): Command {
  return cmd
    .option(
      '--stun <url...>',
      'STUN server(s) peers use to learn their public address, like stun:stun.example.org:3478',
    )
    .option(
      '--turn <url...>',
      'TURN server(s) that relay between peers no direct path joins (NATs, firewalls), like turn:turn.example.org:3478 (needs --turn-secret-file)',
    )
    .option(
      '--turn-secret-file <path>',
      "file holding the TURN server's shared secret (coturn: use-auth-secret, static-auth-secret); each peer gets its own short-lived credentials made from it",
    )
    .option(
      '--turn-ttl <seconds>',
      'how long the TURN credentials handed to a peer stay valid',
      String(DEFAULT_TURN_TTL_S),
    )
    .addOption(
      new Option(
        '--ice-transport <policy>',
        'all: any path; relay: only through the TURN server (hides peer addresses from each other)',
      )
        .choices(['all', 'relay'])
        .default('all'),
    );
}

/** A secret file holds the secret alone; a trailing newline (as editors and `echo` write) is not part of it. */
function readSecretFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw invalid(`cannot read --turn-secret-file ${path}: ${(err as Error).message}`);
  }
  const secret = text.replace(/\r?\n$/, '');
  if (!secret || /[\r\n]/.test(secret))
    throw invalid(
      `--turn-secret-file ${path} must hold the secret alone on one line, got ${secret ? 'several lines' : 'nothing'}.`,
    );
  return secret;
}

/** The server's ICE options from the parsed flags (commander's camelCase keys); checked, with the secret read. */
export function iceFromFlags(raw: Record<string, unknown>): IceOptions {
  const list = (v: unknown): string[] | undefined =>
    v === undefined ? undefined : (Array.isArray(v) ? v : [v]).map(String);
  const ttl = Number(raw.turnTtl ?? DEFAULT_TURN_TTL_S);
  if (!Number.isInteger(ttl) || ttl < 60)
    throw invalid(`--turn-ttl must be a whole number of seconds, at least 60 (got ${JSON.stringify(raw.turnTtl)}).`);
  const turn = list(raw.turn);
  if (turn?.length && raw.turnSecretFile === undefined) {
    throw invalid(
      "--turn needs --turn-secret-file: the file holding the TURN server's static-auth-secret, from which each peer's credentials are made.",
    );
  }
  const policy = raw.iceTransport === 'relay' ? 'relay' : 'all';
  if (policy === 'relay' && !turn?.length)
    throw invalid('--ice-transport relay needs a TURN server to relay through (--turn URL).');
  const ice: IceOptions = {
    stun: list(raw.stun),
    turn,
    turnSecret: raw.turnSecretFile === undefined ? undefined : readSecretFile(String(raw.turnSecretFile)),
    credentialTtlS: ttl,
    transportPolicy: policy,
  };
  checkIceOptions(ice);
  return ice;
}
