/**
 * Adding a job to the server's jobs by id: the checks its spec must pass first
 * (schema, training settings, ICE servers, an id not yet taken).
 */
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import { describeIssues, jobSpecSchema, type JobSpec, type MembershipMsg } from '../src/signaling/protocol.ts';
import { checkHyperparameters } from '../src/job/settings.ts';
import type { AdmissionLimits } from './admission.ts';
import { checkJobIce, type IceOptions } from './ice.ts';
import { Job, type MembershipPeer } from './jobs.ts';

/** Checks `spec` and adds it to `jobs`; throws InvalidArgument, and adds nothing, when it is bad. */
export function addJobTo(
  jobs: Map<string, Job>,
  spec: JobSpec,
  serverIce: IceOptions,
  limits: Pick<AdmissionLimits, 'maxPeersPerAddress' | 'maxCandidates' | 'maxCandidatesPerAddress'>,
  onMembership?: (job: string, peers: readonly MembershipPeer[], change: MembershipMsg['change']) => void,
): void {
  const parsed = jobSpecSchema.safeParse(spec);
  if (!parsed.success) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `bad job spec: ${describeIssues(parsed.error)}`, {
      job: (spec as { id?: unknown })?.id,
    });
  }
  // The settings are checked here, once, so a job no peer could train is refused where it is made
  // (naming the setting) rather than at every peer that joins it.
  try {
    checkHyperparameters(parsed.data.config.hyperparameters);
  } catch (err) {
    const e = err as RingtrainError;
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `bad job spec: job '${parsed.data.id}': ${e.message}`,
      { job: parsed.data.id, ...e.detail },
      { cause: err },
    );
  }
  if (parsed.data.ice) checkJobIce(parsed.data.ice, serverIce, `job '${parsed.data.id}'`);
  if (jobs.has(parsed.data.id)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job '${parsed.data.id}' already exists; pick another id`);
  }
  const id = parsed.data.id;
  jobs.set(
    id,
    new Job(parsed.data, {
      maxPeersPerAddress: limits.maxPeersPerAddress,
      candidates: { maxCandidates: limits.maxCandidates, maxCandidatesPerAddress: limits.maxCandidatesPerAddress },
      onMembership: onMembership && ((peers, change) => onMembership(id, peers, change)),
    }),
  );
}
