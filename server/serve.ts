/**
 * Runs the server in the foreground until SIGINT or SIGTERM, then closes it
 * (peers are told) and resolves. Used by `ringtrain server`.
 */
import process from 'node:process';
import { startServer, type RunningServer, type ServerOptions } from './index.ts';

export async function serveUntilSignal(
  options: ServerOptions,
  onStarted?: (server: RunningServer) => void,
): Promise<void> {
  const server = await startServer(options);
  onStarted?.(server);
  await untilSignal();
  await server.close();
}

/** Resolves on the first SIGINT or SIGTERM (Ctrl-C), and stops listening for them. */
export function untilSignal(): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
