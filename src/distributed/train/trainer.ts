/**
 * Data-parallel training on one rank of a ring: the loop every worker runs,
 * under Node, Deno or in a browser tab. Runtime-agnostic: the caller brings
 * the GPU, the communicator, the data, and where checkpoints go.
 *
 * Each step: forward/backward on this rank's share of the ring's global batch
 * (global-batch.ts), average the gradients over the ring weighed by the shares
 * (DistributedOptimizer), update. With plain SGD one step of N ranks is exactly
 * one step of one rank at the global batch. The global batch is the job's
 * `globalBatch`, fixed whatever the ring's size (an elastic ring that loses a
 * peer takes the same steps as before), or else `batch` per rank. Shares are
 * equal, or follow each rank's measured speed (`balance: 'speed'`, shares.ts).
 *
 * When a collective fails (a peer left, a rank stalled) the loop stops at
 * once: the failed step applied no update, so the weights are those of the
 * last completed step on every survivor. Any error that ends the run (a broken
 * ring, a lost server, a diverged loss) hands those weights to `onRecovery`,
 * unless this rank completed no step (then the weights are only where it
 * started, which the caller already has). A diverged run hands over its last
 * evaluated state instead (finite weights, finite loss), or nothing.
 *
 * The parts: the loop that single-peer training runs too (training-loop.ts),
 * where training stands (training-state.ts), the ring's part in each step and
 * how it re-forms (ring-peers.ts, elastic-ring.ts), and here what runs around
 * each gradient allreduce, the building of it all and the result.
 */
import { useMixedPrecision } from './mixed-precision.ts';
import { ErrorCode, isRingtrainError, RingtrainError } from '../../core/errors.ts';
import { detectRuntime } from '../../core/runtime.ts';
import { createModel, createOptimizer, useMicroBatch } from '../../engine/index.ts';
import { datasetMetadata } from '../../data/dataset.ts';
import { DeferredScalars } from '../../gpu/readback.ts';
import { ringOptimizer } from './diloco.ts';
import { ElasticRing } from '../session/elastic-ring.ts';
import type { GradientCheck } from '../reduce/gradient-check.ts';
import { endsRun, lostRanksOf } from '../session/ring-errors.ts';
import { RingPeers, ringRecord } from './ring-peers.ts';
import { StepClock } from './step-clock.ts';
import { StepChecks } from '../robust/step-checks.ts';
import { stateDigestRide } from '../robust/state-agreement.ts';
import { guardOf, refuseConflictingConfig } from './train-config.ts';
import { checkDataFits, modelSpecFor } from './model-fit.ts';
import { TrainingLoop } from './training-loop.ts';
import type { DistributedTrainArgs, DistributedTrainResult } from './trainer-types.ts';

export type {
  DistributedTrainArgs,
  DistributedTrainConfig,
  DistributedTrainResult,
  ElasticHooks,
} from './trainer-types.ts';

export async function trainDistributed(args: DistributedTrainArgs): Promise<DistributedTrainResult> {
  const { gpu, train, config } = args;
  if (config.elastic && !args.elastic) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'this job trains elastically, but no membership hooks were given; pass session.elastic as the elastic option',
    );
  }
  refuseConflictingConfig(config);
  const bus = args.bus ?? args.comm.events;
  const ring = new ElasticRing(args.comm, config.elastic ? args.elastic : undefined, {
    bus,
    timeoutMs: config.timeoutMs,
  });
  const model = args.prepared?.model ?? createModel(gpu, modelSpecFor(config, train));
  try {
    checkDataFits(model, train);
    useMicroBatch(model, config.microBatch, config.batch);
    // A prepared model was made at the job's precision before its plans (warm-up.ts).
    if (config.precision === 'f16-mixed' && !args.prepared) useMixedPrecision(model);
  } catch (err) {
    args.prepared?.optimizer.destroy();
    model.destroy();
    throw err;
  }
  const inner =
    args.prepared?.optimizer ??
    createOptimizer(model, {
      kind: config.optimizer,
      lr: config.lr,
      momentum: config.momentum,
      weightDecay: config.weightDecay,
    });
  // The step's loss rides along with the gradient read (one GPU→CPU wait per step, not two).
  const losses = new DeferredScalars(gpu, 4);
  const clock = new StepClock();
  const ringOpt = ringOptimizer(ring, model, inner, {
    ...config,
    checks: gradientChecks(args, clock, ring.agreementCheck),
  });
  try {
    const peers = new RingPeers(args, { ring, model, ringOpt, clock });
    const record = ringRecord(config, model, ring, datasetMetadata(train));
    return await runOnRing(
      args,
      new TrainingLoop(args, { peers, record, model, optimizer: ringOpt.optimizer, losses, bus }),
      peers,
      model.paramCount,
    );
  } finally {
    losses.destroy();
    // Local SGD's optimizer state includes the outer state: this is the one that carries it.
    ringOpt.optimizer.destroy();
    model.destroy();
  }
}

/** Trains to the end, or until an error ends the run: then the result says why, after the recovery hand-out. */
async function runOnRing(
  args: DistributedTrainArgs,
  loop: TrainingLoop,
  peers: RingPeers,
  params: number,
): Promise<DistributedTrainResult> {
  try {
    await loop.run();
    return { ...ringResult(args, loop, peers, params), weightsHash: await peers.stateHash(loop.state.step) };
  } catch (err) {
    // Whatever ended the run, the weights are those of the last step this rank completed.
    const why = isRingtrainError(err)
      ? err
      : new RingtrainError(ErrorCode.Aborted, `training failed: ${String(err)}`, undefined, { cause: err });
    // Tell the other ranks now (a diverged loss, a bug) rather than let them wait for our data until they time out.
    if (!peers.comm.error) peers.comm.abort(why);
    const noRecovery = await loop
      .recover(why)
      .catch((e: unknown) => `saving it failed: ${e instanceof Error ? e.message : String(e)}`);
    if (!endsRun(err)) throw err;
    // This rank's own: the ring broke, so nothing was agreed at its last step.
    const weightsHash = await peers.stateHash(loop.state.step).catch(() => undefined);
    return { ...ringResult(args, loop, peers, params, err), noRecovery, weightsHash };
  }
}

function ringResult(
  args: DistributedTrainArgs,
  loop: TrainingLoop,
  peers: RingPeers,
  params: number,
  stoppedBy?: RingtrainError,
): DistributedTrainResult {
  const { state } = loop;
  return {
    rank: peers.rank,
    size: peers.size,
    steps: state.step,
    epochs: state.epoch,
    testAccuracy: state.evaluation.accuracy,
    testLoss: state.evaluation.loss,
    trainLoss: state.trainLoss,
    samplesPerS: state.samplesPerS,
    tokensPerS: state.tokensPerS,
    allreduceBytes: state.allreduceBytes,
    rounds: peers.roundsPerStep(),
    trainSeconds: state.trainMs / 1000,
    params,
    runtime: detectRuntime(),
    adapter: args.gpu.info.description,
    stoppedBy,
    evaluationFailure: loop.evaluationFailure,
    lostRanks: stoppedBy ? lostRanksOf(stoppedBy) : [],
    completedSteps: state.completedSteps,
    mixedPrecision: peers.mixedPrecision,
  };
}

/**
 * What runs around each gradient allreduce, in order: the caller's look at the gradients as read
 * back (then this rank's compute is over: what balancing by speed divides by), the step checks (the
 * contribution guard, and with verify the verified allreduce: they check the gradients each rank is
 * about to send, and their sum), and the caller's look at the contribution about to be summed.
 */
function gradientChecks(
  args: DistributedTrainArgs,
  clock: StepClock,
  agreement: GradientCheck | undefined,
): GradientCheck[] {
  const { config } = args;
  const robust = config.aggregation !== undefined && config.aggregation.rule !== 'mean';
  const checks = new StepChecks({
    guard: guardOf(config),
    verify: config.verify,
    leaveOut: !robust,
    seed: config.seed,
    fusionThresholdBytes: config.fusionThresholdBytes,
    timeoutMs: config.timeoutMs,
    misbehaviour: args.misbehaviour,
  });
  const gradientsRead = clock.gradientsRead(args.transformGradients);
  const stepChecks: GradientCheck = {
    readsOnly: checks.readsOnly,
    before: (comm, local, step) => checks.before(comm, local, step),
    digest: (step) => checks.digest(step),
    after: (comm, reduced, scale, prescale) => checks.after(comm, reduced, scale, prescale),
    // Only with verify: the other checks look at no segment in transit.
    observe: config.verify ? (comm, offset, values) => checks.observe(comm, offset, values) : undefined,
    observeSent: config.verify ? (comm, offset, values) => checks.observeSent(comm, offset, values) : undefined,
  };
  const transform = args.transformContribution;
  const contribution: GradientCheck = transform
    ? { rankLocal: true, before: (_comm, local, step) => transform(local, step) }
    : {};
  // The membership agreement (an elastic ring's) and the state digests' gather start after this rank's
  // compute, once the step checks' gather has begun (signing it takes a while): begun earlier, a one-number
  // collective could come back before the gather begins, a round of its own.
  return [gradientsRead, stepChecks, ...(agreement ? [agreement] : []), stateDigestRide, contribution];
}
