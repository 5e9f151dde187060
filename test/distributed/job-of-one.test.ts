/**
 * init() from 'ringtrain' under Node with no server, job or token anywhere
 * (no options, no RINGTRAIN_* environment) is a job of one, as
 * `ringtrain launch -np 1` would run the script: rank 0 of 1, collectives
 * that return their input, and the in-process server gone once the session
 * closes. Half an address is a mistake and is refused, naming what is missing.
 * Runs inside the private network namespace (init loads WebRTC).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { allreduce, ErrorCode, init } from '../../src/index.node.ts';
import { jobToJoin } from '../../src/distributed/session/job-address.node.ts';
import { JOB_ENV, SERVER_ENV, TOKEN_ENV } from '../../src/distributed/session/launch-env.ts';
import { requireNetns } from '../support/workers.ts';

const NAMES = [SERVER_ENV, JOB_ENV, TOKEN_ENV];
let saved: Record<string, string | undefined> = {};
beforeEach(() => {
  saved = Object.fromEntries(NAMES.map((n) => [n, process.env[n]]));
  for (const n of NAMES) delete process.env[n];
});
afterEach(() => {
  for (const [n, v] of Object.entries(saved))
    if (v === undefined) delete process.env[n];
    else process.env[n] = v;
});

describe('init() alone', () => {
  it('is rank 0 of a job of one, and stops its own server when the session closes', { timeout: 60_000 }, async () => {
    requireNetns();
    const session = await init();
    expect([session.rank, session.size, session.comm.size]).toEqual([0, 1, 1]);
    expect(session.job.config).toMatchObject({ minPeers: 1, maxPeers: 1 });
    const summed = await allreduce(session.comm, Float32Array.of(1, 2, 3));
    expect(Array.from(summed)).toEqual([1, 2, 3]);
    const server = session.client.url;
    await session.close();
    await expect(fetch(server.replace(/^ws/, 'http').replace(/\/ws$/, '/healthz'))).rejects.toThrow();
  });

  it('refuses half an address, naming what is missing and where it comes from', async () => {
    await expect(jobToJoin({ server: 'http://127.0.0.1:1' }, {})).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringMatching(/^init: no job; pass \{ job \} or set RINGTRAIN_JOB/),
    });
    await expect(jobToJoin({}, { [SERVER_ENV]: 'http://127.0.0.1:1', [JOB_ENV]: 'j' })).rejects.toMatchObject({
      message: expect.stringMatching(/^init: no token;/),
    });
    expect(await jobToJoin({}, { [SERVER_ENV]: 'http://h:1', [JOB_ENV]: 'j', [TOKEN_ENV]: 't' })).toEqual({
      server: 'http://h:1',
      job: 'j',
      token: 't',
    });
  });
});
