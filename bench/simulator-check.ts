/**
 * Checks `ringtrain simulate`'s co-located model (src/sim/colocated-model.ts)
 * against real runs of N Deno peers over WebRTC on this one machine:
 *
 *   setsid sh -c 'echo -15 > /proc/self/autogroup; exec nice -n -15 sh scripts/in-netns.sh \
 *     npx tsx bench/simulator-check.ts [--models cnn,transformer] [--peers 2,3,4,8] [--repeats 2]'
 *
 * (a shared machine: setsid gives the run its own scheduler autogroup and
 * raises it, since with autogroups a plain `nice` only ranks a job against
 * itself). It measures the inputs first, once for the whole table:
 *   - the link: two Deno peers run the library's ring allreduce over WebRTC
 *     (bench/comm-cpu-peer.ts): latency and bandwidth from the wall time,
 *     CPU-seconds per byte, per message and per collective from /proc;
 *   - per model, a lone peer (`ringtrain run -np 1`): wall and CPU-seconds
 *     per step at the per-peer batch, and the gradient bytes (its checkpoint);
 *   - per model, the crowded compute: P lone peers (`run -np 1`, no ring
 *     between them) started at once, P from --crowd (2,4,8; P = 1 is the lone
 *     runs above), each one's worker ('deno') CPU-seconds per step, the mean
 *     over the P: how a peer's compute CPU grows with the peers on its host;
 *   - the cores a raised job gets (a probe: one busy loop per core for 2 s,
 *     each its CPU-seconds over its wall time while spinning, summed), just
 *     before and just after each run; the model takes their mean as C.
 * Then every (N, model), N in the order given, run `--repeats` times with a fixed per-peer batch
 * (the same work per peer at every N), and one JSON line each: predicted
 * steps/s (with all cores, and with the cores the probe found), measured
 * steady-state steps/s, the error, the run's CPU-seconds per peer per step
 * against the model's, and the load average before and after.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchLocalRing } from '../src/comm/launch.node.ts';
import { DEFAULT_MEDIUM_BYTES, DEFAULT_SMALL_BYTES } from '../src/collectives/codecs/types.ts';
import {
  linkCpuCosts,
  predictColocatedStep,
  type CrowdedCompute,
  type HostInputs,
} from '../src/sim/colocated-model.ts';
import { opt } from './args.ts';
import { measureRun, type RunMeasurement } from './measure-run.ts';

if (process.env.RINGTRAIN_NETNS !== '1')
  throw new Error('run this under scripts/in-netns.sh (WebRTC peers stay in a private network namespace)');
const models = opt('models', 'cnn,transformer').split(',');
const peerCounts = opt('peers', '2,3,4,8').split(',').map(Number);
const repeats = Number(opt('repeats', '2'));
const pick = (flag: string, fallback: string) =>
  Object.fromEntries(
    opt(flag, fallback)
      .split(',')
      .map((kv) => kv.split('='))
      .map(([k, v]) => [k, Number(v)]),
  );
// Per-peer batch and steps: at 8 peers a transformer run stays near a minute on 2 cores.
const batch = pick('batch', 'cnn=32,transformer=16,mlp=32');
const steps = pick('steps', 'cnn=60,transformer=40,mlp=150');
const crowd = opt('crowd', '2,4,8').split(',').map(Number);
const cores = Number(opt('cores', String(cpus().length)));
const line = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
const round = (x: number, d = 4) => Math.round(x * 10 ** d) / 10 ** d;

/**
 * Cores a job of this session gets now: one busy loop per core for `seconds`,
 * each reporting its own CPU-seconds over its own wall time while it spins
 * (so that a process's start-up, mostly reading files, does not count as cores
 * not given); the shares summed.
 */
async function probeCores(seconds = 2): Promise<number> {
  const code = `const t0 = performance.now(); const c0 = process.cpuUsage(); while (performance.now() - t0 < ${seconds * 1000}); const c = process.cpuUsage(c0); console.log((c.user + c.system) / 1e3 / (performance.now() - t0));`;
  const shares = await Promise.all(
    Array.from({ length: cores }, () => {
      const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      return new Promise<number>((resolve, reject) =>
        child.on('exit', (c) =>
          c === 0 ? resolve(Number(out.trim())) : reject(new Error(`the cores probe exited with ${c}`)),
        ),
      );
    }),
  );
  return shares.reduce((s, x) => s + x, 0);
}

interface Phase {
  bytes: number;
  wall_s: number;
  cpu_s: number;
}

async function measureLink(bytes: number) {
  const ring = launchLocalRing({
    size: 2,
    script: fileURLToPath(new URL('./comm-cpu-peer.ts', import.meta.url)),
    runtimes: ['deno', 'deno'],
    args: () => ['--bytes', String(bytes)],
  });
  try {
    const reports = (await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith('{'))))).map(
      (l) => JSON.parse(l) as { phases: Record<string, Phase> },
    );
    await Promise.all(ring.peers.map((p) => p.exited));
    const mean = (phase: string, k: 'wall_s' | 'cpu_s') =>
      reports.reduce((s, r) => s + r.phases[phase][k], 0) / reports.length;
    const costs = linkCpuCosts({
      allreduceSmallCpuS: mean('small', 'cpu_s'),
      allreduceLargeCpuS: mean('large', 'cpu_s'),
      largeBytes: bytes,
      allgatherSmallCpuS: mean('gather', 'cpu_s'),
    });
    // A ring of two: 2 messages one after the other, and `bytes` each way.
    const alphaS = mean('small', 'wall_s') / 2;
    const betaSPerByte = Math.max(0, (mean('large', 'wall_s') - mean('small', 'wall_s')) / bytes);
    return { alphaS, betaSPerByte, ...costs, phases: reports.map((r) => r.phases) };
  } finally {
    ring.stop();
  }
}

/** Bytes of the parameters (float32) in a safetensors checkpoint: the gradient a step allreduces. */
function parameterBytes(path: string): number {
  const buf = readFileSync(path);
  const header = JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString('utf8')) as Record<
    string,
    { data_offsets?: [number, number] }
  >;
  return Object.entries(header)
    .filter(([k]) => k.startsWith('param/'))
    .reduce((s, [, v]) => s + (v.data_offsets![1] - v.data_offsets![0]), 0);
}

const runArgs = (model: string, np: number, extra: string[] = []) => [
  'run',
  '-np',
  String(np),
  '--model',
  model,
  '--steps',
  String(steps[model]),
  '--batch',
  String(batch[model]),
  '--runtime',
  'deno',
  '--seed',
  '7',
  '--json',
  '--eval-limit',
  '64',
  ...extra,
];
const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const workerCpuS = (m: RunMeasurement) => {
  const w = m.cpu_s_per_step_by_process.deno;
  if (!(w > 0)) throw new Error(`${m.command}: no deno worker CPU in ${JSON.stringify(m.cpu_s_per_step_by_process)}`);
  return w;
};
const brief = (m: RunMeasurement) => ({
  steps_per_s: round(m.steps_per_s),
  cli_steps_per_s: round(m.cli_steps_per_s),
  cpu_s_per_step: round(m.cpu_s_per_step),
  cores_busy: round(m.cores_busy, 2),
  others_cores: round(m.others_cores, 2),
  idle_cores: round(m.idle_cores, 2),
  load: [m.load_before, m.load_after],
  cpu_s_per_step_by_process: m.cpu_s_per_step_by_process,
});

const link = await measureLink(1 << 20);
line({
  kind: 'input-link',
  alpha_ms: round(link.alphaS * 1000),
  bandwidth_MBps: round(1e-6 / link.betaSPerByte, 2),
  cpu_ms_per_MB: round(link.cpuPerByteS * 1e9, 2),
  cpu_ms_per_message: round(link.cpuPerMessageS * 1000),
  cpu_ms_per_collective: round(link.cpuPerCollectiveS * 1000),
  phases: link.phases,
});

const inputsByModel = new Map<string, Omit<HostInputs, 'coresPerHost'>>();
for (const model of models) {
  const dir = mkdtempSync(join(tmpdir(), 'simulator-check-'));
  const lone: RunMeasurement[] = [];
  for (let i = 0; i < repeats; i++)
    lone.push(await measureRun(runArgs(model, 1, ['--save', join(dir, 'lone.safetensors'), '--overwrite'])));
  const gradientBytes = parameterBytes(join(dir, 'lone.safetensors'));
  rmSync(dir, { recursive: true, force: true });
  const crowded: CrowdedCompute[] = [{ peers: 1, cpuS: mean(lone.map(workerCpuS)) }];
  const crowdRuns: Record<number, ReturnType<typeof brief>[]> = {};
  for (const p of crowd.filter((p) => p > 1)) {
    const runs = await Promise.all(Array.from({ length: p }, () => measureRun(runArgs(model, 1))));
    crowded.push({ peers: p, cpuS: mean(runs.map(workerCpuS)) });
    crowdRuns[p] = runs.map(brief);
  }
  line({
    kind: 'input-crowded',
    model,
    batch_per_peer: batch[model],
    worker_cpu_ms: Object.fromEntries(crowded.map((q) => [q.peers, round(q.cpuS * 1000, 1)])),
    runs: crowdRuns,
  });
  const inputs: Omit<HostInputs, 'coresPerHost'> = {
    computeS: 1 / mean(lone.map((m) => m.steps_per_s)),
    computeCpuS: mean(lone.map((m) => m.cpu_s_per_step)),
    computeCpuCrowded: crowded,
    gradientBytes,
    peersPerHost: Math.max(...peerCounts),
    alphaS: link.alphaS,
    betaSPerByte: link.betaSPerByte,
    cpuPerByteS: link.cpuPerByteS,
    cpuPerMessageS: link.cpuPerMessageS,
    cpuPerCollectiveS: link.cpuPerCollectiveS,
    // The step checks' allgather of gradient sketches (src/distributed/robust/step-checks.ts), besides the gradient allreduce.
    smallCollectives: 1,
    smallBytes: DEFAULT_SMALL_BYTES,
    mediumBytes: DEFAULT_MEDIUM_BYTES,
  };
  inputsByModel.set(model, inputs);
  line({
    kind: 'input-compute',
    model,
    batch_per_peer: batch[model],
    compute_ms: round(inputs.computeS * 1000, 1),
    compute_cpu_ms: round(inputs.computeCpuS * 1000, 1),
    gradient_bytes: gradientBytes,
    runs: lone.map(brief),
  });
}

for (const n of peerCounts) {
  for (const model of models) {
    const inputs = inputsByModel.get(model)!;
    for (let i = 0; i < repeats; i++) {
      const before = await probeCores();
      const m = await measureRun(runArgs(model, n));
      const after = await probeCores();
      const probed = (before + after) / 2;
      const all = predictColocatedStep(n, { ...inputs, peersPerHost: n, coresPerHost: cores });
      const probe = predictColocatedStep(n, { ...inputs, peersPerHost: n, coresPerHost: Math.min(cores, probed) });
      const uncrowded = predictColocatedStep(n, {
        ...inputs,
        computeCpuCrowded: undefined,
        peersPerHost: n,
        coresPerHost: Math.min(cores, probed),
      });
      line({
        kind: 'check',
        model,
        peers: n,
        repeat: i,
        batch_per_peer: batch[model],
        steps: m.steps,
        predicted_steps_per_s: round(all.stepsPerS),
        predicted_bound: all.bound,
        probed_cores: round(probed, 2),
        probes: [round(before, 2), round(after, 2)],
        predicted_at_probed_cores: round(probe.stepsPerS),
        measured_steps_per_s: round(m.steps_per_s),
        error_pct: round((all.stepsPerS / m.steps_per_s - 1) * 100, 1),
        error_at_probed_cores_pct: round((probe.stepsPerS / m.steps_per_s - 1) * 100, 1),
        error_without_crowding_pct: round((uncrowded.stepsPerS / m.steps_per_s - 1) * 100, 1),
        cpu_per_peer_s: {
          predicted: round(all.cpuPerPeerS),
          measured: round(m.cpu_s_per_step / n),
          predicted_compute: round(all.computeCpuS),
        },
        run: brief(m),
        command: `sh scripts/in-netns.sh node bin/ringtrain.js ${runArgs(model, n).join(' ')}`,
      });
    }
  }
}
