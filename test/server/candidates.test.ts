/**
 * Staged admission's bookkeeping on the server (server/candidates.ts through server/jobs.ts):
 * who is a candidate, its probes with its would-be neighbours, admission once every neighbour
 * heard its echo, the deadline, and the caps per job and per address. Members here are plain
 * objects that record what the server sends them; one test runs it over a real server's sockets.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { parseJobSettings } from '../../src/job/settings.ts';
import { startServer, type RunningServer } from '../../server/index.ts';
import { Job, type Member } from '../../server/jobs.ts';
import { SignalErrorCode, type JobSpec, type ServerMessage } from '../../src/signaling/protocol.ts';
import { RawPeer, jobSpec } from './helpers.ts';
import { joinMessage } from '../support/signing-key.ts';

type ProbeMsg = Extract<ServerMessage, { type: 'probe' }>;

function member(name: string, address = `10.0.0.${name.length}`) {
  const sent: ServerMessage[] = [];
  let refused: (why: { code: string; message: string }) => void = () => {};
  const refusal = new Promise<{ code: string; message: string }>((r) => (refused = r));
  const m: Member & { sent: ServerMessage[]; refusal: typeof refusal } = {
    peerId: `id-${name}`,
    name,
    runtime: 'node',
    joinedAt: 0,
    address,
    sent,
    refusal,
    send: (msg) => void sent.push(msg),
    eject: () => {},
    refuse: (code, message) => refused({ code, message }),
  };
  return m;
}

const probes = (m: { sent: ServerMessage[] }) => m.sent.filter((x): x is ProbeMsg => x.type === 'probe');

/** A started job of two members that voted (each attested the same epoch): joiners must prove themselves. */
function runningJob(hp: Record<string, number> = {}, limits = { maxCandidates: 8, maxCandidatesPerAddress: 4 }) {
  const spec = jobSpec('adm', 't', 2, 6);
  spec.config.hyperparameters = { ...spec.config.hyperparameters, ...hp };
  const job = new Job(spec, { candidates: limits });
  const a = member('a', '10.0.0.1');
  const b = member('b', '10.0.0.2');
  job.add(a);
  job.add(b);
  job.attest(a, job.epoch);
  job.attest(b, job.epoch);
  expect(job.isVoter(a) && job.isVoter(b)).toBe(true);
  return { job, a, b };
}

describe('staged admission (server bookkeeping)', () => {
  it('a job without voters admits joiners at once; one with voters makes them candidates', () => {
    const fresh = new Job(jobSpec('fresh', 't', 2, 4));
    fresh.add(member('a'));
    expect(fresh.join(member('bb'))).toBe('member');
    expect(fresh.size).toBe(2);

    const { job, a, b } = runningJob();
    const epoch = job.epoch;
    const c = member('c', '10.0.0.3');
    expect(job.join(c)).toBe('candidate');
    // No membership names it: the members' ring has nothing to wait for.
    expect(job.size).toBe(2);
    expect(job.epoch).toBe(epoch);
    expect(c.sent[0]).toMatchObject({ type: 'candidate', deadlineMs: parseJobSettings({}).membership.admitTimeoutMs });
    // One probe with each would-be neighbour (the last rank and rank 0), each end told of the other.
    expect(probes(a)).toEqual([expect.objectContaining({ side: 0, peer: expect.objectContaining({ name: 'c' }) })]);
    expect(probes(b)).toEqual([expect.objectContaining({ side: 0, peer: expect.objectContaining({ name: 'c' }) })]);
    expect(
      probes(c)
        .map((p) => p.peer.name)
        .sort(),
    ).toEqual(['a', 'b']);
    // Native ends get the probe's own TCP key, the same at both ends.
    expect(probes(c).find((p) => p.probe === probes(a)[0].probe)?.linkKey).toBe(probes(a)[0].linkKey);
  });

  it('admits a candidate once every neighbour heard its echo, and only the member end can say so', () => {
    const { job, a, b } = runningJob();
    const c = member('c', '10.0.0.3');
    job.join(c);
    const [pa, pb] = [probes(a)[0].probe, probes(b)[0].probe];
    // The candidate cannot vouch for itself, nor a member for another member's probe.
    expect(job.probeOk(c, pa)).toBeNull();
    expect(job.probeOk(b, pa)).toBeNull();
    expect(job.probeOk(a, pa)).toBeNull();
    expect(job.size).toBe(2);
    expect(job.probeOk(b, pb)).toBe(c);
    expect(job.size).toBe(3);
    expect(job.rankOf(c)).toBe(2);
    expect(c.sent.at(-1)).toMatchObject({ type: 'membership', you: 2, size: 3 });
    expect(job.candidates.size).toBe(0);
  });

  it('relays probe signals between the two ends only; a candidate cannot signal an epoch', () => {
    const { job, a, b } = runningJob();
    const c = member('c', '10.0.0.3');
    job.join(c);
    const pa = probes(a)[0].probe;
    expect(job.probeSignal(c, pa, { sdp: 'x' })).toBeNull();
    expect(a.sent.at(-1)).toEqual({ type: 'probe-signal', probe: pa, data: { sdp: 'x' } });
    expect(job.probeSignal(a, pa, { sdp: 'y' })).toBeNull();
    expect(c.sent.at(-1)).toEqual({ type: 'probe-signal', probe: pa, data: { sdp: 'y' } });
    expect(job.probeSignal(b, pa, { sdp: 'z' })?.code).toBe(SignalErrorCode.NoSuchRank);
    expect(job.relay(c, job.epoch, 0, { sdp: 'w' })?.code).toBe(SignalErrorCode.NotAMember);
  });

  it('refuses a candidate that has not proved itself by the deadline, and nobody hears of it going', async () => {
    const { job, a } = runningJob({ admitTimeoutMs: 50 });
    const c = member('c', '10.0.0.3');
    job.join(c);
    const before = a.sent.length;
    const refusal = await c.refusal;
    expect(refusal.code).toBe(SignalErrorCode.AdmitTimeout);
    expect(refusal.message).toMatch(/within 50 ms of joining \(admitTimeoutMs/);
    // The connection leaves the job on refusal: for a candidate that is silent.
    expect(job.remove(c, 'dropped')).toBe(false);
    expect(a.sent.length).toBe(before);
    expect(job.candidates.size).toBe(0);
  });

  it('caps candidates per job and per address, and counts them under names, addresses and maxPeers', () => {
    const { job } = runningJob({}, { maxCandidates: 2, maxCandidatesPerAddress: 1 });
    job.join(member('c', '10.9.9.9'));
    expect(job.refusal('t', '10.9.9.9', 'd')).toMatchObject({
      code: SignalErrorCode.TooManyCandidates,
      message: expect.stringMatching(/from your address/),
    });
    expect(job.refusal('t', '10.8.8.8', 'c')?.code).toBe(SignalErrorCode.NameTaken);
    job.join(member('e', '10.8.8.8'));
    expect(job.refusal('t', '10.7.7.7', 'f')).toMatchObject({
      code: SignalErrorCode.TooManyCandidates,
      message: expect.stringMatching(/already has 2 joiner\(s\)/),
    });
    // maxPeers 6: two members and two candidates leave room for two; the candidate cap is what refuses here.
    const full = runningJob({}, { maxCandidates: 8, maxCandidatesPerAddress: 8 }).job;
    for (const n of ['c', 'd', 'e', 'f']) full.join(member(n, '10.5.5.5'));
    expect(full.refusal('t', '10.6.6.6', 'g')?.code).toBe(SignalErrorCode.JobFull);
  });

  it('a candidate whose neighbour left probes the new one; with every probe ok it is admitted', () => {
    const { job, a, b } = runningJob();
    const d = member('d', '10.0.0.4');
    job.add(d);
    const c = member('c', '10.0.0.3');
    job.join(c);
    // Neighbours: d (last) and a (rank 0).
    expect(probes(b)).toEqual([]);
    job.probeOk(a, probes(a)[0].probe);
    job.remove(d, 'disconnected');
    // b is the last rank now: a new probe with it; a's is still ok.
    expect(probes(b)).toHaveLength(1);
    expect(job.size).toBe(2);
    expect(job.probeOk(b, probes(b)[0].probe)).toBe(c);
    expect(job.size).toBe(3);
  });
});

describe('staged admission on a real server', () => {
  let server: RunningServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('a ghost socket in a running job gets a candidacy, never a membership, and admit-timeout at its deadline', async () => {
    const spec: JobSpec = jobSpec('ghosts', 'tok', 2, 4);
    spec.config.hyperparameters = { ...spec.config.hyperparameters, admitTimeoutMs: 300 };
    server = await startServer({ jobs: [spec], staticDir: null, limits: { maxCandidatesPerAddress: 1 } });
    const a = await RawPeer.join(server.wsUrl, 'ghosts', 'tok', 'a');
    const b = await RawPeer.join(server.wsUrl, 'ghosts', 'tok', 'b');
    const m = await b.membership(2);
    // The server answers a socket's messages in order: an error reply to a junk message after the
    // attest means the attest was counted.
    for (const p of [a, b]) {
      p.sendJson({ type: 'attest', epoch: m.epoch });
      p.sendJson({ type: 'junk' });
      await p.error(SignalErrorCode.UnknownType);
    }
    const ghost = await RawPeer.join(server.wsUrl, 'ghosts', 'tok', 'ghost');
    expect(await ghost.waitFor((x) => x.type === 'candidate' || x.type === 'membership', 'candidacy')).toMatchObject({
      type: 'candidate',
      deadlineMs: 300,
    });
    await a.waitFor((x) => x.type === 'probe', 'a probe at the member');
    // GET /api/jobs/:id counts it, apart from the members.
    expect(server.jobInfo('ghosts')).toMatchObject({ size: 2, candidates: 1 });
    // A second candidate from the same address is over the cap.
    const second = await RawPeer.open(server.wsUrl);
    second.sendJson(joinMessage({ job: 'ghosts', token: 'tok', name: 'second' }));
    expect((await second.error(SignalErrorCode.TooManyCandidates)).fatal).toBe(true);
    expect((await ghost.error(SignalErrorCode.AdmitTimeout)).fatal).toBe(true);
    expect(ghost.count((x) => x.type === 'membership')).toBe(0);
    expect(server.jobInfo('ghosts')!.peers.map((p) => p.name)).toEqual(['a', 'b']);
    expect(server.jobInfo('ghosts')!.candidates).toBeUndefined();
    a.close();
    b.close();
  });
});
