/**
 * init() for a program that `ringtrain launch` starts (Node and Deno): what
 * the caller leaves out comes from the environment the launcher sets (the
 * server, the job, the token and the name it finds the worker's rank by), so
 * `await init()` needs no arguments there, as under horovodrun. The token
 * travels by environment because argv is visible to everyone in `ps`.
 */
import process from 'node:process';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { JOB_ENV, NAME_ENV, SERVER_ENV, TOKEN_ENV } from './launch-env.ts';
import { init, type InitOptions, type Session } from './session.node.ts';

export function initFromEnvironment(o: Partial<InitOptions> = {}): Promise<Session> {
  const server = o.server ?? process.env[SERVER_ENV];
  const job = o.job ?? process.env[JOB_ENV];
  const token = o.token ?? process.env[TOKEN_ENV];
  for (const [value, key, env] of [[server, 'server', SERVER_ENV], [job, 'job', JOB_ENV], [token, 'token', TOKEN_ENV]] as const) {
    if (!value) throw new RingtrainError(ErrorCode.InvalidArgument, `init: no ${key}; pass { ${key} } or set ${env} (ringtrain launch sets it for its workers)`);
  }
  return init({ ...o, server: server!, job: job!, token: token!, name: o.name ?? process.env[NAME_ENV] });
}
