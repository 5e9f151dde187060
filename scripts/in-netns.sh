#!/bin/sh
# Runs a command inside a private network namespace, so that nothing a test does
# (WebRTC candidate gathering above all) can reach an address outside this machine.
# The namespace has loopback (enough for @roamhq/wrtc) and one veth pair with a
# test-only address (Chromium gathers no ICE candidate on loopback alone).
# Needs root or CAP_SYS_ADMIN (CI runs as root). Nested calls run the command as is.
set -eu
if [ "${RINGTRAIN_NETNS:-}" = "1" ]; then exec "$@"; fi
if ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
  echo "in-netns: needs 'unshare' (util-linux) and 'ip' (iproute2): apt-get install -y util-linux iproute2" >&2
  exit 2
fi
if ! unshare -n true 2>/dev/null; then
  echo "in-netns: cannot create a network namespace (run as root, or grant CAP_SYS_ADMIN)." >&2
  echo "in-netns: WebRTC and browser tests must not send traffic outside a private namespace." >&2
  exit 2
fi
export RINGTRAIN_NETNS=1
exec unshare -n sh -c '
  set -e
  ip link set lo up
  ip link add rt0 type veth peer name rt1
  ip addr add 10.213.0.1/24 dev rt0
  ip link set rt0 up
  ip link set rt1 up
  ip route add default via 10.213.0.2
  exec "$@"
' sh "$@"
