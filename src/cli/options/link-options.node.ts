/**
 * The worker's link flags: `--transport auto|webrtc`, `--listen HOST:PORT`,
 * `--advertise ADDR`, `--link-tls`. With auto (the default) a worker listens for TCP links
 * and two workers that reach each other link by TCP; everything else (a
 * page, a peer that does not answer on its address) uses WebRTC.
 */
import { Option, type Command } from 'commander';
import { makeLinkCertificate } from '../../comm/link-cert.node.ts';
import { splitHostPort } from '../../comm/tcp-endpoint.ts';
import { TcpLinkEndpoint } from '../../comm/tcp-link.node.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

export const LINK_TRANSPORTS = ['auto', 'webrtc'] as const;
export type LinkTransportChoice = (typeof LINK_TRANSPORTS)[number];

/** Loopback by default: peers on this machine link by TCP; other machines need --listen and --advertise. */
export const DEFAULT_LISTEN = '127.0.0.1:0';

export function addLinkOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--transport <kind>',
        'auto: TCP to the peers that listen too and can be reached, WebRTC to the rest; webrtc: WebRTC only',
      )
        .choices([...LINK_TRANSPORTS])
        .default('auto'),
    )
    .option(
      '--listen <host:port>',
      `where to listen for TCP links from other workers (port 0: a free one)`,
      DEFAULT_LISTEN,
    )
    .option(
      '--advertise <addr>',
      'the address (host or host:port) other workers dial to reach this one (default: the --listen address; needed with --listen 0.0.0.0:PORT)',
    )
    .option(
      '--link-tls',
      'encrypt TCP links with TLS (a certificate made at start, pinned by the fingerprint the server relays); a worker without it links to this one by WebRTC',
      false,
    );
}

/** Opens this worker's TCP listener, or none with `--transport webrtc`. */
export async function openLinkListener(
  o: { transport?: string; listen?: string; advertise?: string; linkTls?: boolean },
  log: (line: string) => void,
): Promise<TcpLinkEndpoint | undefined> {
  if ((o.transport ?? 'auto') === 'webrtc') return undefined;
  const at = splitHostPort(o.listen ?? DEFAULT_LISTEN);
  if (!at)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--listen '${o.listen}' is not HOST:PORT; write e.g. 127.0.0.1:0 or 0.0.0.0:7000`,
    );
  return TcpLinkEndpoint.listen({
    host: at.host,
    port: at.port,
    advertise: o.advertise,
    log,
    tls: o.linkTls ? makeLinkCertificate() : undefined,
  });
}
