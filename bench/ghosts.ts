/**
 * Ghost sockets against a running elastic job (issue 37's first "done when"): a real server,
 * two Deno workers over real WebRTC training the MLP, then `--ghosts` sockets with the job's
 * token that join, answer pings and never open a data channel, each rejoining at once whenever
 * the server drops it, for `--window-ms`. Prints one JSON line: the slowest worker's steps in
 * the window before the ghosts and in the ghosts' window, their ratio, the workers' CPU time per
 * step in each window (what probing costs them, apart from the machine's load), their admission
 * probes (opened, failed, most open at once, steps reported while one was open), what the ghosts got
 * (memberships: 0 under staged admission; admit-timeout refusals), and whether any worker left
 * the ring. `--admit-timeout-ms` is the job's admitTimeoutMs (default: the server's, 30 s;
 * 0 admits joiners at once, as before staged admission, when the ring waits `silentPeerMs` for them).
 *
 * Usage: sh scripts/in-netns.sh npx tsx bench/ghosts.ts [--window-ms 40000] [--ghosts 3] [--admit-timeout-ms N]
 */
import { startServer } from '../server/index.ts';
import { readFileSync } from 'node:fs';
import { ghostSwarm, probeTally, stepsWithin } from '../test/support/ghosts.ts';
import { killStartedWorkers, startDenoWorker, type TestWorker } from '../test/support/workers.ts';
import { opt } from './args.ts';

const windowMs = Number(opt('window-ms', '40000'));
const ghostCount = Number(opt('ghosts', '3'));
const admitTimeoutMs = opt('admit-timeout-ms', '');

const job = {
  id: 'ghosts',
  token: 'ghosts-token',
  config: {
    model: 'mlp',
    optimizer: 'sgd',
    // One example per evaluation: the windows compare training steps, not evaluations.
    hyperparameters: {
      lr: 0.05,
      momentum: 0.9,
      seed: 11,
      steps: 1_000_000,
      elastic: true,
      evalLimit: 1,
      ...(admitTimeoutMs === '' ? {} : { admitTimeoutMs: Number(admitTimeoutMs) }),
    },
    batchPerPeer: 32,
    minPeers: 2,
    startPeers: 2,
    maxPeers: 8,
  },
};

const server = await startServer({ jobs: [job], staticDir: null });
try {
  const honest = [0, 1].map((i) => startDenoWorker(server.url, job, ['--name', `honest-${i}`]));
  // Both workers vote (a ring of them trained) and are past their first steps' compilation.
  while (server.jobInfo(job.id)!.peers.filter((p) => p.voter).length < 2 || honest.some((w) => w.steps.length < 5)) {
    if (honest.some((w) => w.child.exitCode !== null))
      throw new Error(`a worker exited: ${honest[0].stderr.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const cpu0 = workerCpu(honest);
  const before = await stepsWithin(honest, windowMs);
  const cpu1 = workerCpu(honest);
  const ghosts = ghostSwarm(server.wsUrl, job, ghostCount, 'honest-0');
  const during = await stepsWithin(honest, windowMs);
  const cpu2 = workerCpu(honest);
  ghosts.stop();
  const probes = honest.map(probeTally);
  const left = honest.flatMap((w) => w.events.filter((e) => e.event === 'peer-left').map((e) => e.name));
  console.log(
    JSON.stringify({
      bench: 'ghosts',
      window_ms: windowMs,
      ghosts: ghostCount,
      admit_timeout_ms: admitTimeoutMs === '' ? 'default' : Number(admitTimeoutMs),
      steps_before: before,
      steps_with_ghosts: during,
      ratio: Number((during / before).toFixed(3)),
      // Both workers' CPU time (user + system) per step of the ring: what probing
      // costs them, whatever the machine's other load does to the wall-clock ratio.
      cpu_ms_per_step_before: Number(((cpu1 - cpu0) / before).toFixed(2)),
      cpu_ms_per_step_with_ghosts: Number(((cpu2 - cpu1) / during).toFixed(2)),
      probes_opened: probes.map((p) => p.opened),
      probes_failed: probes.map((p) => p.failed),
      most_probes_open: probes.map((p) => p.mostOpen),
      steps_while_probing: probes.map((p) => p.stepsWhileOpen),
      ghost_joins: ghosts.tally.joins,
      ghost_memberships: ghosts.tally.memberships,
      ghost_refusals: ghosts.tally.refusals,
      members_after: server.jobInfo(job.id)!.peers.map((p) => p.name),
      peer_left_seen_by_workers: left,
      ring_sizes: [...new Set(honest.flatMap((w) => w.steps.map((s) => s.size)))],
    }),
  );
} finally {
  killStartedWorkers();
  await server.close();
}

/** The workers' CPU time so far (ms, user + system, from /proc: Linux only). */
function workerCpu(workers: TestWorker[]): number {
  let ticks = 0;
  for (const w of workers) {
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th of the whole line.
    const fields = readFileSync(`/proc/${w.child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks * 10; // USER_HZ is 100 on Linux
}
