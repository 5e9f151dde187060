/**
 * What one plain loopback TCP stream costs when the receiver reads through Node's `'data'` events
 * (a fresh buffer per read, as `raw_tcp_MBps` of `bench allreduce` reads) against reading in place
 * into one reused buffer (`onread`, as the TCP links and `raw_tcp_in_place_MBps` read):
 *   npx tsx bench/tcp-read-paths.ts [--bytes 268435456] [--rounds 3]
 * This process writes `--bytes` from one reused 1 MiB block; a child process it forks dials it and
 * reads, then answers one byte. Turn about per round, it prints one line per run: the rate and the
 * CPU of both processes (JavaScript and the kernel on their behalf) per GiB moved.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { dialReading, writeAll, type RawRead } from '../src/cli/commands/bench-raw-tcp.node.ts';

const { values, positionals } = parseArgs({
  options: { bytes: { type: 'string', default: String(256 << 20) }, rounds: { type: 'string', default: '3' } },
  allowPositionals: true,
});
const bytes = Number(values.bytes);

if (positionals[0] === 'read') await read(positionals[1] as RawRead, Number(positionals[2]));
else await write();

/** The child: dials the writer, counts `bytes` as `path` reads, reports its CPU and acknowledges. */
async function read(path: RawRead, port: number): Promise<void> {
  const cpu0 = process.cpuUsage();
  const { socket, done } = dialReading(port, bytes, path);
  await done;
  const cpu = process.cpuUsage(cpu0);
  process.send!({ cpu_s: (cpu.user + cpu.system) / 1e6 });
  socket.end(Buffer.alloc(1));
}

/** The parent: per round and path, listens, forks a reader, streams and times until acknowledged. */
async function write(): Promise<void> {
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const path of ['data-events', 'in-place'] as const) {
      const server = createServer().listen(0, '127.0.0.1');
      await once(server, 'listening');
      const port = (server.address() as { port: number }).port;
      const child = fork(fileURLToPath(import.meta.url), ['read', path, String(port), '--bytes', String(bytes)]);
      const [socket] = (await once(server, 'connection')) as [Socket];
      const reported = once(child, 'message') as Promise<[{ cpu_s: number }]>;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await writeAll(socket, bytes);
      await once(socket, 'data');
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      const [{ cpu_s }] = await reported;
      const cpuPerGiB = ((cpu.user + cpu.system) / 1e6 + cpu_s) / (bytes / 1024 ** 3);
      console.log(
        JSON.stringify({ round, path, MBps: Math.round(bytes / seconds / 1e6), cpu_s_per_GiB: +cpuPerGiB.toFixed(2) }),
      );
      socket.destroy();
      server.close();
      await once(child, 'exit');
    }
  }
}
