/**
 * Which job init() joins under Node and Deno (ringtrain's and ringtrain/tfjs's):
 * what the caller passes, else what `ringtrain launch` put in the environment,
 * else (nothing given at all) a job of one: a signaling server on loopback in
 * this process with one place, which this process takes. So `node train.js`
 * runs the script as `ringtrain launch -np 1 train.js` would, as Horovod's
 * hvd.init() outside horovodrun is a job of one.
 */
import process from 'node:process';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { JobSpec } from '../../signaling/protocol.ts';
import { JOB_ENV, SERVER_ENV, TOKEN_ENV } from './launch-env.ts';

export interface JobAddress {
  server: string;
  job: string;
  token: string;
  /** Set for a job of one: stops its server (when the session closes). */
  stop?: () => Promise<void>;
}

/** As `ringtrain launch` is lenient with a busy worker (TF.js ops block the event loop for seconds), and here the server shares that loop. */
const SOLO_HEARTBEAT_MS = 10_000;
const SOLO_MISSED_HEARTBEATS = 30;

async function startJobOfOne(): Promise<JobAddress> {
  const { startServer } = await import('../../../server/index.ts');
  const { randomUUID } = await import('node:crypto');
  const job: JobSpec = {
    id: `solo-${randomUUID().slice(0, 8)}`,
    token: randomUUID().replaceAll('-', ''),
    config: { model: 'user-script', optimizer: 'user', hyperparameters: {}, batchPerPeer: 1, minPeers: 1, maxPeers: 1 },
  };
  const server = await startServer({
    host: '127.0.0.1',
    port: 0,
    jobs: [job],
    staticDir: null,
    heartbeatMs: SOLO_HEARTBEAT_MS,
    missedHeartbeats: SOLO_MISSED_HEARTBEATS,
  });
  return { server: server.url, job: job.id, token: job.token, stop: () => server.close() };
}

export async function jobToJoin(
  o: { server?: string; job?: string; token?: string },
  env: Record<string, string | undefined> = process.env,
): Promise<JobAddress> {
  const given = { server: o.server ?? env[SERVER_ENV], job: o.job ?? env[JOB_ENV], token: o.token ?? env[TOKEN_ENV] };
  if (!given.server && !given.job && !given.token) return startJobOfOne();
  for (const [key, envName] of [
    ['server', SERVER_ENV],
    ['job', JOB_ENV],
    ['token', TOKEN_ENV],
  ] as const) {
    if (!given[key]) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `init: no ${key}; pass { ${key} } or set ${envName} (ringtrain launch sets it for its workers), or give none of server, job and token to train alone`,
      );
    }
  }
  return { server: given.server!, job: given.job!, token: given.token! };
}

/** Runs `join` on the address, and stops a job of one's server when joining fails or, later, when the session closes. */
export async function joinAddress<S extends { onClose(handler: () => void | Promise<void>): void }>(
  address: JobAddress,
  join: (a: JobAddress) => Promise<S>,
): Promise<S> {
  let session: S;
  try {
    session = await join(address);
  } catch (err) {
    await address.stop?.();
    throw err;
  }
  if (address.stop) session.onClose(address.stop);
  return session;
}
