/**
 * The co-located model behind `ringtrain simulate --peers-per-host`
 * (src/sim/colocated-model.ts): a step is the larger of the critical
 * path (cost-model.ts's compute + allreduce) and the busiest host's CPU work
 * over its cores; each term written out by hand at small N, the laws that
 * must hold (one peer per host on enough cores is the per-machine model;
 * twice the peers on a CPU-bound host halve the steps/s), the link's CPU
 * costs solved from the microbenchmark's three figures, the compute CPU
 * interpolated between crowded hosts' measured points, and the CLI's flags.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { predictStep } from '../../src/sim/cost-model.ts';
import {
  allreduceTraffic,
  crowdedCpuS,
  linkCpuCosts,
  predictColocatedStep,
  type HostInputs,
} from '../../src/sim/colocated-model.ts';
import { simulate, simulateOptions, simulationTable } from '../../src/cli/commands/simulate.node.ts';
import { DEFAULT_MEDIUM_BYTES, DEFAULT_SMALL_BYTES } from '../../src/collectives/codecs/types.ts';

const x: HostInputs = {
  computeS: 0.15,
  computeCpuS: 0.2,
  gradientBytes: 400_000,
  alphaS: 0.001,
  betaSPerByte: 4e-8, // 25 MB/s
  peersPerHost: 8,
  coresPerHost: 2,
  cpuPerByteS: 1.5e-8, // 15 ms per MB
  cpuPerMessageS: 0.0002,
  cpuPerCollectiveS: 0.001,
  smallCollectives: 1,
  smallBytes: 64 * 1024,
  mediumBytes: 256 * 1024,
};

describe('a step of peers sharing a host', () => {
  it('the allreduce traffic of one peer: the ring 2(N-1) messages and 2(N-1)/N of the bytes, recursive doubling r whole vectors', () => {
    expect(allreduceTraffic(1, 1000, 'ring')).toEqual({ messages: 0, bytesSent: 0 });
    expect(allreduceTraffic(4, 1000, 'ring')).toEqual({ messages: 6, bytesSent: 1500 });
    expect(allreduceTraffic(4, 1000, 'recursive-doubling')).toEqual({ messages: 2, bytesSent: 2000 });
    expect(allreduceTraffic(3, 1000, 'recursive-doubling')).toEqual({ messages: 3, bytesSent: 3000 });
    expect(allreduceTraffic(4, 1000, 'halving-doubling')).toEqual({ messages: 4, bytesSent: 1500 });
  });

  it('CPU per peer: compute, bytes both ways, messages and collectives; the host does P of them on C cores', () => {
    const p = predictColocatedStep(4, x);
    expect(p.algorithm).toBe('ring');
    // ring of 4 on 400 kB: 6 messages, 600 kB sent and as much received; one allgather of 3 messages; 2 collectives.
    const cpu = 0.2 + 2 * 600_000 * 1.5e-8 + (6 + 3) * 0.0002 + 2 * 0.001;
    expect(p.cpuPerPeerS).toBeCloseTo(cpu, 12);
    expect(p.hostCpuS).toBeCloseTo((4 * cpu) / 2, 12);
    expect(p.criticalS).toBeCloseTo(0.15 + 6 * 0.001 + 600_000 * 4e-8, 12);
    expect(p.bound).toBe('cpu');
    expect(p.stepS).toBeCloseTo(p.hostCpuS, 12);
    expect(p.stepsPerS).toBeCloseTo(1 / p.hostCpuS, 9);
  });

  it('small gradients go by recursive doubling, as the library picks', () => {
    const p = predictColocatedStep(4, { ...x, gradientBytes: 40_000 });
    expect(p.algorithm).toBe('recursive-doubling');
    expect(p.cpuPerPeerS).toBeCloseTo(0.2 + 2 * 80_000 * 1.5e-8 + (2 + 3) * 0.0002 + 2 * 0.001, 12);
    expect(p.criticalS).toBeCloseTo(
      predictStep(4, {
        computeS: 0.15,
        gradientBytes: 40_000,
        alphaS: 0.001,
        betaSPerByte: 4e-8,
        algorithm: 'recursive-doubling',
      }).stepS,
      12,
    );
  });

  it('middle-sized gradients go by halving-doubling, as the library picks', () => {
    const p = predictColocatedStep(4, { ...x, gradientBytes: 100_000 });
    expect(p.algorithm).toBe('halving-doubling');
    // 4 messages, 150 kB sent and as much received; the allgather's 3 messages; 2 collectives.
    expect(p.cpuPerPeerS).toBeCloseTo(0.2 + 2 * 150_000 * 1.5e-8 + (4 + 3) * 0.0002 + 2 * 0.001, 12);
    expect(p.criticalS).toBeCloseTo(0.15 + 4 * 0.001 + 150_000 * 4e-8, 12);
    expect(predictColocatedStep(4, { ...x, gradientBytes: 100_000, mediumBytes: 64 * 1024 }).algorithm).toBe('ring');
  });

  it("middle-sized gradients on 3 peers go by two-shot, as the library picks: 2 rounds, 4 messages, the ring's bytes", () => {
    const p = predictColocatedStep(3, { ...x, gradientBytes: 120_000 });
    expect(p.algorithm).toBe('two-shot');
    // 4 messages, 160 kB sent and as much received; the allgather's 2 messages; 2 collectives.
    expect(p.cpuPerPeerS).toBeCloseTo(0.2 + 2 * 160_000 * 1.5e-8 + (4 + 2) * 0.0002 + 2 * 0.001, 12);
    expect(p.criticalS).toBeCloseTo(0.15 + 2 * 0.001 + 160_000 * 4e-8, 12);
  });

  it('one peer per host on enough cores is the per-machine model; a lone peer pays no communication', () => {
    for (const n of [2, 3, 8, 64, 1024]) {
      const p = predictColocatedStep(n, { ...x, peersPerHost: 1, coresPerHost: 8 });
      expect(p.bound).toBe('critical-path');
      expect(p.stepS).toBeCloseTo(
        predictStep(n, { computeS: 0.15, gradientBytes: 400_000, alphaS: 0.001, betaSPerByte: 4e-8, algorithm: 'ring' })
          .stepS,
        12,
      );
    }
    const lone = predictColocatedStep(1, x);
    expect(lone.cpuPerPeerS).toBe(0.2);
    // A peer alone spreads 0.2 CPU-s over 2 cores in 0.15 s: its own critical path bounds it.
    expect(lone).toMatchObject({ bound: 'critical-path', stepS: 0.15 });
  });

  it('on a CPU-bound host, twice the peers take about twice as long; twice the cores half as long', () => {
    const at4 = predictColocatedStep(4, x);
    const at8 = predictColocatedStep(8, x);
    expect(at8.stepS / at4.stepS).toBeGreaterThan(2);
    expect(at8.stepS / at4.stepS).toBeLessThan(2.1);
    expect(predictColocatedStep(8, { ...x, coresPerHost: 4 }).stepS).toBeCloseTo(at8.stepS / 2, 12);
    // Peers spread over hosts of 2: each host holds 2 of the 8, and the critical path may take over.
    const spread = predictColocatedStep(8, { ...x, peersPerHost: 2 });
    expect(spread.hostCpuS).toBeCloseTo((2 * at8.cpuPerPeerS) / 2, 12);
    expect(spread.stepsPerS).toBeGreaterThan(3 * at8.stepsPerS);
  });

  it('refuses inputs that make no sense, saying which', () => {
    expect(() => predictColocatedStep(0, x)).toThrow(/peers must be a whole number/);
    expect(() => predictColocatedStep(2, { ...x, peersPerHost: 0.5 })).toThrow(/peers per host/);
    expect(() => predictColocatedStep(2, { ...x, coresPerHost: 0 })).toThrow(/cores per host must be positive/);
    expect(() => predictColocatedStep(2, { ...x, computeCpuS: 0 })).toThrow(/compute CPU-seconds/);
    expect(() => predictColocatedStep(2, { ...x, cpuPerByteS: -1 })).toThrow(/must not be negative/);
  });
});

describe('compute CPU on a crowded host (P lone trainers at once)', () => {
  const points = [
    { peers: 4, cpuS: 0.24 },
    { peers: 1, cpuS: 0.2 },
    { peers: 2, cpuS: 0.21 },
    { peers: 8, cpuS: 0.26 },
  ];

  it('is the measured value at a measured P, linear between two, held beyond the largest', () => {
    expect(crowdedCpuS(points, 1)).toBe(0.2);
    expect(crowdedCpuS(points, 4)).toBe(0.24);
    expect(crowdedCpuS(points, 3)).toBeCloseTo(0.225, 12);
    expect(crowdedCpuS(points, 6)).toBeCloseTo(0.25, 12);
    expect(crowdedCpuS(points, 7)).toBeCloseTo(0.255, 12);
    expect(crowdedCpuS(points, 16)).toBe(0.26);
    // A lone point alone: every P costs what one peer does.
    expect(crowdedCpuS([{ peers: 1, cpuS: 0.3 }], 5)).toBe(0.3);
  });

  it("adds the growth over one peer to the lone peer's CPU, at min(P, N) peers on the host", () => {
    const crowded = { ...x, computeCpuCrowded: points };
    // 8 per host, a ring of 3: 3 peers share the host, compute 0.2 + (0.225 - 0.2).
    const at3 = predictColocatedStep(3, crowded);
    expect(at3.computeCpuS).toBeCloseTo(0.225, 12);
    expect(at3.cpuPerPeerS - predictColocatedStep(3, x).cpuPerPeerS).toBeCloseTo(0.025, 12);
    // The lone input includes the launcher's share (0.23 here against 0.2 of worker CPU): only the growth is added.
    expect(predictColocatedStep(8, { ...crowded, computeCpuS: 0.23 }).computeCpuS).toBeCloseTo(0.29, 12);
    expect(predictColocatedStep(8, { ...crowded, peersPerHost: 2 }).computeCpuS).toBeCloseTo(0.21, 12);
    expect(predictColocatedStep(1, crowded).cpuPerPeerS).toBe(0.2);
  });

  it('refuses points it cannot interpolate, saying why', () => {
    expect(() => crowdedCpuS([{ peers: 2, cpuS: 0.2 }], 2)).toThrow(/must include 1 peer/);
    expect(() =>
      crowdedCpuS(
        [
          { peers: 1, cpuS: 0.2 },
          { peers: 1, cpuS: 0.3 },
        ],
        2,
      ),
    ).toThrow(/peer count twice/);
    expect(() =>
      crowdedCpuS(
        [
          { peers: 1, cpuS: 0.2 },
          { peers: 2.5, cpuS: 0.3 },
        ],
        2,
      ),
    ).toThrow(/whole peer counts/);
    expect(() => crowdedCpuS([{ peers: 1, cpuS: Number.NaN }], 2)).toThrow(/positive CPU-seconds/);
    expect(() => crowdedCpuS(points, 0)).toThrow(/peers on a host must be a whole number/);
    expect(() => predictColocatedStep(4, { ...x, computeCpuCrowded: [] })).toThrow(/must include 1 peer/);
  });
});

describe('the link CPU costs from the microbenchmark', () => {
  it('per collective, per message and per byte from allreduce (c + 2m), allgather (c + m) and a large allreduce', () => {
    const c = 0.001;
    const m = 0.0002;
    const perByte = 1.5e-8;
    const costs = linkCpuCosts({
      allreduceSmallCpuS: c + 2 * m,
      allgatherSmallCpuS: c + m,
      allreduceLargeCpuS: c + 2 * m + 2 * 1e6 * perByte,
      largeBytes: 1e6,
    });
    expect(costs.cpuPerCollectiveS).toBeCloseTo(c, 12);
    expect(costs.cpuPerMessageS).toBeCloseTo(m, 12);
    expect(costs.cpuPerByteS).toBeCloseTo(perByte, 15);
    // /proc counts in 10 ms ticks: an allgather read as dearer than the allreduce gives no negative cost.
    expect(
      linkCpuCosts({ allreduceSmallCpuS: 0.001, allgatherSmallCpuS: 0.0011, allreduceLargeCpuS: 0.03, largeBytes: 1e6 })
        .cpuPerMessageS,
    ).toBe(0);
  });
});

describe('ringtrain simulate --peers-per-host', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-colocated-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const base = {
    computeMs: '150',
    bytes: '400000',
    latencyMs: '1',
    bandwidthMBps: '25',
    relayPerS: '6000',
    peers: '2,4',
  };

  it("reads the CPU costs from simulator-check's input-link line, flags win, and adds a column", () => {
    const link = join(dir, 'link.json');
    writeFileSync(
      link,
      '{"kind":"input-link","alpha_ms":1,"bandwidth_MBps":25,"cpu_ms_per_MB":15,"cpu_ms_per_message":0.2,"cpu_ms_per_collective":1}\n',
    );
    const o = simulateOptions({ ...base, peersPerHost: '8', coresPerHost: '2', computeCpuMs: '200', linkCpu: link });
    expect(o.hosts).toEqual({
      peersPerHost: 8,
      coresPerHost: 2,
      computeCpuMs: 200,
      cpuMsPerMB: 15,
      cpuMsPerMessage: 0.2,
      cpuMsPerCollective: 1,
      smallCollectives: 1,
    });
    expect(
      simulateOptions({
        ...base,
        peersPerHost: '8',
        coresPerHost: '2',
        computeCpuMs: '200',
        linkCpu: link,
        cpuMsPerMB: '30',
      }).hosts?.cpuMsPerMB,
    ).toBe(30);
    const rows = simulate(o);
    // The CLI takes the library's thresholds: 400 kB on 4 peers goes by halving-doubling.
    const library = { ...x, smallBytes: DEFAULT_SMALL_BYTES, mediumBytes: DEFAULT_MEDIUM_BYTES };
    expect(rows[1].colocated?.algorithm).toBe('halving-doubling');
    expect(rows[1].colocated?.stepsPerS).toBeCloseTo(predictColocatedStep(4, library).stepsPerS, 9);
    expect(rows[1].colocated?.bound).toBe('cpu');
    const table = simulationTable(rows, o).split('\n');
    expect(table[0]).toMatch(/8 peers per host, 2 cores \|$/);
    expect(table[3]).toMatch(/\(CPU-bound\) \|$/);
    // Without it, no column and no co-located figures.
    expect(simulate(simulateOptions(base))[0].colocated).toBeUndefined();
  });

  it("takes the crowded compute CPU as P=ms pairs or simulator-check's input-crowded line", () => {
    const host = {
      ...base,
      peersPerHost: '8',
      coresPerHost: '2',
      computeCpuMs: '200',
      cpuMsPerMB: '15',
      cpuMsPerMessage: '0.2',
      cpuMsPerCollective: '1',
    };
    const pairs = simulateOptions({ ...host, computeCpuCrowded: '1=200, 2=210,4=240,8=260' });
    expect(pairs.hosts?.computeCpuCrowdedMs).toEqual({ 1: 200, 2: 210, 4: 240, 8: 260 });
    const file = join(dir, 'crowded.json');
    writeFileSync(file, '{"kind":"input-crowded","model":"cnn","worker_cpu_ms":{"1":200,"2":210,"4":240,"8":260}}\n');
    const fromFile = simulateOptions({ ...host, computeCpuCrowded: file });
    expect(fromFile.hosts).toEqual(pairs.hosts);
    // 4 peers, 8 per host: compute 0.2 + (0.24 - 0.2) CPU-s.
    const row = simulate(fromFile)[1];
    expect(row.colocated?.cpuPerPeerMs).toBeCloseTo(
      predictColocatedStep(4, { ...x, mediumBytes: DEFAULT_MEDIUM_BYTES, computeCpuS: 0.24 }).cpuPerPeerS * 1000,
      9,
    );
    expect(() => simulateOptions({ ...host, computeCpuCrowded: '1=200,2=-3' })).toThrow(
      /--compute-cpu-crowded needs whole peer counts/,
    );
    expect(() => simulate(simulateOptions({ ...host, computeCpuCrowded: '2=200,4=240' }))).toThrow(
      /must include 1 peer/,
    );
    writeFileSync(file, '{"kind":"input-link"}\n');
    expect(() => simulateOptions({ ...host, computeCpuCrowded: file })).toThrow(/holds no worker_cpu_ms/);
  });

  it('says which co-located figure is missing', () => {
    expect(() =>
      simulateOptions({
        ...base,
        peersPerHost: '4',
        computeCpuMs: '200',
        cpuMsPerMB: '1',
        cpuMsPerMessage: '0',
        cpuMsPerCollective: '1',
      }),
    ).toThrow(/--cores-per-host must be a positive number/);
    expect(() =>
      simulateOptions({
        ...base,
        peersPerHost: '4',
        coresPerHost: '2',
        cpuMsPerMB: '1',
        cpuMsPerMessage: '0',
        cpuMsPerCollective: '1',
      }),
    ).toThrow(/--compute-cpu-ms must be a positive number/);
    expect(() => simulateOptions({ ...base, peersPerHost: '4', coresPerHost: '2', computeCpuMs: '200' })).toThrow(
      /needs --cpu-ms-per-MB .*--link-cpu FILE/,
    );
    expect(() => simulateOptions({ ...base, peersPerHost: '0' })).toThrow(/--peers-per-host must be a whole number/);
  });
});
