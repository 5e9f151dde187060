import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { Job } from '../../server/jobs.ts';
import { FINISHED_LEAVE_REASON, PeerLeftReason, PROTOCOL_VERSION } from '../../src/signaling/protocol.ts';
import { RawPeer, jobSpec } from './helpers.ts';
import { joinMessage, TEST_SIGNING_KEY } from '../support/signing-key.ts';

describe('signaling server: joining, ranks and membership epochs', () => {
  let server: RunningServer;
  const peers: RawPeer[] = [];
  beforeEach(async () => {
    server = await startServer({ staticDir: null, jobs: [jobSpec('mnist', 's3cret', 2, 3)] });
  });
  afterEach(async () => {
    for (const p of peers.splice(0)) p.close();
    await server.close();
  });
  const join = async (name: string) => {
    const p = await RawPeer.join(server.wsUrl, 'mnist', 's3cret', name);
    peers.push(p);
    return p;
  };

  it('assigns dense ranks in join order, bumps the epoch on every join, and is ready at minPeers', async () => {
    const a = await join('a');
    const welcome = await a.waitFor((m) => m.type === 'welcome', 'welcome');
    expect(welcome).toMatchObject({
      protocol: PROTOCOL_VERSION,
      job: { id: 'mnist', config: { minPeers: 2, maxPeers: 3 } },
    });
    expect(JSON.stringify(welcome)).not.toContain('s3cret');
    const m1 = await a.membership(1);
    expect(m1).toMatchObject({
      you: 0,
      size: 1,
      ready: false,
      started: false,
      ring: [0],
      change: { kind: 'join', name: 'a' },
    });

    const b = await join('b');
    const m2a = await a.membership(2);
    const m2b = await b.membership(2);
    expect(m2a).toMatchObject({ you: 0, size: 2, ready: true, started: true, ring: [0, 1] });
    expect(m2b).toMatchObject({ you: 1, size: 2, ready: true, started: true });
    expect(m2a.peers.map((p) => p.name)).toEqual(['a', 'b']);
    expect(m2a.peers[1].peerId).toBe(b.peerId);
    expect(b.count((m) => m.type === 'membership' && m.epoch === 1)).toBe(0);

    const c = await join('c');
    expect(await c.membership(3)).toMatchObject({ you: 2, size: 3, ring: [0, 1, 2] });
    expect(server.jobInfo('mnist')).toMatchObject({ epoch: 3, size: 3, ready: true, started: true });
  });

  it('hands native members one fresh TCP link key per epoch, and a page none', async () => {
    const a = await join('a');
    const b = await join('b');
    const [m2a, m2b] = [await a.membership(2), await b.membership(2)];
    expect(m2a.linkKey).toBeDefined();
    expect(Buffer.from(m2a.linkKey!, 'base64').byteLength).toBe(32);
    expect(m2b.linkKey).toBe(m2a.linkKey);
    const tab = await RawPeer.open(server.wsUrl);
    peers.push(tab);
    tab.sendJson(joinMessage({ job: 'mnist', token: 's3cret', runtime: 'browser', name: 'tab' }));
    const m3tab = await tab.membership(3);
    const m3a = await a.membership(3);
    expect(m3tab.linkKey).toBeUndefined();
    expect(m3a.linkKey).toBeDefined();
    expect(m3a.linkKey).not.toBe(m2a.linkKey);
    expect((await b.membership(3)).linkKey).toBe(m3a.linkKey);
  });

  it("hands every member each peer's signing key as it joined with it, and refuses a join without a valid one", async () => {
    const a = await RawPeer.open(server.wsUrl);
    peers.push(a);
    const key = `ed25519:${Buffer.alloc(32, 7).toString('base64')}`;
    const joinWith = (signingKey?: string) => ({
      type: 'join',
      protocol: PROTOCOL_VERSION,
      job: 'mnist',
      token: 's3cret',
      runtime: 'node',
      ...(signingKey === undefined ? {} : { signingKey }),
    });
    a.sendJson(joinWith(key));
    const b = await join('b');
    const [m2a, m2b] = [await a.membership(2), await b.membership(2)];
    for (const m of [m2a, m2b]) expect(m.peers.map((p) => p.signingKey)).toEqual([key, TEST_SIGNING_KEY]);
    // A member without a key its ring can read would turn signing off for the ring: refused, naming why.
    const offCurve = Buffer.alloc(65, 9);
    offCurve[0] = 4;
    const refusals: [string | undefined, RegExp][] = [
      [undefined, /carries no signing key/],
      ['rsa:AAAA', /not 'ed25519:<base64>' or 'p256:<base64>'/],
      [`ed25519:${Buffer.alloc(31, 7).toString('base64')}`, /has 31 bytes, not 32/],
      [`p256:${offCurve.toString('base64')}`, /P-256 key is not a valid public key/],
    ];
    for (const [signingKey, why] of refusals) {
      const c = await RawPeer.open(server.wsUrl);
      peers.push(c);
      c.sendJson(joinWith(signingKey));
      const error = await c.waitFor((m) => m.type === 'error', 'error');
      expect(error).toMatchObject({ code: 'signing-key-required', fatal: true });
      expect(error.type === 'error' && error.message).toMatch(why);
    }
    // Longer than any key of ours: refused by the schema, as any malformed field is.
    const d = await RawPeer.open(server.wsUrl);
    peers.push(d);
    d.sendJson(joinWith('x'.repeat(201)));
    expect((await d.waitFor((m) => m.type === 'error', 'error')).fatal).toBe(true);
    expect((await a.membership(2)).peers).toHaveLength(2);
  });

  it('announces a leaving peer (peer-left, then a new epoch with ranks re-packed)', async () => {
    const a = await join('a');
    const b = await join('b');
    const c = await join('c');
    await c.membership(3);
    b.sendJson({ type: 'leave', reason: 'done for today' });
    expect(await b.closed).toMatchObject({ code: 1000 });
    const left = await a.waitFor((m) => m.type === 'peer-left', 'peer-left');
    expect(left).toMatchObject({
      epoch: 3,
      peerId: b.peerId,
      rank: 1,
      name: 'b',
      reason: 'left',
      detail: 'done for today',
    });
    const m4 = await c.membership(4);
    expect(m4).toMatchObject({ you: 1, size: 2, ready: true, started: true, change: { kind: 'leave', name: 'b' } });
    expect(m4.peers.map((p) => p.name)).toEqual(['a', 'c']);
    // peer-left comes before the membership that drops the peer.
    const order = c.messages
      .filter((m) => m.type === 'peer-left' || (m.type === 'membership' && m.epoch === 4))
      .map((m) => m.type);
    expect(order).toEqual(['peer-left', 'membership']);
  });

  it('notices a peer whose socket drops without leave', async () => {
    const a = await join('a');
    const b = await join('b');
    await a.membership(2);
    b.ws.terminate();
    const left = await a.waitFor((m) => m.type === 'peer-left', 'peer-left');
    expect(left).toMatchObject({ peerId: b.peerId, rank: 1, reason: 'disconnected' });
    expect(await a.membership(3)).toMatchObject({ size: 1, ready: false, started: true });
  });

  it('lets a peer join a running job: the next epoch includes it and says started', async () => {
    const a = await join('a');
    const b = await join('b');
    await a.membership(2);
    b.close();
    await a.membership(3);
    const d = await join('d');
    expect(await d.membership(4)).toMatchObject({
      you: 1,
      size: 2,
      ready: true,
      started: true,
      change: { kind: 'join', name: 'd' },
    });
  });

  it('refuses a wrong token, an unknown job, a full job and another protocol version, and closes', async () => {
    const wrong = await RawPeer.open(server.wsUrl);
    wrong.sendJson(joinMessage({ job: 'mnist', token: 'guess' }));
    expect(await wrong.error('bad-token')).toMatchObject({ fatal: true });
    expect((await wrong.closed).code).toBe(4000);

    const unknown = await RawPeer.open(server.wsUrl);
    unknown.sendJson(joinMessage({ job: 'nope', token: 's3cret' }));
    expect((await unknown.error('no-such-job')).message).toContain("'nope'");
    await unknown.closed;

    const version = await RawPeer.open(server.wsUrl);
    version.sendJson({
      type: 'join',
      signingKey: TEST_SIGNING_KEY,
      protocol: PROTOCOL_VERSION + 1,
      job: 'mnist',
      token: 's3cret',
      runtime: 'node',
    });
    await version.error('bad-version');
    await version.closed;

    await join('a');
    await join('b');
    await join('c');
    const fourth = await RawPeer.open(server.wsUrl);
    fourth.sendJson(joinMessage({ job: 'mnist', token: 's3cret' }));
    expect((await fourth.error('job-full')).message).toContain('maxPeers 3');
    await fourth.closed;
    expect(server.jobInfo('mnist')?.size).toBe(3);
  });

  it('a job that empties is no longer started; a name with control characters is refused', async () => {
    const a = await join('a');
    const b = await join('b');
    await a.membership(2);
    a.close();
    b.close();
    await Promise.all([a.closed, b.closed]);
    for (let i = 0; i < 1000 && server.jobInfo('mnist')?.size !== 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(server.jobInfo('mnist')).toMatchObject({ size: 0, started: false });
    const c = await join('c');
    expect(await c.membership(5)).toMatchObject({ size: 1, ready: false, started: false });
    const evil = await RawPeer.open(server.wsUrl);
    evil.sendJson(joinMessage({ job: 'mnist', token: 's3cret', name: 'x\u001b[2Jy' }));
    expect((await evil.error('bad-message')).message).toContain('name');
    await evil.closed;
  });

  it('refuses a second join on the same connection without dropping the first', async () => {
    const a = await join('a');
    a.sendJson(joinMessage({ job: 'mnist', token: 's3cret' }));
    expect(await a.error('already-joined')).toMatchObject({ fatal: false });
    expect(server.jobInfo('mnist')?.size).toBe(1);
  });

  it('shows a job, its peers and their progress only to a request bearing its token (or to anyone when public), never the token', async () => {
    server.addJob({ ...jobSpec('open', 'open-token', 1, 2), config: { ...jobSpec('open', 'x').config, public: true } });
    const a = await join('a');
    a.sendJson({ type: 'progress', step: 12, loss: 0.5, samplesPerS: 900 });
    // A ping-free round trip: a bad message is answered after the progress was handled.
    a.sendJson({ type: 'progress', step: -1 });
    await a.error('bad-message');
    const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
    const res = await fetch(`${server.url}/api/jobs/mnist`, bearer('s3cret'));
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain('s3cret');
    const info = JSON.parse(text);
    expect(info).toMatchObject({ id: 'mnist', size: 1, config: { model: 'mlp', minPeers: 2 } });
    // The peer's own word, marked so; a first report's speed has no pace to be checked against yet.
    expect(info.peers[0]).toMatchObject({
      rank: 0,
      name: 'a',
      runtime: 'node',
      progress: { step: 12, loss: 0.5, selfReported: true, dropped: ['samplesPerS'] },
    });
    expect(info.peers[0].progress.samplesPerS).toBeUndefined();
    // Without the token, or with another job's: the same 404 as a job that does not exist.
    for (const init of [undefined, bearer('wrong'), bearer('open-token')]) {
      const hidden = await fetch(`${server.url}/api/jobs/mnist`, init);
      expect(hidden.status).toBe(404);
      const body = await hidden.text();
      expect(body).not.toContain('"peers"');
      expect(body).toContain('Authorization: Bearer');
    }
    expect((await fetch(`${server.url}/api/jobs/other`, bearer('s3cret'))).status).toBe(404);
    const ids = async (init?: RequestInit) =>
      ((await (await fetch(`${server.url}/api/jobs`, init)).json()) as { id: string }[]).map((j) => j.id);
    expect(await ids()).toEqual(['open']);
    expect(await ids(bearer('s3cret'))).toEqual(['mnist', 'open']);
    expect((await fetch(`${server.url}/api/jobs/open`)).status).toBe(200);
    for (const path of ['/api/jobs', '/api/jobs/open', '/metrics', '/healthz']) {
      const body = await (await fetch(`${server.url}${path}`)).text();
      expect(body).not.toContain('s3cret');
      expect(body).not.toContain('open-token');
    }
  });

  it("refuses progress that goes backwards, passes the job's last step or is out of range, and counts it; a peer reports only for itself", async () => {
    server.addJob({
      ...jobSpec('short', 'ts', 1, 2),
      config: { ...jobSpec('short', 'ts').config, hyperparameters: { lr: 0.1, steps: 100 } },
    });
    const a = await RawPeer.join(server.wsUrl, 'short', 'ts', 'a');
    const b = await RawPeer.join(server.wsUrl, 'short', 'ts', 'b');
    peers.push(a, b);
    a.sendJson({ type: 'progress', step: 50, loss: 0.5, testAccuracy: 0.9 });
    a.sendJson({ type: 'progress', step: 999_999, testAccuracy: 1 });
    a.sendJson({ type: 'progress', step: 40, loss: 0.1 });
    a.sendJson({ type: 'progress', step: 60, testAccuracy: 1.5 });
    // Progress names no peer: a report about another rank is not a valid message.
    a.sendJson({ type: 'progress', step: 60, rank: 1, loss: 0.01 });
    a.sendJson({ type: 'progress', step: 60, peerId: b.peerId, loss: 0.01 });
    a.sendJson({ type: 'progress', step: 50, testAccuracy: 0.91 });
    b.sendJson({ type: 'progress', step: 3, loss: 2 });
    await b.waitFor((m) => m.type === 'membership' && m.epoch === 2, 'membership 2');
    const errors = () => a.messages.filter((m) => m.type === 'error').map((m) => (m as { code: string }).code);
    // A round trip: the error for a message after the last progress comes after it was handled.
    a.sendJson({ type: 'teleport' });
    await a.error('unknown-type');
    expect(errors()).toEqual([
      'bad-progress',
      'bad-progress',
      'bad-message',
      'bad-message',
      'bad-message',
      'unknown-type',
    ]);
    expect(a.messages.find((m) => m.type === 'error' && m.code === 'bad-progress')).toMatchObject({
      fatal: false,
      message: expect.stringContaining("past the job's last step (100)"),
    });
    await b.waitFor((m) => m.type === 'ping' || m.type === 'membership', 'anything');
    b.sendJson({ type: 'teleport' });
    await b.error('unknown-type');
    const info = server.jobInfo('short')!;
    expect(info.peers[0].progress).toMatchObject({ step: 50, testAccuracy: 0.91 });
    expect(info.peers[1].progress).toMatchObject({ step: 3, loss: 2 });
    const text = await server.metricsText();
    expect(text).toMatch(/ringtrain_progress_refused_total\{reason="beyond-last-step"\} 1\b/);
    expect(text).toMatch(/ringtrain_progress_refused_total\{reason="step-backwards"\} 1\b/);
    expect(text).toMatch(/ringtrain_progress_refused_total\{reason="invalid"\} 3\b/);
  });

  it("shows progress as self-reported, and drops a speed the pace of the peer's own reports does not bear out", () => {
    // 4 peers at most × 32 examples: at most 128 examples per step for the ring.
    const job = new Job(jobSpec('pace', 't', 1, 4));
    const member = {
      peerId: 'p',
      runtime: 'node' as const,
      joinedAt: 0,
      send: () => {},
      eject: () => {},
      refuse: () => {},
    };
    const t0 = 1_000_000;
    expect(job.showProgress(member, { step: 10, loss: 2, samplesPerS: 1e12 }, t0)).toEqual({
      step: 10,
      loss: 2,
      at: t0,
      selfReported: true,
      dropped: ['samplesPerS'],
    });
    // 100 steps in 10 s since its first report: 10 steps/s, so at most 5 × 10 × 128 = 6,400 examples/s.
    expect(job.showProgress(member, { step: 110, loss: 1, samplesPerS: 1200, stepsPerS: 9.5 }, t0 + 10_000)).toEqual({
      step: 110,
      loss: 1,
      samplesPerS: 1200,
      stepsPerS: 9.5,
      at: t0 + 10_000,
      selfReported: true,
    });
    // The claims that stood in the issue (loss 0, 1e12 samples/s, accuracy 1): the speed goes, the rest is marked.
    expect(
      job.showProgress(member, { step: 120, loss: 0, samplesPerS: 1e12, stepsPerS: 1e6, testAccuracy: 1 }, t0 + 11_000),
    ).toEqual({
      step: 120,
      loss: 0,
      testAccuracy: 1,
      at: t0 + 11_000,
      selfReported: true,
      dropped: ['samplesPerS', 'stepsPerS'],
    });
    // Standing still while claiming speed: nothing bears it out.
    const still = { ...member, peerId: 'q' };
    job.showProgress(still, { step: 5 }, t0);
    expect(job.showProgress(still, { step: 5, samplesPerS: 50 }, t0 + 10_000).dropped).toEqual(['samplesPerS']);
  });

  it("keeps a peer's last evaluation beside its later steps, and a finished job's last report until the next join", () => {
    const job = new Job(jobSpec('done', 't', 1, 2));
    const member = {
      peerId: 'p',
      runtime: 'node' as const,
      joinedAt: 0,
      send: () => {},
      eject: () => {},
      refuse: () => {},
    };
    const report = (p: Parameters<Job['showProgress']>[1], at: number) =>
      ((member as { progress?: unknown }).progress = job.showProgress(member, p, at));
    job.add(member);
    report({ step: 10, loss: 2 }, 1000);
    report({ step: 10, testAccuracy: 0.8, testLoss: 0.5 }, 2000);
    expect(report({ step: 20, loss: 1 }, 3000)).toMatchObject({ step: 20, loss: 1, testAccuracy: 0.8, testLoss: 0.5 });
    expect(report({ step: 30, testAccuracy: 0.9 }, 4000)).toMatchObject({ step: 30, testAccuracy: 0.9 });
    expect(job.info().finished).toBeUndefined();

    job.remove(member, PeerLeftReason.Left, FINISHED_LEAVE_REASON);
    expect(job.info()).toMatchObject({ size: 0, finished: { progress: { step: 30, testAccuracy: 0.9 } } });
    // A peer that left for another reason does not finish the job; a new peer starts it again.
    const other = { ...member, peerId: 'q' };
    job.add(other);
    expect(job.info().finished).toBeUndefined();
    job.remove(other, PeerLeftReason.Left, 'stopped');
    expect(job.info().finished).toBeUndefined();
  });

  it('rejects bad job specs with a clear error', async () => {
    expect(() =>
      server.addJob({ ...jobSpec('x', 't'), config: { ...jobSpec('x', 't').config, minPeers: 5, maxPeers: 2 } }),
    ).toThrow(/maxPeers must be >= minPeers/);
    expect(() => server.addJob(jobSpec('mnist', 't'))).toThrow(/already exists/);
    expect(() => server.addJob(jobSpec('has space', 't'))).toThrow(/bad job spec/);
  });

  it('refuses a job whose settings are bad, naming the setting, and keeps serving the others', async () => {
    const withSettings = (id: string, hyperparameters: Record<string, number | string | boolean>) => ({
      ...jobSpec(id, 't'),
      config: { ...jobSpec(id, 't').config, hyperparameters },
    });
    expect(() => server.addJob(withSettings('typo', { lr: 0.1, warmupStep: 100 }))).toThrow(
      /job 'typo': unknown job hyperparameter "warmupStep"; did you mean 'warmupSteps'\?/,
    );
    expect(() => server.addJob(withSettings('range', { lr: 0.1, momentum: 1.5 }))).toThrow(
      /job 'range': job hyperparameter 'momentum' must be a number in \[0, 1\), got 1.5/,
    );
    expect(() => server.addJob(withSettings('pair', { lr: 0.1, verify: true, compression: 'fp16' }))).toThrow(
      /verify: true checks that the sum is exact; compression 'fp16'/,
    );
    expect(server.jobInfo('typo')).toBeUndefined();
    // The server goes on: the good job is still there and a peer still joins it.
    server.addJob(withSettings('good', { lr: 0.1, compression: 'fp16', elastic: true }));
    const p = await RawPeer.join(server.wsUrl, 'good', 't');
    expect(p.messages.find((m) => m.type === 'welcome')).toMatchObject({
      job: { id: 'good', config: { hyperparameters: { compression: 'fp16', elastic: true } } },
    });
    p.close();
  });

  it('refuses to start with a bad job, naming the job and the setting', async () => {
    const bad = {
      ...jobSpec('startup', 't'),
      config: { ...jobSpec('startup', 't').config, hyperparameters: { lr: 'fast' } },
    };
    await expect(startServer({ staticDir: null, jobs: [bad] })).rejects.toThrow(
      /bad job spec: job 'startup': job hyperparameter 'lr' must be a finite number > 0 \(the learning rate\), got "fast"/,
    );
  });
});
