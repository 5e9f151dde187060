/**
 * ringtrain/tfjs under Node and Deno: everything of index.ts, with an init()
 * that brings the `ws` WebSocket and @roamhq/wrtc, and that finds the server
 * in RINGTRAIN_SERVER when none is given (the `ringtrain launch` launcher sets it).
 */
import process from 'node:process';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { init as initSession, type InitOptions, type Session } from '../distributed/session.node.ts';
import { setDefaultRing } from './ring.ts';

export * from './index.ts';

import { JOB_ENV, SERVER_ENV, TOKEN_ENV } from './env.ts';
export * from './env.ts';

export async function init(o: Partial<InitOptions> = {}): Promise<Session> {
  const server = o.server ?? process.env[SERVER_ENV];
  const job = o.job ?? process.env[JOB_ENV];
  const token = o.token ?? process.env[TOKEN_ENV];
  for (const [value, key, env] of [[server, 'server', SERVER_ENV], [job, 'job', JOB_ENV], [token, 'token', TOKEN_ENV]] as const) {
    if (!value) throw new RingtrainError(ErrorCode.InvalidArgument, `init: no ${key}; pass { ${key} } or set ${env} (ringtrain launch sets it for its workers)`);
  }
  const session = await initSession({ ...o, server: server!, job: job!, token: token! });
  setDefaultRing(session);
  return session;
}
