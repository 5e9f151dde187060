import type { Readable } from 'node:stream';

/**
 * Calls `onLine` with each complete line a child process writes (without the
 * newline); a last line without a newline is held until the next chunk.
 */
export function forEachLine(stream: Readable, onLine: (line: string) => void): void {
  let partial = '';
  stream.setEncoding('utf8').on('data', (chunk: string) => {
    partial += chunk;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) onLine(line);
  });
}
