/**
 * Datagrams the kernel dropped because a UDP socket's receive buffer was full (`RcvbufErrors` in
 * /proc/net/snmp and `Udp6RcvbufErrors` in /proc/net/snmp6), counted in this process's network
 * namespace: in `bench allreduce` that is the benchmark's own, so every drop is one of its peers'.
 * WebRTC carries SCTP over UDP, and on loopback a peer's socket buffer (the kernel's default,
 * 208 KiB) is the only queue that overflows: a burst dropped whole is recovered only by a
 * retransmission timeout, which stalls the link for 0.3-1.6 s. A run's drops say how much of its
 * spread that was.
 */
import { readFileSync } from 'node:fs';

/** The sum of the IPv4 and IPv6 UDP receive-buffer drop counters in the two files' text, or null if either lacks its counter. */
export function parseUdpReceiveDrops(snmp: string, snmp6: string): number | null {
  // snmp: a header line of names, then a line of values, each starting "Udp:".
  const udp = snmp.split('\n').filter((l) => l.startsWith('Udp:'));
  const names = udp[0]?.trim().split(/\s+/) ?? [];
  const values = udp[1]?.trim().split(/\s+/) ?? [];
  const at = names.indexOf('RcvbufErrors');
  const v4 = at > 0 ? Number(values[at]) : NaN;
  // snmp6: one "Name value" pair a line.
  const line6 = snmp6.split('\n').find((l) => l.startsWith('Udp6RcvbufErrors'));
  const v6 = line6 ? Number(line6.trim().split(/\s+/)[1]) : NaN;
  return Number.isInteger(v4) && Number.isInteger(v6) ? v4 + v6 : null;
}

/** This network namespace's UDP receive-buffer drops so far; null where the counters cannot be read (not Linux). */
export function udpReceiveDrops(): number | null {
  try {
    return parseUdpReceiveDrops(readFileSync('/proc/net/snmp', 'utf8'), readFileSync('/proc/net/snmp6', 'utf8'));
  } catch {
    return null;
  }
}
