/**
 * init() for a Node or Deno program: what the caller leaves out comes from the
 * environment `ringtrain launch` sets (the server, the job, the token and the
 * name it finds the worker's rank by), so `await init()` needs no arguments
 * there, as under horovodrun; with none of them anywhere, the program is a job
 * of one (job-address.node.ts). The token travels by environment because argv
 * is visible to everyone in `ps`.
 */
import process from 'node:process';
import { jobToJoin, joinAddress } from './job-address.node.ts';
import { NAME_ENV } from './launch-env.ts';
import { init, type InitOptions, type Session } from './session.node.ts';

export async function initFromEnvironment(o: Partial<InitOptions> = {}): Promise<Session> {
  const address = await jobToJoin(o);
  return joinAddress(address, (a) =>
    init({ ...o, server: a.server, job: a.job, token: a.token, name: o.name ?? process.env[NAME_ENV] }),
  );
}
