/**
 * Where a rule-breaking peer is told to whoever acts on it. The communicator
 * (framing, flooding, false aborts), the contribution guard and the step
 * checks find misbehaviour; a session turns it into a report to the signaling
 * server, which ejects the peer once a majority of its voters reported it.
 * The sink is handed to each finder (options, constructor), so a report never
 * depends on someone listening to the event bus; the `peer-misbehaved` event
 * still goes out for the timeline and the page.
 */

/** One finding: `peer` (a rank of the ring `rank` found it on) broke the rules, `reason` says how. */
export interface Misbehaviour {
  /** The rank that found it. */
  rank: number;
  /** The rank that broke the rules, in the same ring. */
  peer: number;
  reason: string;
}

export interface MisbehaviourSink {
  /** Takes one finding; called once per peer per finder, and must not throw. */
  peerMisbehaved(finding: Misbehaviour): void;
}
