/**
 * ringtrain/tfjs under Node and Deno: everything of index.ts, with an init()
 * that brings the `ws` WebSocket and @roamhq/wrtc, and that finds the server
 * in RINGTRAIN_SERVER when none is given (the `ringtrain launch` launcher sets it),
 * or runs a job of one when there is none (job-address.node.ts).
 */
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { EventBus } from '../core/events.ts';
import { jobToJoin, joinAddress } from '../distributed/session/job-address.node.ts';
import { init as initSession, type InitOptions, type Session } from '../distributed/session/session.node.ts';
import { stallReporter } from '../distributed/observe/stall.ts';
import { TimelineRecorder } from '../distributed/observe/timeline.ts';
import { setDefaultRing } from './ring.ts';

export * from './index.ts';

import { NAME_ENV, TIMELINE_ENV } from './env.ts';
export * from './env.ts';

/**
 * Besides joining: the stall inspector's lines go to stderr (the launcher
 * prefixes them with the worker's rank), and when the launcher was given
 * --timeline, this rank's events are recorded and written when the session
 * closes (the launcher merges the parts).
 */
export async function init(o: Partial<InitOptions> = {}): Promise<Session> {
  const address = await jobToJoin(o);
  const events = o.events ?? new EventBus();
  const sayStall = stallReporter((line) => process.stderr.write(`ringtrain: ${line}\n`));
  events.on((e) => {
    if (e.type === 'stall') sayStall(e);
  });
  const timelinePath = process.env[TIMELINE_ENV];
  const timeline = timelinePath ? new TimelineRecorder() : undefined;
  timeline?.attach(events);
  const session = await joinAddress(address, (a) =>
    initSession({ ...o, name: o.name ?? process.env[NAME_ENV], events, server: a.server, job: a.job, token: a.token }),
  );
  if (timeline && timelinePath)
    session.onClose(() => writeFileSync(timelinePath, JSON.stringify(timeline.traceEvents())));
  setDefaultRing(session);
  return session;
}
