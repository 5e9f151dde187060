/**
 * The alpha-beta model behind `ringtrain simulate` (src/sim/cost-model.ts):
 * each formula against its terms written out by hand at small N, the laws
 * that must hold whatever the inputs (hierarchy moves the ring's bytes but
 * cuts its latency terms; recursive doubling wins when latency rules, the
 * ring when bandwidth does; DiLoCo divides the communication by H; the
 * signaling load grows as N^2), and the CLI reading bench JSON.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  allreduceCost,
  defaultGroupSize,
  doublingRounds,
  hierarchicalCost,
  predictSignaling,
  predictStep,
  type StepInputs,
} from '../../src/sim/cost-model.ts';
import { simulate, simulateOptions, simulationTable } from '../../src/cli/commands/simulate.node.ts';
import { algorithmNamed } from '../../src/collectives/algorithms/index.ts';

const A = 0.001; // 1 ms per message
const B = 1e-8; // 100 MB/s
const link = { alphaS: A, betaSPerByte: B };
const n = 1_000_000;

describe('alpha-beta allreduce costs', () => {
  it('ring: 2(N-1) messages and 2(N-1)/N of the bytes', () => {
    expect(allreduceCost('ring', 1, n, link)).toEqual({ s: 0, bytesSent: 0, messages: 0 });
    expect(allreduceCost('ring', 4, n, link).messages).toBe(6);
    expect(allreduceCost('ring', 2, n, link).s).toBeCloseTo(2 * A + n * B, 12);
    expect(allreduceCost('ring', 4, n, link).s).toBeCloseTo(6 * A + 1.5 * n * B, 12);
    expect(allreduceCost('ring', 4, n, link).bytesSent).toBe(1.5 * n);
  });

  it('recursive doubling: log2 N rounds of the whole vector, two more when N is not a power of two', () => {
    expect([1, 2, 3, 4, 6, 8, 9, 1024].map(doublingRounds)).toEqual([0, 1, 3, 2, 4, 3, 5, 10]);
    expect(allreduceCost('recursive-doubling', 8, n, link).s).toBeCloseTo(3 * (A + n * B), 12);
    expect(allreduceCost('recursive-doubling', 8, n, link).bytesSent).toBe(3 * n);
    expect(allreduceCost('recursive-doubling', 8, n, link).messages).toBe(3);
  });

  it("two-shot: the ring's bytes in 2 rounds at any N, for 2(N-1) messages", () => {
    expect(allreduceCost('two-shot', 1, n, link)).toEqual({ s: 0, bytesSent: 0, messages: 0 });
    expect(allreduceCost('two-shot', 3, n, link)).toEqual({
      s: expect.closeTo(2 * A + (4 / 3) * n * B, 12),
      bytesSent: (4 / 3) * n,
      messages: 4,
    });
    expect(allreduceCost('two-shot', 6, n, link)).toEqual(algorithmNamed('two-shot')!.cost(6, n, link));
    for (const peers of [2, 3, 6, 8]) {
      expect(allreduceCost('two-shot', peers, n, link).bytesSent).toBe(allreduceCost('ring', peers, n, link).bytesSent);
      expect(allreduceCost('two-shot', peers, n, link).messages).toBe(allreduceCost('ring', peers, n, link).messages);
    }
    // Beside halving-doubling on 8: a third of its rounds, more than twice its messages.
    expect(allreduceCost('two-shot', 8, n, link).s).toBeLessThan(allreduceCost('halving-doubling', 8, n, link).s);
    expect(allreduceCost('two-shot', 8, n, link).messages).toBe(14);
  });

  it("halving-doubling: the ring's bytes in 2 log2 N rounds; a fold of the whole vector in and out when N is not a power of two", () => {
    expect(allreduceCost('halving-doubling', 1, n, link)).toEqual({ s: 0, bytesSent: 0, messages: 0 });
    expect(allreduceCost('halving-doubling', 4, n, link)).toEqual({
      s: expect.closeTo(4 * A + 1.5 * n * B, 12),
      bytesSent: 1.5 * n,
      messages: 4,
    });
    expect(allreduceCost('halving-doubling', 8, n, link).bytesSent).toBe(allreduceCost('ring', 8, n, link).bytesSent);
    expect(allreduceCost('halving-doubling', 8, n, link).messages).toBe(6);
    // 6 peers: halving-doubling among 4 (1.5 n in 4 rounds), plus n in and n out.
    expect(allreduceCost('halving-doubling', 6, n, link)).toEqual({
      s: expect.closeTo(6 * A + 3.5 * n * B, 12),
      bytesSent: 3.5 * n,
      messages: 6,
    });
    // Between the other two: fewer bytes than recursive doubling, fewer messages than the ring.
    for (const peers of [4, 16, 256]) {
      expect(allreduceCost('halving-doubling', peers, n, link).bytesSent).toBeLessThan(
        allreduceCost('recursive-doubling', peers, n, link).bytesSent,
      );
      expect(allreduceCost('halving-doubling', peers, n, link).messages).toBeLessThan(
        allreduceCost('ring', peers, n, link).messages,
      );
    }
  });

  it('hierarchical: the same bytes as one ring, far fewer latency terms', () => {
    // 16 peers in 4 rings of 4: inner 2*3 messages, outer 2*3 on a quarter of the bytes.
    const h = hierarchicalCost(16, n, link, 4);
    expect(h.s).toBeCloseTo(6 * A + 1.5 * n * B + 6 * A + 1.5 * (n / 4) * B, 12);
    for (const [peers, g] of [
      [16, 4],
      [64, 8],
      [1024, 32],
      [12, 3],
    ]) {
      expect(hierarchicalCost(peers, n, link, g).bytesSent).toBeCloseTo(
        allreduceCost('ring', peers, n, link).bytesSent,
        6,
      );
    }
    // With latency alone, 2(g-1) + 2(N/g-1) messages against 2(N-1).
    const latencyOnly = { alphaS: A, betaSPerByte: 0 };
    expect(hierarchicalCost(1024, n, latencyOnly, 32).s).toBeCloseTo(124 * A, 12);
    expect(allreduceCost('ring', 1024, n, latencyOnly).s).toBeCloseTo(2046 * A, 12);
    expect([2, 4, 16, 64, 100, 1024].map(defaultGroupSize)).toEqual([2, 2, 4, 8, 8, 32]);
  });

  it('recursive doubling wins when latency rules, the ring when bandwidth does', () => {
    for (const peers of [4, 16, 256]) {
      const latencyOnly = { alphaS: A, betaSPerByte: 0 };
      const bandwidthOnly = { alphaS: 0, betaSPerByte: B };
      expect(allreduceCost('recursive-doubling', peers, n, latencyOnly).s).toBeLessThan(
        allreduceCost('ring', peers, n, latencyOnly).s,
      );
      expect(allreduceCost('ring', peers, n, bandwidthOnly).s).toBeLessThan(
        allreduceCost('recursive-doubling', peers, n, bandwidthOnly).s,
      );
    }
  });
});

describe('a step', () => {
  const x: StepInputs = { computeS: 0.05, gradientBytes: n, alphaS: A, betaSPerByte: B, algorithm: 'ring' };
  it('is compute plus the allreduce; efficiency is the compute share', () => {
    const p = predictStep(4, x);
    const comm = 6 * A + 1.5 * n * B;
    expect(p.commS).toBeCloseTo(comm, 12);
    expect(p.stepsPerS).toBeCloseTo(1 / (0.05 + comm), 9);
    expect(p.efficiency).toBeCloseTo(0.05 / (0.05 + comm), 9);
    expect(predictStep(1, x)).toMatchObject({ commS: 0, efficiency: 1, bytesPerPeer: 0 });
  });

  it('DiLoCo pays the ring once every H steps', () => {
    const ring = predictStep(64, x);
    const diloco = predictStep(64, { ...x, algorithm: 'diloco', diLoCoH: 16 });
    expect(diloco.commS).toBeCloseTo(ring.commS / 16, 12);
    expect(diloco.bytesPerPeer).toBeCloseTo(ring.bytesPerPeer / 16, 6);
    expect(diloco.stepsPerS).toBeGreaterThan(ring.stepsPerS);
  });

  it('refuses inputs that make no sense', () => {
    expect(() => predictStep(0, x)).toThrow(/peers must be a whole number/);
    expect(() => predictStep(4, { ...x, computeS: 0 })).toThrow(/compute time must be positive/);
    expect(() => predictStep(4, { ...x, algorithm: 'diloco', diLoCoH: 0 })).toThrow(/H must be a whole number/);
  });
});

describe('signaling load', () => {
  it('one link per pair of peers at each re-formation, re-formations in proportion to N: N^2 growth', () => {
    const s = { signalsPerLink: 12, changesPerPeerHour: 2, relayCapacityPerS: 10_000 };
    const p2 = predictSignaling(2, s);
    expect(p2.signalsPerReform).toBe(12);
    expect(p2.changesPerS).toBeCloseTo(4 / 3600, 12);
    const p100 = predictSignaling(100, s);
    expect(p100.signalsPerReform).toBe(4950 * 12);
    expect(p100.signalsPerS).toBeCloseTo((200 / 3600) * 4950 * 12, 6);
    expect(p100.load).toBeCloseTo(p100.signalsPerS / 10_000, 12);
    expect(p100.linksPerPeer).toBe(99);
    expect(predictSignaling(200, s).signalsPerS / p100.signalsPerS).toBeCloseTo(
      (200 * 200 * 199) / (100 * 100 * 99),
      9,
    );
  });
});

describe('ringtrain simulate', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-simulate-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('takes latency and bandwidth from a bench allreduce line and the relay capacity from bench:signaling; flags win', () => {
    const ar = join(dir, 'ar.json');
    const sig = join(dir, 'sig.json');
    writeFileSync(
      ar,
      'starting peers…\n{"peers":2,"bytes":409600,"p2p_rtt_ms":0.8,"p2p_bidir_MBps":50,"p2p_MBps":60}\n',
    );
    writeFileSync(sig, '{"bench":"signaling","relayPerS":30000}\n');
    const o = simulateOptions({ computeMs: '40', bytes: '400KiB', allreduce: ar, signaling: sig, peers: '2,8' });
    expect(o).toMatchObject({
      latencyMs: 0.4,
      bandwidthMBps: 50,
      relayPerS: 30000,
      gradientBytes: 409600,
      peers: [2, 8],
      diLoCoH: 16,
    });
    expect(
      simulateOptions({
        computeMs: '40',
        bytes: '1MiB',
        allreduce: ar,
        signaling: sig,
        latencyMs: '2',
        bandwidthMBps: '10',
      }),
    ).toMatchObject({ latencyMs: 2, bandwidthMBps: 10 });
    // Two runs: latency from the small message, bandwidth from the large one, in whatever order given.
    const small = join(dir, 'small.json');
    writeFileSync(small, '{"peers":2,"bytes":4096,"p2p_rtt_ms":0.3,"p2p_bidir_MBps":2}\n');
    writeFileSync(ar, '{"peers":2,"bytes":4194304,"p2p_rtt_ms":90,"p2p_bidir_MBps":50}\n');
    expect(simulateOptions({ computeMs: '40', bytes: '1MiB', allreduce: [ar, small], relayPerS: '100' })).toMatchObject(
      { latencyMs: 0.15, bandwidthMBps: 50 },
    );
    const rows = simulate(o);
    expect(rows[0].algorithms.ring.stepsPerS).toBeCloseTo(
      predictStep(2, {
        computeS: 0.04,
        gradientBytes: 409600,
        alphaS: 0.0004,
        betaSPerByte: 1 / 50e6,
        algorithm: 'ring',
      }).stepsPerS,
      9,
    );
    const table = simulationTable(rows, o).split('\n');
    expect(table).toHaveLength(4);
    expect(table[2]).toMatch(/^\| 2 \| /);
  });

  it('says which figure is missing', () => {
    expect(() => simulateOptions({ bytes: '1MiB' })).toThrow(/needs --compute-ms/);
    expect(() => simulateOptions({ computeMs: '10' })).toThrow(/needs --bytes/);
    expect(() => simulateOptions({ computeMs: '10', bytes: '1MiB', bandwidthMBps: '10', relayPerS: '1' })).toThrow(
      /needs the link latency/,
    );
    expect(() =>
      simulateOptions({
        computeMs: '10',
        bytes: '1MiB',
        latencyMs: '1',
        bandwidthMBps: '10',
        relayPerS: '1',
        peers: '2,x',
      }),
    ).toThrow(/--peers must be whole numbers/);
    expect(() => simulateOptions({ computeMs: '10', bytes: '1MiB', allreduce: join(dir, 'none.json') })).toThrow(
      /cannot read --allreduce/,
    );
  });
});
