/**
 * Replacing a communicator's send, as faults and tests that watch the wire do: lent sends
 * (Communicator.lend, what the ring uses) bypass send, so they are routed through the replacement
 * too, as copies. Without this a replaced send would see only the messages that are not lent.
 */
import type { Communicator } from '../../src/comm/interface.ts';

/** Sets `comm.send` to `wrap(the send it had)`, and lent sends to go through it. */
export function interceptSends(comm: Communicator, wrap: (send: Communicator['send']) => Communicator['send']): void {
  comm.send = wrap(comm.send.bind(comm));
  comm.lend = (peer, tag, payload) => comm.send(peer, tag, payload);
}
