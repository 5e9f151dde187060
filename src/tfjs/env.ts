/** The environment `ringtrain launch` hands each worker (defined beside the library's own init, which reads it too). */
export * from '../distributed/session/launch-env.ts';
