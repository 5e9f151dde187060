/**
 * The one JSON line a worker ends with (`worker --json`, and the launcher's
 * `result` event): what it trained, how fast, what carried its links, and the
 * checks every rank must agree on (weights, vocabulary, table split).
 */
import { crc32 } from '../../checkpoint/crc32.ts';
import type { TcpLinkEndpoint } from '../../comm/tcp-link.node.ts';
import type { Session } from '../../distributed/session/session.ts';
import type { DistributedTrainResult } from '../../distributed/train/trainer-types.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { CheckpointSaver } from './checkpoint-saver.node.ts';
import { evaluationFailed } from '../evaluation-failure.ts';
import { peakRssBytes } from '../peak-rss.node.ts';
import type { loadTrainingData } from '../options/training-data.node.ts';

export type TrainingData = Awaited<ReturnType<typeof loadTrainingData>>;

export interface WorkerRun {
  result: DistributedTrainResult;
  session: Session;
  data: TrainingData;
  gpu: Gpu;
  tcp: TcpLinkEndpoint | undefined;
  saver: CheckpointSaver;
  /** Where a recovery checkpoint went, if one was written. */
  recoveryPath: string | null;
  /** The CRC-32 of this rank's last handed-out weights: replicas that agree print the same number. */
  weightsCrc: number | null;
}

export function workerSummary({ result, session, data, gpu, tcp, saver, recoveryPath, weightsCrc }: WorkerRun) {
  return {
    rank: result.rank,
    size: result.size,
    steps: result.steps,
    epochs: result.epochs,
    test_accuracy: result.testAccuracy,
    test_loss: result.testLoss,
    train_loss: result.trainLoss,
    samples_per_s: result.samplesPerS,
    tokens_per_s: result.tokensPerS,
    params: result.params,
    allreduce_bytes: result.allreduceBytes,
    collectives_per_step: result.rounds?.collectives ?? null,
    sequential_collectives_per_step: result.rounds?.sequential ?? null,
    negotiations_per_step: result.rounds?.negotiations ?? null,
    collectives_by_name_per_step: result.rounds?.byName ?? null,
    gradient_buckets_per_step: result.rounds?.buckets ?? null,
    // Exposed allreduce, s per step (every step but the first): from the end of this rank's gradient read-back to its
    // update applied, what the step waited on the ring after its own compute (observe/exposed-wait.ts).
    exposed_allreduce_s_per_step: secondsOf(result.rounds?.exposedMs),
    train_seconds: result.trainSeconds,
    runtime: result.runtime,
    adapter: result.adapter,
    gpu_waits: gpu.waits,
    stopped_by: result.stoppedBy ? { code: result.stoppedBy.code, message: result.stoppedBy.message } : null,
    lost_ranks: result.lostRanks,
    recovery: recoveryPath,
    no_recovery: result.noRecovery ?? null,
    weights_crc32: weightsCrc,
    // SHA-256 of this rank's final weights and optimizer state, as the ring agreed on it (state-agreement.ts).
    weights_hash: result.weightsHash ?? null,
    // The precision this rank trained at; f16-mixed: the steps an overflow skipped (on every rank alike) and its loss scale.
    precision: result.mixedPrecision ? 'f16-mixed' : 'f32',
    skipped_steps: result.mixedPrecision?.skippedSteps ?? null,
    loss_scale: result.mixedPrecision?.lossScale ?? null,
    // What carried each of this rank's links on its last ring ('tcp' or 'webrtc'), and TCP connections it refused.
    links: session.links,
    tcp_refused: tcp?.refused ?? 0,
    // A text job: the vocabulary this rank built from its copy of the text (every rank's must agree).
    vocabulary_crc32: data.train.vocabulary ? crc32(new TextEncoder().encode(data.train.vocabulary)) : null,
    vocabulary_size: data.train.vocabulary ? data.train.classes : null,
    // A table job: the split this rank made from its copy (every rank's must agree).
    table_split:
      session.settings.data.tableSha256 !== undefined
        ? {
            train: data.train.count,
            test: data.test.count,
            test_crc32: crc32(
              new Uint8Array(data.test.inputs.buffer, data.test.inputs.byteOffset, data.test.inputs.byteLength),
            ),
          }
        : null,
    // The last save at --save that failed (no later one landed), and where its state went instead.
    save_failed: saver.trouble,
    evaluation_failed: evaluationFailed(result.evaluationFailure),
    peak_rss_bytes: peakRssBytes(),
  };
}

function secondsOf(ms: number | null | undefined): number | null {
  return ms === null || ms === undefined ? null : ms / 1000;
}
