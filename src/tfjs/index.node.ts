/**
 * ringtrain/tfjs under Node and Deno: everything of index.ts, with an init()
 * that brings the `ws` WebSocket and @roamhq/wrtc, and that finds the server
 * in RINGTRAIN_SERVER when none is given (the `ringtrain launch` launcher sets it).
 */
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { EventBus } from '../core/events.ts';
import { init as initSession, type InitOptions, type Session } from '../distributed/session.node.ts';
import { stallReporter } from '../distributed/stall.ts';
import { TimelineRecorder } from '../distributed/timeline.ts';
import { setDefaultRing } from './ring.ts';

export * from './index.ts';

import { JOB_ENV, NAME_ENV, SERVER_ENV, TIMELINE_ENV, TOKEN_ENV } from './env.ts';
export * from './env.ts';

/**
 * Besides joining: the stall inspector's lines go to stderr (the launcher
 * prefixes them with the worker's rank), and when the launcher was given
 * --timeline, this rank's events are recorded and written when the session
 * closes (the launcher merges the parts).
 */
export async function init(o: Partial<InitOptions> = {}): Promise<Session> {
  const server = o.server ?? process.env[SERVER_ENV];
  const job = o.job ?? process.env[JOB_ENV];
  const token = o.token ?? process.env[TOKEN_ENV];
  for (const [value, key, env] of [[server, 'server', SERVER_ENV], [job, 'job', JOB_ENV], [token, 'token', TOKEN_ENV]] as const) {
    if (!value) throw new RingtrainError(ErrorCode.InvalidArgument, `init: no ${key}; pass { ${key} } or set ${env} (ringtrain launch sets it for its workers)`);
  }
  const events = o.events ?? new EventBus();
  const sayStall = stallReporter((line) => process.stderr.write(`ringtrain: ${line}\n`));
  events.on((e) => {
    if (e.type === 'stall') sayStall(e);
  });
  const timelinePath = process.env[TIMELINE_ENV];
  const timeline = timelinePath ? new TimelineRecorder() : undefined;
  timeline?.attach(events);
  const session = await initSession({ ...o, name: o.name ?? process.env[NAME_ENV], events, server: server!, job: job!, token: token! });
  if (timeline && timelinePath) session.onClose(() => writeFileSync(timelinePath, JSON.stringify(timeline.traceEvents())));
  setDefaultRing(session);
  return session;
}
