/**
 * Horovod's broadcast_parameters and broadcast_optimizer_state: before the
 * first step every rank takes the root's weights and optimizer state, so the
 * replicas start identical (and a peer joining a running job catches up).
 */
import type { Communicator } from '../../comm/communicator.ts';
import { allreduce } from '../../collectives/allreduce.ts';
import { broadcast, broadcastInPlace } from '../../collectives/broadcast.ts';
import type { Model } from '../../engine/model.ts';
import type { Optimizer } from '../../engine/optimizer.ts';

export interface BroadcastOptions {
  root?: number;
  timeoutMs?: number;
}

/** Every rank ends with the root's parameters. */
export async function broadcastParameters(comm: Communicator, model: Model, o: BroadcastOptions = {}): Promise<void> {
  const root = o.root ?? 0;
  const flat = comm.rank === root ? await model.readParams() : new Float32Array(model.flatLength);
  // In place: a copy on every rank would hold the model's weights twice while they move.
  await broadcastInPlace(comm, flat, {
    root,
    name: 'parameters',
    shape: [model.flatLength],
    timeoutMs: o.timeoutMs,
  });
  if (comm.rank !== root) model.writeParams(flat);
}

/**
 * Every rank ends with the root's optimizer state (moments, velocity, step count). The step count
 * goes first: an optimizer that has taken no step holds the state it was made with, zeros on every
 * rank, so a root at step 0 (the start of every job that does not resume) sends no moments, and
 * the workers never read back and exchange state the size of the model just to overwrite zeros.
 */
export async function broadcastOptimizerState(
  comm: Communicator,
  optimizer: Optimizer,
  o: BroadcastOptions = {},
): Promise<void> {
  const root = o.root ?? 0;
  const [rootStep] = await broadcast(comm, Float32Array.of(optimizer.stepCount), {
    root,
    name: 'optimizer/step',
    shape: [1],
    timeoutMs: o.timeoutMs,
  });
  if (rootStep === 0) {
    // A rank that did step (never at a job's start) takes the made state: zeros.
    if (optimizer.stepCount !== 0) optimizer.importState(zerosLike(await optimizer.exportState()));
    return;
  }
  const state = await optimizer.exportState();
  // Same names and lengths on every rank (same model and optimizer kind), sorted so the order agrees.
  const names = Object.keys(state)
    .filter((name) => name !== 'step')
    .sort();
  const out: Record<string, Float32Array> = { step: Float32Array.of(rootStep) };
  for (const name of names) {
    out[name] = await broadcastInPlace(comm, state[name], {
      root,
      name: `optimizer/${name}`,
      shape: [state[name].length],
      timeoutMs: o.timeoutMs,
    });
  }
  if (comm.rank !== root) optimizer.importState(out);
}

function zerosLike(state: Record<string, Float32Array>): Record<string, Float32Array> {
  return Object.fromEntries(Object.entries(state).map(([name, v]) => [name, new Float32Array(v.length)]));
}

/** Averages scalar metrics over all ranks (Horovod's MetricAverageCallback), weighted by `weight` (e.g. sample count). */
export async function averageMetrics(
  comm: Communicator,
  metrics: Record<string, number>,
  weight = 1,
  timeoutMs?: number,
): Promise<Record<string, number>> {
  const names = Object.keys(metrics).sort();
  const buf = new Float32Array(names.length + 1);
  names.forEach((n, i) => (buf[i] = metrics[n] * weight));
  buf[names.length] = weight;
  const sum = await allreduce(comm, buf, { op: 'sum', name: `metrics[${names.join(',')}]`, timeoutMs });
  const total = sum[names.length];
  return Object.fromEntries(names.map((n, i) => [n, total > 0 ? sum[i] / total : NaN]));
}
