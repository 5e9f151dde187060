#!/bin/sh
# Caps every TCP connection inside this network namespace at RATE each way, then runs the command:
#   sh scripts/in-netns.sh sh scripts/link-rate.sh 1600mbit node bin/ringtrain.js bench allreduce ...
# On one machine every link of a local ring shares its cores with the kernel's loopback copies, so a
# TCP allreduce here measures CPU share. Under a cap below what the CPU moves, each link behaves as a
# dedicated network link of RATE (a server's NIC, one flow per direction), and busbw against the
# same run's yardsticks shows how much of the network the ring's schedule uses.
# How: the namespace's ephemeral ports become 40000-40255 (listeners on port 0 and dialers both take
# theirs from there), and loopback gets one HTB class of RATE per destination port, found through a
# 256-bucket u32 hash on the port's low byte. So each connection's direction is its own class.
# IPv4 only (the links dial 127.0.0.1 or the namespace's 10.213.0.1); tc(8) from iproute2.
set -eu
if [ "${RINGTRAIN_NETNS:-}" != "1" ]; then
  echo "link-rate: run inside scripts/in-netns.sh (it changes the namespace's loopback)" >&2
  exit 2
fi
if [ $# -lt 2 ]; then
  echo "usage: link-rate.sh RATE command... (RATE as tc(8) reads it: 800mbit, 1600mbit, 4gbit)" >&2
  exit 2
fi
RATE=$1
shift
FIRST_PORT=40000
echo "$FIRST_PORT $((FIRST_PORT + 255))" >/proc/sys/net/ipv4/ip_local_port_range
# Traffic no filter claims (none should) is left uncapped.
tc qdisc add dev lo root handle 1: htb default 1 r2q 1000
tc class add dev lo parent 1: classid 1:1 htb rate 100gbit
tc filter add dev lo parent 1: prio 1 handle 2: protocol ip u32 divisor 256
# Bytes 20-23 past a 20-byte IPv4 header are the TCP ports; the low byte of the destination picks the bucket.
tc filter add dev lo parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x000000ff at 20 link 2:
i=0
while [ $i -lt 256 ]; do
  port=$((FIRST_PORT + i))
  bucket=$(printf %x $((port & 255)))
  class=$(printf %x $((i + 16)))
  tc class add dev lo parent 1: classid "1:$class" htb rate "$RATE" burst 256k cburst 256k
  tc filter add dev lo parent 1: prio 1 protocol ip u32 ht "2:$bucket:" match ip dport $port 0xffff flowid "1:$class"
  i=$((i + 1))
done
exec "$@"
