/**
 * One peer's whole part in a job, in any runtime: train with the job's
 * settings on the session's ring (elastic when the job says so) and keep the
 * server told how it goes, so the page can show every peer's progress. The
 * `ringtrain worker` command and the page's Join button both run this.
 */
import type { TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';
import { ErrorCode } from '../../core/errors.ts';
import type { EventBus } from '../../core/events.ts';
import type { Dataset } from '../../data/dataset.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { trainConfigFromJob } from './job-config.ts';
import { peerPrecision, type Precision } from './mixed-precision.ts';
import type { Session } from '../session/session.ts';
import {
  trainDistributed,
  type DistributedTrainArgs,
  type DistributedTrainConfig,
  type DistributedTrainResult,
} from './trainer.ts';

/** Progress goes to the server at most this often (ms): enough for a page, little traffic. */
export const PROGRESS_EVERY_MS = 500;

export interface PeerTrainArgs extends Pick<
  DistributedTrainArgs,
  | 'onStep'
  | 'onEvaluate'
  | 'onWeights'
  | 'onRecovery'
  | 'shouldStop'
  | 'resume'
  | 'resumeName'
  | 'initialParams'
  | 'transformGradients'
  | 'transformContribution'
  | 'prepared'
> {
  gpu: Gpu;
  train: Dataset;
  test: Dataset;
  bus: EventBus;
  /** The precision this peer asked for (`worker --precision`): allowed only where the job lets peers mix them. */
  precision?: Precision;
  /** Gets each checkpoint this rank holds, with the job's training config. */
  onCheckpoint?: (c: TrainingCheckpoint, config: DistributedTrainConfig) => void | Promise<void>;
}

export async function trainAsPeer(session: Session, a: PeerTrainArgs): Promise<DistributedTrainResult> {
  const config = trainConfigFromJob(session.job.config, session.settings);
  config.precision = peerPrecision(session.job.id, session.settings.model, a.precision);
  let lastReport = 0;
  const result = await trainDistributed({
    gpu: a.gpu,
    comm: session.comm,
    elastic: session.elastic,
    misbehaviour: session.misbehaviour,
    train: a.train,
    test: a.test,
    config,
    bus: a.bus,
    resume: a.resume,
    resumeName: a.resumeName,
    initialParams: a.initialParams,
    shouldStop: a.shouldStop,
    transformGradients: a.transformGradients,
    transformContribution: a.transformContribution,
    prepared: a.prepared,
    onCheckpoint: a.onCheckpoint ? (c) => a.onCheckpoint!(c, config) : undefined,
    onWeights: a.onWeights,
    onRecovery: a.onRecovery,
    onStep: (s) => {
      a.onStep?.(s);
      const t = Date.now();
      if (t - lastReport < PROGRESS_EVERY_MS) return;
      lastReport = t;
      session.client.reportProgress({
        step: s.step,
        epoch: s.epoch,
        loss: s.loss,
        samplesPerS: s.samplesPerS,
        allreduceBytes: s.bytesSent,
        share: s.samples,
      });
    },
    onEvaluate: (e) => {
      a.onEvaluate?.(e);
      session.client.reportProgress({
        step: e.step,
        epoch: e.epoch,
        testAccuracy: e.testAccuracy,
        ...(Number.isFinite(e.testLoss) ? { testLoss: e.testLoss } : {}),
      });
    },
  });
  const final = {
    step: result.steps,
    allreduceBytes: result.allreduceBytes,
    ...(Number.isFinite(result.trainLoss) ? { loss: result.trainLoss } : {}),
    ...(Number.isFinite(result.testAccuracy) ? { testAccuracy: result.testAccuracy } : {}),
    ...(Number.isFinite(result.testLoss) ? { testLoss: result.testLoss } : {}),
  };
  session.client.reportProgress(final);
  // A fixed job stopped by a claim that a peer left: once the server has had time to see it go,
  // a claim it never bore out names its maker instead of the peer it blamed.
  if (result.stoppedBy?.code === ErrorCode.PeerLost) {
    const named = await session.judgeLossClaims();
    if (named) return { ...result, stoppedBy: named, lostRanks: [] };
  }
  return result;
}
