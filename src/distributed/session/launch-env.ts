/** The environment `ringtrain launch` hands each worker, read by init() from ringtrain and from ringtrain/tfjs (the token never goes in argv, which `ps` shows). */
export const SERVER_ENV = 'RINGTRAIN_SERVER';
export const JOB_ENV = 'RINGTRAIN_JOB';
/** The same variable `ringtrain worker` reads (src/cli/options/secrets.node.ts). */
export const TOKEN_ENV = 'RINGTRAIN_TOKEN';
/** This worker's number among the launcher's processes (0-based) and how many it started. */
export const LOCAL_RANK_ENV = 'RINGTRAIN_LOCAL_RANK';
export const LOCAL_SIZE_ENV = 'RINGTRAIN_LOCAL_SIZE';
/** Where this worker writes its Chrome-trace events when the launcher was given --timeline (it merges them). */
export const TIMELINE_ENV = 'RINGTRAIN_TIMELINE';
/**
 * The name this worker joins under (`worker-<i>`). The launcher looks it up in
 * the job's membership to prefix the worker's lines with its rank, which only
 * the ring decides (and which moves when an elastic ring re-forms).
 */
export const NAME_ENV = 'RINGTRAIN_NAME';
