/**
 * What can be checked in a Containerfile without a container runtime, so CI
 * catches it: base images pinned (an exact version tag or a digest, never
 * `latest` or a bare name), the final stage running as a non-root user, a
 * HEALTHCHECK in the final stage (on /healthz where the image serves HTTP),
 * dependencies from the lock file (`npm ci`), and no secret baked in (an ENV
 * or ARG whose name says token, secret, password or key, or a copied key file).
 */

export interface ContainerfileRules {
  /** The image serves HTTP: its HEALTHCHECK must ask /healthz (not NONE). */
  servesHttp: boolean;
}

interface Instruction {
  line: number;
  op: string;
  args: string;
}

/** Instructions with continuation lines joined and comments dropped. */
export function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: Instruction | undefined;
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (!pending && (line === '' || line.startsWith('#'))) continue;
    const body = line.endsWith('\\') ? line.slice(0, -1) : line;
    if (pending) pending.args += ` ${body.trim()}`;
    else {
      const m = /^(\S+)\s*(.*)$/.exec(body)!;
      pending = { line: i + 1, op: m[1].toUpperCase(), args: m[2] };
    }
    if (!line.endsWith('\\')) {
      out.push(pending);
      pending = undefined;
    }
  }
  if (pending) out.push(pending);
  return out;
}

const SECRET_NAME = /(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL)/i;
const SECRET_FILE = /\.(pem|key|p12|pfx)\b|(^|\/)\.env\b|(^|\/)token\b/i;

/** Problems found, one line each (`line N: what`); empty when the file passes. */
export function lintContainerfile(text: string, rules: ContainerfileRules): string[] {
  const problems: string[] = [];
  const ins = instructions(text);
  const stages = new Set<string>();
  let finalStageStart = -1;
  for (const [idx, i] of ins.entries()) {
    if (i.op !== 'FROM') continue;
    finalStageStart = idx;
    const words = i.args.split(/\s+/).filter((w) => !w.startsWith('--'));
    const image = words[0] ?? '';
    const alias = words[1]?.toUpperCase() === 'AS' ? words[2] : undefined;
    if (!stages.has(image)) {
      const lastPart = image.split('/').pop()!;
      const digest = /@sha256:[a-f0-9]{64}$/.test(image);
      const tag = /:([A-Za-z0-9._-]+)$/.exec(lastPart.split('@')[0])?.[1];
      if (!digest && (!tag || tag === 'latest' || !/\d/.test(tag))) problems.push(`line ${i.line}: base image ${image} is not pinned (give an exact version tag or @sha256 digest)`);
    }
    if (alias) stages.add(alias);
  }
  if (finalStageStart < 0) return ['no FROM instruction'];
  const final = ins.slice(finalStageStart);

  const users = final.filter((i) => i.op === 'USER');
  const user = users.at(-1)?.args.split(':')[0].trim();
  if (!user) problems.push('the final stage never sets USER: it would run as root');
  else if (user === 'root' || user === '0') problems.push(`line ${users.at(-1)!.line}: the final stage runs as root (USER ${user})`);
  else if (!/^\d+$/.test(user)) problems.push(`line ${users.at(-1)!.line}: USER ${user} is a name; give the numeric uid so Kubernetes' runAsNonRoot can check it`);

  const health = final.filter((i) => i.op === 'HEALTHCHECK').at(-1);
  if (!health) problems.push('the final stage has no HEALTHCHECK (NONE, with a reason, for an image that serves no HTTP)');
  else if (rules.servesHttp && !/\/healthz\b/.test(health.args)) problems.push(`line ${health.line}: the HEALTHCHECK does not ask /healthz`);

  for (const i of ins) {
    if (i.op === 'ENV' || i.op === 'ARG') {
      for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)(?==|\s|$)/g)) {
        if (SECRET_NAME.test(m[1]) && (i.args.includes(`${m[1]}=`) || i.op === 'ARG')) problems.push(`line ${i.line}: ${i.op} ${m[1]} bakes a secret into the image; pass it at run time as a file (a Secret volume)`);
      }
    }
    if ((i.op === 'COPY' || i.op === 'ADD') && i.args.split(/\s+/).some((w) => !w.startsWith('--') && SECRET_FILE.test(w))) {
      problems.push(`line ${i.line}: ${i.op} ${i.args} copies a key or token file into the image`);
    }
    if (i.op === 'RUN' && /\bnpm (install|i)\b/.test(i.args)) problems.push(`line ${i.line}: npm install resolves versions anew; use npm ci (the lock file)`);
  }
  if (!ins.some((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args))) problems.push('dependencies are not installed with npm ci');
  return problems;
}
