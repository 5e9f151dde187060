import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/program.ts';
import { connect } from '../../src/signaling/client.node.ts';
import WebSocket from 'ws';
import type { WebSocketConstructor } from '../../src/signaling/client.ts';
import { TOKEN_IN_ARGV_WARNING, readTokenFile, tokenFrom } from '../../src/cli/options/secrets.node.ts';
import { jobFromFlags, parseHyperparameters } from '../../src/cli/commands/server.ts';
import { jobSpec } from './helpers.ts';
import { makeTestCert } from './test-cert.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

function startCli(args: string[]): {
  child: ChildProcessWithoutNullStreams;
  output: () => string;
  exited: Promise<number | null>;
} {
  const child = spawn(process.execPath, [`${root}bin/ringtrain.js`, ...args], {
    cwd: root,
    env: { ...process.env, RINGTRAIN_TOKEN: undefined },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

async function lineMatching(output: () => string, exited: Promise<unknown>, re: RegExp): Promise<RegExpExecArray> {
  let over = false;
  void exited.then(() => (over = true));
  for (let i = 0; i < 3000; i++) {
    const m = re.exec(output());
    if (m) return m;
    if (over) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no line matching ${re} in:\n${output()}`);
}

describe('ringtrain server (the CLI)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serves a job from flags and one from a jobs file, and stops cleanly on SIGTERM', async () => {
    const file = join(dir, 'jobs.json');
    writeFileSync(file, JSON.stringify([jobSpec('extra', 'te', 1, 2)]));
    const cli = startCli([
      'server',
      '--port',
      '0',
      '--job',
      'demo',
      '--token',
      'tok',
      '--model',
      'cnn',
      '--batch',
      '32',
      '--min-peers',
      '2',
      '--max-peers',
      '4',
      '--jobs-file',
      file,
      '--no-static',
      '--hp',
      'compression=fp16',
      'scaleLr=true',
      '--steps',
      '30',
    ]);
    const [, url] = await lineMatching(cli.output, cli.exited, /listening on (http:\/\/127\.0\.0\.1:\d+)/);
    // The job lines follow the address; wait for the last of them.
    await lineMatching(cli.output, cli.exited, /job extra: page /);
    // The printed join command and page link carry the token in the environment and the fragment, never as --token or
    // ?token=.
    // A supplied token is the user's already: the lines name it without printing it (logs are no place for it).
    expect(cli.output()).toContain(
      `job demo: RINGTRAIN_TOKEN=<its token> ringtrain worker --server ${url} --job demo\n`,
    );
    expect(cli.output()).toContain(`${url}/?job=demo#token=<its token>`);
    expect(cli.output()).not.toMatch(/=tok\b|=te\b/);
    expect(cli.output()).not.toMatch(/--token tok|[?&]token=/);
    expect(cli.output()).toContain('warning: --token is visible to every user of this machine (ps)');
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const info = await (await fetch(`${url}/api/jobs/demo`, { headers: { authorization: 'Bearer tok' } })).json();
    expect(info.config).toEqual({
      model: 'cnn',
      optimizer: 'sgd',
      // A server job runs the doubt rule unasked; verify does not combine with fp16, so it is left off.
      hyperparameters: {
        lr: 0.05,
        momentum: 0.9,
        weightDecay: 0.0001,
        seed: 1,
        epochs: 1,
        steps: 30,
        compression: 'fp16',
        scaleLr: true,
        doubtRule: true,
      },
      batchPerPeer: 32,
      minPeers: 2,
      maxPeers: 4,
    });
    const client = await connect(url, { job: 'extra', token: 'te' });
    expect(client.membership).toMatchObject({ ready: true, size: 1 });
    const closed = new Promise((resolve) => client.on('close', resolve));
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
    expect(await closed).toMatchObject({ detail: { code: 'server-closing' } });
  });

  it('refuses bad flags and bad job files with a message naming them (in process)', async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      expect(await runCli(['server', '--port', '0', '--job', 'demo', '--min-peers', '4', '--max-peers', '2'])).toBe(1);
      expect(written.join('')).toContain('--max-peers (2) must be at least --min-peers (4)');

      const file = join(dir, 'bad.json');
      writeFileSync(file, JSON.stringify([{ id: 'x', token: 't', config: { model: 'cnn' } }]));
      expect(await runCli(['server', '--port', '0', '--jobs-file', file])).toBe(1);
      expect(written.join('')).toMatch(/bad job spec: config\.optimizer/);

      expect(await runCli(['server', '--port', 'eighty'])).toBe(1);
      expect(written.join('')).toContain('--port must be a number');

      expect(await runCli(['server', '--port', '0', '--token', 'orphan'])).toBe(1);
      expect(written.join('')).toContain('--token needs --job');

      expect(await runCli(['server', '--port', '0', '--job', 'j', '--tls-cert', join(dir, 'missing.pem')])).toBe(1);
      expect(written.join('')).toContain('TLS needs both --tls-cert (PEM certificate chain) and --tls-key');
      expect(
        await runCli([
          'server',
          '--port',
          '0',
          '--job',
          'j',
          '--tls-cert',
          join(dir, 'missing.pem'),
          '--tls-key',
          join(dir, 'missing.pem'),
        ]),
      ).toBe(1);
      expect(written.join('')).toMatch(/cannot read --tls-cert .*missing\.pem/);

      expect(await runCli(['server', '--port', '0', '--job', 'j', '--hp', 'noequals'])).toBe(1);
      expect(written.join('')).toContain('--hp takes key=value');

      // A setting is checked before the server starts, naming the --hp pair that set it.
      expect(await runCli(['server', '--port', '0', '--job', 'j', '--hp', 'warmupStep=100'])).toBe(1);
      expect(written.join('')).toContain(
        `--hp warmupStep=100: unknown job hyperparameter "warmupStep"; did you mean 'warmupSteps'?`,
      );
      expect(await runCli(['server', '--port', '0', '--job', 'j', '--hp', 'lrSchedule=linear'])).toBe(1);
      expect(written.join('')).toContain(
        `--hp lrSchedule=linear: job hyperparameter 'lrSchedule' must be 'constant' or 'cosine', got "linear"`,
      );
      expect(await runCli(['server', '--port', '0', '--job', 'j', '--hp', 'verify=true', 'compression=int8'])).toBe(1);
      expect(written.join('')).toMatch(
        /job hyperparameters do not combine: verify: true checks that the sum is exact; compression 'int8'/,
      );
    } finally {
      spy.mockRestore();
    }
  });

  it('writes verify and the doubt rule on in a job it serves from flags, unless --hp says otherwise or they do not combine', () => {
    const flags = (hp: string[]) =>
      ({
        job: 'j',
        model: 'mlp',
        optimizer: 'sgd',
        batch: 32,
        minPeers: 1,
        maxPeers: 4,
        momentum: 0.9,
        seed: 1,
        epochs: 1,
        hp,
      }) as unknown as Parameters<typeof jobFromFlags>[0];
    const settings = (hp: string[]) => jobFromFlags(flags(hp))!.config.hyperparameters;
    expect(settings([])).toMatchObject({ verify: true, doubtRule: true });
    expect(settings(['verify=false', 'doubtRule=false'])).toMatchObject({ verify: false, doubtRule: false });
    expect(settings(['aggregation=median'])).toMatchObject({ doubtRule: true });
    expect(settings(['aggregation=median']).verify).toBeUndefined();
    expect(settings(['balance=speed', 'globalBatch=96']).doubtRule).toBeUndefined();
  });

  it('reads each --hp value as its setting takes it: a text setting that looks like a number stays text', () => {
    expect(
      parseHyperparameters([
        'lr=0.1',
        'elastic=true',
        'modelLayoutHash=12345678',
        'text=2024',
        'aggregation=median',
        'someday=5',
      ]),
    ).toEqual({
      lr: 0.1,
      elastic: true,
      modelLayoutHash: '12345678',
      text: '2024',
      aggregation: 'median',
      someday: 5,
    });
  });

  it('prints the token it made up (no --token, --token-file or RINGTRAIN_TOKEN), and that token joins', async () => {
    const cli = startCli(['server', '--port', '0', '--job', 'made', '--no-static', '--min-peers', '1']);
    try {
      const [, url] = await lineMatching(cli.output, cli.exited, /listening on (http:\/\/127\.0\.0\.1:\d+)/);
      const [, token] = await lineMatching(
        cli.output,
        cli.exited,
        /job made: RINGTRAIN_TOKEN=([0-9a-f]{32}) ringtrain worker/,
      );
      // The page line follows the worker line: wait for it rather than read the output at once.
      await lineMatching(
        cli.output,
        cli.exited,
        new RegExp(`${url.replaceAll('.', '\\.')}/\\?job=made#token=${token}`),
      );
      const client = await connect(url, { job: 'made', token });
      expect(client.membership).toMatchObject({ ready: true, size: 1 });
      await client.leave();
    } finally {
      cli.child.kill('SIGTERM');
      await cli.exited;
    }
  });

  it('serves https with --tls-cert/--tls-key and a token from --token-file', async () => {
    const cert = makeTestCert();
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'from-a-file\n');
    const cli = startCli([
      'server',
      '--port',
      '0',
      '--job',
      'sec',
      '--token-file',
      tokenFile,
      '--tls-cert',
      cert.certPath,
      '--tls-key',
      cert.keyPath,
      '--no-static',
      '--min-peers',
      '1',
    ]);
    try {
      const [, url] = await lineMatching(cli.output, cli.exited, /listening on (https:\/\/127\.0\.0\.1:\d+)/);
      await lineMatching(cli.output, cli.exited, /job sec: page /);
      // A token the user supplied stays out of the log: the printed command names it without showing it.
      expect(cli.output()).toContain(`RINGTRAIN_TOKEN=<its token> ringtrain worker --server ${url} --job sec`);
      expect(cli.output()).not.toContain('from-a-file');
      expect(cli.output()).not.toContain('warning');
      const TrustingWs = class extends WebSocket {
        constructor(u: string) {
          super(u, { ca: cert.ca });
        }
      } as unknown as WebSocketConstructor;
      const client = await connect(url, { job: 'sec', token: 'from-a-file', WebSocket: TrustingWs });
      expect(client.membership).toMatchObject({ ready: true, size: 1 });
      await client.leave();
    } finally {
      cli.child.kill('SIGTERM');
      await cli.exited;
      cert.dispose();
    }
  });

  it('reads a token file without its newline, and refuses empty ones and --token with --token-file', () => {
    const good = join(dir, 'good-token');
    writeFileSync(good, 'abc123\r\n');
    const warnings: string[] = [];
    expect(tokenFrom({ tokenFile: good }, (l) => warnings.push(l))).toBe('abc123');
    expect(tokenFrom({ token: 'argv' }, (l) => warnings.push(l))).toBe('argv');
    expect(warnings).toEqual([TOKEN_IN_ARGV_WARNING]);
    const empty = join(dir, 'empty-token');
    writeFileSync(empty, '\n');
    expect(() => readTokenFile(empty)).toThrow(/must hold the token alone/);
    expect(() => readTokenFile(join(dir, 'nope'))).toThrow(/cannot read --token-file/);
    expect(() => tokenFrom({ token: 'a', tokenFile: good }, () => undefined)).toThrow(/not both/);
  });

  it("opens a text job from --text: the job records the text's name and SHA-256, and serves the text to its peers", async () => {
    const text = join(dir, 'book.txt');
    writeFileSync(text, 'a small book.\n'.repeat(30));
    const sha = createHash('sha256').update(readFileSync(text)).digest('hex');
    const cli = startCli([
      'server',
      '--port',
      '0',
      '--job',
      'book',
      '--token',
      'tok-book',
      '--model',
      'transformer',
      '--optimizer',
      'adamw',
      '--text',
      text,
      '--context',
      '16',
      '--tokenizer',
      'gpt2',
      '--no-static',
    ]);
    try {
      const [, url] = await lineMatching(cli.output, cli.exited, /listening on (http:\/\/127\.0\.0\.1:\d+)/);
      await lineMatching(cli.output, cli.exited, /job book: page /);
      expect(cli.output()).toContain(`ringtrain worker --server ${url} --job book --text ${text}\n`);
      const info = await (
        await fetch(`${url}/api/jobs/book`, { headers: { authorization: 'Bearer tok-book' } })
      ).json();
      expect(info.config.hyperparameters).toMatchObject({
        text: 'book.txt',
        textSha256: sha,
        context: 16,
        tokenizer: 'gpt2',
      });
      const file = await fetch(`${url}/api/jobs/book/files/${sha}`, { headers: { authorization: 'Bearer tok-book' } });
      expect(await file.text()).toBe(readFileSync(text, 'utf8'));
    } finally {
      cli.child.kill('SIGTERM');
      await cli.exited;
    }
    const refused = startCli([
      'server',
      '--port',
      '0',
      '--job',
      'book',
      '--token',
      'tok-book',
      '--text',
      text,
      '--no-static',
    ]);
    expect(await refused.exited).not.toBe(0);
    expect(refused.output()).toContain('--text trains the transformer: add --model transformer (got --model cnn).');
  });
});
