/**
 * Network namespaces for the NAT-traversal tests: every peer in its own
 * namespace, joined by a veth pair to a relay namespace that does not forward
 * IP packets. A peer reaches the relay's address (where coturn and the
 * signaling server listen) but no other peer, as two homes behind NATs reach
 * a TURN server but not each other. The test's own namespace gets one more
 * veth pair to the relay, and a route to the relay's address, to ask the server's HTTP
 * endpoints and see that coturn answers.
 *
 * A namespace lives as long as its holder process (`unshare -n` then `cat`,
 * which ends when the test closes its stdin or dies), so nothing outlives
 * the test. Commands run inside with `nsenter -t <holder> -n`. Only
 * 10.213.x.x addresses, and only inside namespaces made here.
 */
import { execFile, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where coturn and the signaling server listen, on the relay namespace's loopback; one address per subnet, so test files running at once never add the same route. */
export function relayIp(subnet: number): string {
  return `10.213.${100 + subnet}.1`;
}

export interface Namespace {
  readonly name: string;
  /** The holder process: its network namespace is this one. */
  readonly pid: number;
  /** Runs `cmd` inside and resolves with its stdout (throws on a non-zero exit). */
  exec(cmd: string, args: string[]): Promise<string>;
  /** Starts a long-running process inside; the caller waits on it and kills it. */
  spawn(cmd: string, args: string[], options?: SpawnOptions): ChildProcess;
}

export interface Topology {
  relay: Namespace;
  /** The relay's address (relayIp(subnet)), reachable from every peer and from the test. */
  relayIp: string;
  peers: Namespace[];
  /** Ends every holder (the namespaces, and the veth pairs in them, go with them). */
  close(): Promise<void>;
}

async function holder(name: string): Promise<{ ns: Namespace; child: ChildProcess }> {
  const child = spawn('unshare', ['-n', 'sh', '-c', 'ip link set lo up && echo up && exec cat'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`namespace holder ${name} exited (${code}): ${err}`)));
  });
  const pid = child.pid!;
  const ns: Namespace = {
    name,
    pid,
    exec: async (cmd, args) => (await run('nsenter', ['-t', String(pid), '-n', cmd, ...args])).stdout,
    spawn: (cmd, args, options = {}) => spawn('nsenter', ['-t', String(pid), '-n', cmd, ...args], options),
  };
  return { ns, child };
}

/**
 * Makes a relay namespace and `peerCount` peer namespaces. `subnet` (1..9)
 * keeps the addresses of two topologies apart (test files run in parallel):
 * peer i is 10.213.<subnet*10+i>.1, the relay relayIp(subnet).
 */
export async function makeTopology(peerCount: number, subnet = 1): Promise<Topology> {
  const holders: ChildProcess[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(
      holders.splice(0).map(
        (h) =>
          new Promise<void>((resolve) => {
            if (h.exitCode !== null || h.signalCode !== null) return resolve();
            h.once('exit', () => resolve());
            h.stdin!.end();
          }),
      ),
    );
  };
  try {
    const r = await holder('relay');
    holders.push(r.child);
    const relay = r.ns;
    // The relay must not forward: that is what keeps the peers apart.
    if ((await relay.exec('cat', ['/proc/sys/net/ipv4/ip_forward'])).trim() !== '0')
      throw new Error('a new namespace forwards IP packets; this test needs it not to');
    const relayAddress = relayIp(subnet);
    await relay.exec('ip', ['addr', 'add', `${relayAddress}/32`, 'dev', 'lo']);
    const peers: Namespace[] = [];
    for (let i = 1; i <= peerCount; i++) {
      const p = await holder(`peer${i}`);
      holders.push(p.child);
      const net = `10.213.${subnet * 10 + i}`;
      await run('ip', [
        'link',
        'add',
        'eth0',
        'netns',
        String(p.ns.pid),
        'type',
        'veth',
        'peer',
        'name',
        `to-peer${i}`,
        'netns',
        String(relay.pid),
      ]);
      await p.ns.exec('ip', ['addr', 'add', `${net}.1/24`, 'dev', 'eth0']);
      await p.ns.exec('ip', ['link', 'set', 'eth0', 'up']);
      await p.ns.exec('ip', ['route', 'add', 'default', 'via', `${net}.2`]);
      await relay.exec('ip', ['addr', 'add', `${net}.2/24`, 'dev', `to-peer${i}`]);
      await relay.exec('ip', ['link', 'set', `to-peer${i}`, 'up']);
      peers.push(p.ns);
    }
    // The test's side of its own link is named after the relay's holder, unique among parallel test files.
    const testNet = `10.213.${subnet * 10 + 9}`;
    const testEnd = `turn${relay.pid}`.slice(0, 15);
    await run('ip', ['link', 'add', testEnd, 'type', 'veth', 'peer', 'name', 'to-test', 'netns', String(relay.pid)]);
    await run('ip', ['addr', 'add', `${testNet}.1/24`, 'dev', testEnd]);
    await run('ip', ['link', 'set', testEnd, 'up']);
    await relay.exec('ip', ['addr', 'add', `${testNet}.2/24`, 'dev', 'to-test']);
    await relay.exec('ip', ['link', 'set', 'to-test', 'up']);
    await run('ip', ['route', 'add', `${relayAddress}/32`, 'via', `${testNet}.2`]);
    return { relay, relayIp: relayAddress, peers, close };
  } catch (err) {
    await close();
    throw err;
  }
}
