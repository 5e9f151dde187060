/**
 * A job's settings are checked once, by one schema (src/job/settings.ts):
 * every key it knows round-trips unchanged, a bad value names its field, a pair
 * that does not combine names both, and an unknown key is refused by name.
 */
import { describe, expect, it, vi } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import {
  checkHyperparameters,
  FIELDS,
  JOB_SETTING_KEYS,
  nearestSettingKey,
  parseJobSettings,
  SECTIONS,
  type JobSettingKey,
} from '../../src/job/settings.ts';

/** A valid value of every setting. */
const EVERY: Record<JobSettingKey, number | string | boolean> = {
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0.01,
  scaleLr: true,
  lrSchedule: 'cosine',
  warmupSteps: 10,
  warmupFrom: 'zero',
  backwardPassesPerStep: 2,
  microBatch: 4,
  seed: 7,
  epochs: 2,
  steps: 100,
  sampling: 'replacement',
  evalLimit: 500,
  globalBatch: 64,
  balance: 'equal',
  compression: 'topk:0.01',
  fusionThresholdBytes: 1 << 20,
  overlap: false,
  timeoutMs: 30_000,
  ringOrder: 'rtt',
  transport: 'webrtc',
  aggregation: 'mean',
  verify: false,
  directionRules: true,
  doubtRule: false,
  stateCheckEvery: 50,
  syncEvery: 4,
  outerLr: 0.7,
  outerMomentum: 0.9,
  elastic: true,
  serverWaitMs: 60_000,
  peerTimeoutMs: 120_000,
  connectTimeoutMs: 10_000,
  silentPeerMs: 5_000,
  admitTimeoutMs: 20_000,
  precision: 'f16-mixed',
  mixPrecisions: true,
  modelOptions: '{"width":128}',
  modelName: 'mine.ts@abc',
  modelLayoutHash: 'deadbeef',
  text: 'shakespeare.txt',
  textSha256: 'ab'.repeat(32),
  context: 64,
  tokenizer: 'gpt2',
  table: 'iris.csv',
  tableSha256: 'cd'.repeat(32),
  labelColumn: 'species',
  labels: 'labels.npy',
  labelsSha256: 'ef'.repeat(32),
  args: '--epochs 1 --train-examples 2048',
};

function refusal(raw: unknown): RingtrainError {
  try {
    parseJobSettings(raw);
  } catch (e) {
    expect(e).toBeInstanceOf(RingtrainError);
    expect((e as RingtrainError).code).toBe(ErrorCode.InvalidArgument);
    return e as RingtrainError;
  }
  throw new Error(`expected ${JSON.stringify(raw)} to be refused`);
}

describe('job settings', () => {
  it('covers every key, and every key round-trips unchanged', () => {
    expect(Object.keys(EVERY).sort()).toEqual([...JOB_SETTING_KEYS].sort());
    expect(checkHyperparameters(EVERY)).toEqual(EVERY);
    for (const [k, v] of Object.entries(EVERY)) expect(checkHyperparameters({ [k]: v })).toEqual({ [k]: v });
    expect(checkHyperparameters({})).toEqual({});
  });

  it('parses into sections under the same keys, every given value kept', () => {
    const parsed = parseJobSettings(EVERY);
    expect(Object.keys(parsed).sort()).toEqual([...SECTIONS].sort());
    for (const [k, v] of Object.entries(EVERY)) {
      const section: Record<string, unknown> = parsed[FIELDS[k as JobSettingKey].section];
      expect(section[k], k).toEqual(v);
    }
  });

  it("applies each absent setting's default at parse time, and no other value", () => {
    const parsed = parseJobSettings({ lr: 0.1 });
    for (const key of JOB_SETTING_KEYS) {
      const f: { section: string; default?: unknown } = FIELDS[key];
      const section = (parsed as unknown as Record<string, Record<string, unknown>>)[f.section];
      expect(Object.hasOwn(section, key), key).toBe(true);
      if (key !== 'verify' && key !== 'doubtRule') expect(section[key], key).toEqual(key === 'lr' ? 0.1 : f.default);
    }
    expect(parsed.reduce.overlap).toBe(true);
    expect(parsed.optimizer.momentum).toBe(0.9);
    expect(parsed.reduce.aggregation).toBe('mean');
    expect(parsed.schedule.steps).toBeUndefined();
    expect(parseJobSettings({ overlap: false }).reduce.overlap).toBe(false);
  });

  it('turns the step checks on in an elastic job where they combine, as the job says otherwise', () => {
    expect(parseJobSettings({}).checks).toMatchObject({ verify: false, doubtRule: false });
    expect(parseJobSettings({ elastic: true }).checks).toMatchObject({ verify: true, doubtRule: true });
    expect(parseJobSettings({ elastic: true, compression: 'fp16' }).checks).toMatchObject({
      verify: false,
      doubtRule: true,
    });
    expect(parseJobSettings({ elastic: true, verify: false }).checks.verify).toBe(false);
    expect(parseJobSettings({ verify: true }).checks.verify).toBe(true);
  });

  it.each([
    ['lr', 'fast', /'lr' must be a finite number > 0.*got "fast"/],
    ['lr', 0, /'lr' must be a finite number > 0 \(the learning rate\), got 0/],
    ['momentum', 1, /'momentum' must be a number in \[0, 1\), got 1/],
    ['epochs', 1.5, /'epochs' must be a whole number >= 1, got 1.5/],
    ['compression', 'zip', /'compression' must be 'none', 'fp16', 'int8' or 'topk:R'.*got "zip"/],
    ['compression', 'topk:2', /'compression'.*got "topk:2"/],
    ['aggregation', 'trimmed-mean:0.7', /'aggregation' must be mean\|trimmed-mean:F.*got "trimmed-mean:0.7"/],
    ['modelOptions', '[1]', /'modelOptions' must be a JSON object in a string, got "\[1\]"/],
    ['elastic', 'yes', /'elastic' must be true or false, got "yes"/],
    ['lrSchedule', 'linear', /'lrSchedule' must be 'constant' or 'cosine', got "linear"/],
    ['context', 1, /'context' must be a whole number >= 2, got 1/],
    ['args', 'x'.repeat(300), /'args' must be text of at most 256 characters/],
  ])('refuses %s = %j, naming the field, the value and what is allowed', (field, value, message) => {
    const e = refusal({ lr: 0.1, [field]: value });
    expect(e.message).toMatch(message);
    expect(e.detail).toMatchObject({ field });
  });

  it.each([
    [{ verify: true, compression: 'fp16' }, ['verify', 'compression']],
    [{ aggregation: 'median', compression: 'int8' }, ['aggregation', 'compression']],
    [{ aggregation: 'median', syncEvery: 4 }, ['aggregation', 'syncEvery']],
    [{ doubtRule: true, balance: 'speed', globalBatch: 64 }, ['doubtRule', 'balance']],
    [{ balance: 'speed' }, ['balance', 'globalBatch']],
    [{ balance: 'speed', globalBatch: 64, syncEvery: 2 }, ['balance', 'syncEvery']],
  ])('refuses %j naming both settings', (raw, fields) => {
    const e = refusal(raw);
    expect(e.message).toMatch(/do not combine/);
    for (const f of fields) expect(e.message).toContain(f);
    expect(e.detail).toMatchObject({ fields });
  });

  it('takes the combinations that do combine', () => {
    expect(() => parseJobSettings({ verify: true, compression: 'none', aggregation: 'mean' })).not.toThrow();
    expect(() => parseJobSettings({ balance: 'speed', globalBatch: 64, doubtRule: false })).not.toThrow();
    expect(() => parseJobSettings({ aggregation: 'trimmed-mean:0.25', compression: 'none' })).not.toThrow();
  });

  it('refuses an unknown key by name, with the nearest known key when one is close', () => {
    const slip = refusal({ lr: 0.1, warmupStep: 100 });
    expect(slip.message).toMatch(/unknown job hyperparameter "warmupStep"; did you mean 'warmupSteps'\?/);
    expect(slip.detail).toMatchObject({ field: 'warmupStep', nearest: 'warmupSteps' });
    const far = refusal({ colour: 'blue' });
    expect(far.message).toMatch(/unknown job hyperparameter "colour" \(known: lr, /);
    expect(far.message).not.toMatch(/did you mean/);
    expect(nearestSettingKey('LR')).toBe('lr');
    expect(nearestSettingKey('syncevery')).toBe('syncEvery');
  });

  it('refuses settings that are not an object', () => {
    expect(refusal([1, 2]).message).toMatch(/must be an object/);
    expect(refusal(null).message).toMatch(/must be an object/);
  });
});

describe('a peer reading its job', () => {
  it('refuses, at join and before any ring, a job with a setting it does not know (a newer server), and leaves it', async () => {
    const { WebSocketServer } = await import('ws');
    const { init } = await import('../../src/distributed/session/session.node.ts');
    const { PROTOCOL_VERSION } = await import('../../src/signaling/protocol.ts');
    // A stand-in for a newer server, whose job carries a setting this peer has never heard of.
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise((r) => wss.once('listening', r));
    const seen: string[] = [];
    wss.on('connection', (ws) =>
      ws.on('message', (data) => {
        const msg = JSON.parse(String(data)) as { type: string };
        seen.push(msg.type);
        if (msg.type !== 'join') return;
        const config = {
          model: 'mlp',
          optimizer: 'sgd',
          hyperparameters: { lr: 0.1, gradientVaccine: true },
          batchPerPeer: 1,
          minPeers: 2,
          maxPeers: 2,
        };
        ws.send(
          JSON.stringify({
            type: 'welcome',
            protocol: PROTOCOL_VERSION,
            peerId: 'p',
            job: { id: 'newer', config },
            heartbeatMs: 10_000,
            missedHeartbeats: 3,
          }),
        );
        const peers = [{ rank: 0, peerId: 'p', runtime: 'node' }];
        ws.send(
          JSON.stringify({
            type: 'membership',
            epoch: 1,
            peers,
            ring: [0],
            you: 0,
            size: 1,
            ready: false,
            started: false,
            change: { kind: 'join', peerId: 'p' },
          }),
        );
      }),
    );
    let beforeRing = false;
    try {
      const port = (wss.address() as { port: number }).port;
      const joined = init({
        server: `ws://127.0.0.1:${port}/ws`,
        job: 'newer',
        token: 't',
        beforeRing: () => void (beforeRing = true),
      });
      await expect(joined).rejects.toThrow(/unknown job hyperparameter "gradientVaccine".*update ringtrain/);
      expect(beforeRing).toBe(false);
      await vi.waitFor(() => expect(seen).toContain('leave'));
    } finally {
      for (const ws of wss.clients) ws.terminate();
      await new Promise((r) => wss.close(r));
    }
  });
});
