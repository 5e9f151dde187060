/**
 * The signals that choose each pair's transport (mesh.ts). They travel the
 * same path as WebRTC's offers, within one job and one membership epoch, and
 * are told apart from those by their `ringtrainLink` key.
 *
 *   hello   {ringtrainLink: 'hello', tcp?: 'host:port', tls?: fingerprint}
 *                                                       every rank to every other, first; `tcp` only
 *                                                       from a peer listening for TCP links, `tls`
 *                                                       (its certificate's SHA-256) when it serves TLS
 *   webrtc  {ringtrainLink: 'webrtc'}                     the dialler (lower rank) to the listener:
 *                                                       the TCP link failed, use WebRTC instead
 */
import type { Signaler } from './signaler.ts';

export type LinkChoice = { ringtrainLink: 'hello'; tcp?: string; tls?: string } | { ringtrainLink: 'webrtc' };

export function isLinkChoice(data: unknown): data is LinkChoice {
  return typeof data === 'object' && data !== null && 'ringtrainLink' in data;
}

/** Reads a hello's advertised address; undefined when there is none or it is malformed. */
export function helloAddress(c: LinkChoice): string | undefined {
  return c.ringtrainLink === 'hello' && typeof c.tcp === 'string' && c.tcp.length <= 300 ? c.tcp : undefined;
}

/** Reads a hello's certificate fingerprint (TLS links); undefined when it serves plain TCP. */
export function helloFingerprint(c: LinkChoice): string | undefined {
  return c.ringtrainLink === 'hello' && typeof c.tls === 'string' && /^[0-9A-F:]{1,200}$/.test(c.tls)
    ? c.tls
    : undefined;
}

/**
 * One subscription to a signaler, split in two: link choices go to `onChoice`, everything else
 * to the `webrtc` signaler, which keeps what came before its subscribers did (a peer that chose
 * WebRTC early may send its offer while this rank still waits on another peer's choice).
 */
export class ChoiceSplitter {
  readonly webrtc: Signaler;
  private log: { from: number; data: unknown }[] = [];
  private handlers = new Set<(from: number, data: unknown) => void>();
  private unsubscribe: () => void;

  constructor(signaler: Signaler, onChoice: (from: number, choice: LinkChoice) => void) {
    this.unsubscribe = signaler.onSignal((from, data) => {
      if (isLinkChoice(data)) return onChoice(from, data);
      this.log.push({ from, data });
      for (const h of [...this.handlers]) h(from, data);
    });
    this.webrtc = {
      send: (to, data) => signaler.send(to, data),
      onSignal: (handler) => {
        this.handlers.add(handler);
        for (const s of [...this.log]) handler(s.from, s.data);
        return () => {
          this.handlers.delete(handler);
          if (this.idle && this.handlers.size === 0) this.close();
        };
      },
    };
  }

  private idle = false;

  /** Every pair has chosen: stop listening once WebRTC's own listeners are gone too (late ICE candidates still reach them). */
  closeWhenIdle(): void {
    this.idle = true;
    if (this.handlers.size === 0) this.close();
  }

  /** Stops listening now (the attempt failed). */
  close(): void {
    this.unsubscribe();
    this.handlers.clear();
    this.log = [];
  }
}
