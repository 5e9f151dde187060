/**
 * `ringtrain server`: the signaling server in the foreground, with zero or
 * more jobs. One job from flags (--job, --token and the training flags, named
 * as in `ringtrain train`), more from a JSON file of job specs (--jobs-file).
 * Stops on Ctrl-C / SIGTERM and tells every peer.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import { z } from 'zod';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { JobSpec } from '../../signaling/protocol.ts';
import { hyperparameterKeysHelp, jobSettingOption } from '../options/job-setting-options.ts';
import { checkHyperparameters, settingFromText, withOutsiderChecks, type Hyperparameters } from '../../job/settings.ts';
import { serveUntilSignal } from '../../../server/serve.ts';
import {
  DEFAULT_LR,
  DEFAULT_WEIGHT_DECAY,
  MODEL_KINDS,
  OPTIMIZER_KINDS,
  perOptimizer,
  TrainOptionsSchema,
} from '../options/train-options.ts';
import { printLine, stderr } from '../host.node.ts';
import { TOKEN_ENV, readTlsFiles, tokenFrom } from '../options/secrets.node.ts';
import { DEFAULT_ADMISSION_LIMITS } from '../../../server/admission.ts';
import { addIceOptions, iceFromFlags } from '../options/ice-flags.node.ts';
import { basename } from 'node:path';
import { loadText, type LoadedText } from '../../data/text.node.ts';
import { loadTable } from '../../data/table.node.ts';
import { fileSha256, isTable } from '../options/table-option.node.ts';
import { readFileSync } from 'node:fs';
import { DEFAULT_TEXT_CONTEXT } from '../../data/text.ts';
import { TOKENIZER_NAMES } from '../../data/tokenizer.ts';

const count = (flag: string, min: number) =>
  z.coerce
    .number({ error: `${flag} must be a number` })
    .int({ error: `${flag} must be a whole number` })
    .min(min, { error: `${flag} must be at least ${min}` });

const ServerOptionsSchema = TrainOptionsSchema.pick({
  model: true,
  optimizer: true,
  batch: true,
  lr: true,
  momentum: true,
  weightDecay: true,
  seed: true,
  epochs: true,
  steps: true,
}).extend({
  port: count('--port', 0).max(65535, { error: '--port must be at most 65535' }),
  host: z.string().min(1),
  job: z.string().optional(),
  token: z.string().optional(),
  tokenFile: z.string().optional(),
  public: z.boolean().default(false),
  tlsCert: z.string().optional(),
  tlsKey: z.string().optional(),
  joinTimeoutMs: count('--join-timeout-ms', 10),
  maxSocketsPerAddress: count('--max-sockets-per-address', 1),
  maxHandshakesPerAddress: count('--max-handshakes-per-address', 1),
  maxHandshakes: count('--max-handshakes', 1),
  maxPeersPerAddress: count('--max-peers-per-address', 0),
  maxCandidates: count('--max-candidates', 1),
  maxCandidatesPerAddress: count('--max-candidates-per-address', 1),
  minPeers: count('--min-peers', 1),
  maxPeers: count('--max-peers', 1),
  jobsFile: z.string().optional(),
  static: z.union([z.string(), z.literal(false)]).optional(),
  heartbeatMs: count('--heartbeat-ms', 10),
  quiet: z.boolean().default(false),
  hp: z.array(z.string()).default([]),
  text: z.string().min(1, { error: '--text needs a file path (or @brown)' }).optional(),
  data: z.string().min(1, { error: '--data needs a table file (.csv, .npy or .json)' }).optional(),
  labelColumn: z.string().min(1).optional(),
  labels: z.string().min(1).optional(),
  context: count('--context', 2).optional(),
  tokenizer: z.enum(TOKENIZER_NAMES, { error: `--tokenizer must be one of ${TOKENIZER_NAMES.join(', ')}` }).optional(),
});
type ServerCliOptions = z.infer<typeof ServerOptionsSchema>;

function invalid(message: string, detail?: Record<string, unknown>): RingtrainError {
  return new RingtrainError(ErrorCode.InvalidArgument, message, detail);
}

function parse(raw: Record<string, unknown>): ServerCliOptions {
  const parsed = ServerOptionsSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue.path[0] ?? '');
    throw invalid(`${issue.message} (got ${JSON.stringify(raw[key])}).`, { option: key, value: raw[key] });
  }
  return parsed.data;
}

/** The job the flags describe, if --job was given. */
/** The job's data file, read once: its hashes go in the job, its bytes to the tabs that join. */
export interface JobFiles {
  text?: LoadedText;
  /** --data's table (and --labels' file), checked by reading them as a worker will. */
  table?: { data: string; sha256: string; labels?: { path: string; sha256: string } };
}

/** --data FILE.csv|.npy|.json with --label-column or --labels: read once (a missing column stops here), hashed for the job. */
export function tableForJob(
  o: Pick<ServerCliOptions, 'data' | 'labels' | 'labelColumn' | 'text' | 'model'>,
): JobFiles['table'] {
  if (o.data === undefined) {
    if (o.labels !== undefined || o.labelColumn !== undefined)
      throw invalid('--labels and --label-column go with --data FILE.csv|.npy|.json (a table of rows).');
    return undefined;
  }
  if (!isTable(o.data)) throw invalid(`--data ${o.data}: a job's table must be .csv, .npy or .json.`);
  if (o.text !== undefined) throw invalid('--text and --data are two data sets; give one.');
  if (o.model === 'transformer' || o.model === 'cnn')
    throw invalid(`--data ${o.data} is a table of rows: add --model mlp (got --model ${o.model}).`);
  loadTable(o.data, { labels: o.labels, labelColumn: o.labelColumn });
  return {
    data: o.data,
    sha256: fileSha256(o.data, '--data'),
    labels: o.labels === undefined ? undefined : { path: o.labels, sha256: fileSha256(o.labels, '--labels') },
  };
}

export function jobFromFlags(o: ServerCliOptions, files: JobFiles = {}): JobSpec | null {
  const { text, table } = files;
  if (!o.job) {
    if (o.text || o.data) throw invalid(`${o.text ? '--text' : '--data'} needs --job (the job that trains on it).`);
    if (o.token || o.tokenFile)
      throw invalid(`${o.token ? '--token' : '--token-file'} needs --job (the job it opens).`);
    if (o.public) throw invalid('--public needs --job (the job it lists publicly).');
    return null;
  }
  if (o.maxPeers < o.minPeers)
    throw invalid(`--max-peers (${o.maxPeers}) must be at least --min-peers (${o.minPeers}).`);
  const hyperparameters: Hyperparameters = {
    lr: o.lr ?? DEFAULT_LR[o.optimizer],
    momentum: o.momentum,
    weightDecay: o.weightDecay ?? DEFAULT_WEIGHT_DECAY[o.optimizer],
    seed: o.seed,
    epochs: o.epochs,
  };
  if (o.steps !== undefined) hyperparameters.steps = o.steps;
  if (o.tokenizer !== undefined && !text)
    throw invalid(`--tokenizer ${o.tokenizer} tokenizes a --text; add --text FILE or drop --tokenizer.`);
  if (text) {
    // As run --text records it: the name and hash, never the text; workers bring their own copies, tabs download this
    // one.
    if (o.model !== 'transformer')
      throw invalid(`--text trains the transformer: add --model transformer (got --model ${o.model}).`);
    Object.assign(hyperparameters, {
      text: o.text!.startsWith('@') ? o.text : basename(o.text!),
      textSha256: text.sha256,
      context: o.context ?? DEFAULT_TEXT_CONTEXT,
    });
    if (o.tokenizer !== undefined) hyperparameters.tokenizer = o.tokenizer;
  }
  if (table) {
    // As run --data records it: names and hashes; every worker's copies must match.
    Object.assign(hyperparameters, { table: basename(table.data), tableSha256: table.sha256 });
    if (o.labelColumn !== undefined) hyperparameters.labelColumn = o.labelColumn;
    if (table.labels)
      Object.assign(hyperparameters, { labels: basename(table.labels.path), labelsSha256: table.labels.sha256 });
  }
  // Checked here too (the server checks every job it adds) to name the flag that set it.
  let settings: Hyperparameters;
  try {
    // Whoever holds the token joins: verify and the doubt rule on unless --hp says otherwise.
    settings = withOutsiderChecks(checkHyperparameters({ ...hyperparameters, ...parseHyperparameters(o.hp) }));
  } catch (err) {
    const e = err as RingtrainError;
    const given = o.hp.find((pair) => pair.startsWith(`${String(e.detail?.field)}=`));
    throw invalid(`${given ? `--hp ${given}: ` : ''}${e.message}`, e.detail);
  }
  return {
    id: o.job,
    token: tokenFrom(o, (line) => void printLine(line, stderr)) ?? randomUUID().replaceAll('-', ''),
    config: {
      ...(o.public ? { public: true } : {}),
      model: o.model,
      optimizer: o.optimizer,
      hyperparameters: settings,
      batchPerPeer: o.batch,
      minPeers: o.minPeers,
      maxPeers: o.maxPeers,
    },
  };
}

/** `--hp key=value` pairs, each value read as its setting's type (numbers and true/false where the key takes them). */
export function parseHyperparameters(pairs: string[]): Record<string, number | string | boolean> {
  const out: Record<string, number | string | boolean> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw invalid(`--hp takes key=value (like --hp warmupSteps=100), got '${pair}'.`);
    out[pair.slice(0, eq)] = settingFromText(pair.slice(0, eq), pair.slice(eq + 1));
  }
  return out;
}

async function jobsFromFile(path: string): Promise<JobSpec[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw invalid(`cannot read --jobs-file ${path}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalid(`--jobs-file ${path} is not JSON; it must hold an array of {id, token, config}.`);
  }
  if (!Array.isArray(value)) throw invalid(`--jobs-file ${path} must hold a JSON array of {id, token, config}.`);
  return value as JobSpec[]; // startServer validates each spec and names what is wrong.
}

export function serverCommand(): Command {
  const cmd = new Command('server')
    .description('run the signaling server (jobs, ranks, WebRTC signaling, /healthz, /metrics) and serve the page')
    .option('--port <n>', 'port to listen on (0 picks a free one)', '8080')
    .option('--host <addr>', 'address to listen on (0.0.0.0 lets other machines join)', '127.0.0.1');
  addJobFlags(cmd);
  addServingFlags(cmd);
  return addIceOptions(cmd).action(async (raw: Record<string, unknown>) => {
    const o = parse(raw);
    const ice = iceFromFlags(raw);
    const tls = readTlsFiles(o.tlsCert, o.tlsKey);
    const jobs: JobSpec[] = [];
    const generatedToken =
      o.job !== undefined && o.token === undefined && o.tokenFile === undefined && !process.env[TOKEN_ENV];
    const text = o.text === undefined ? undefined : loadText(o.text);
    const table = tableForJob(o);
    const flagJob = jobFromFlags(o, { text, table });
    if (flagJob) jobs.push(flagJob);
    if (o.jobsFile) jobs.push(...(await jobsFromFile(o.jobsFile)));
    const log = o.quiet ? () => {} : (line: string) => void printLine(`[server] ${line}`);
    await serveUntilSignal(
      {
        port: o.port,
        host: o.host,
        jobs,
        staticDir: o.static === false ? null : o.static,
        heartbeatMs: o.heartbeatMs,
        joinTimeoutMs: o.joinTimeoutMs,
        limits: {
          maxSocketsPerAddress: o.maxSocketsPerAddress,
          maxHandshakesPerAddress: o.maxHandshakesPerAddress,
          maxHandshakes: o.maxHandshakes,
          maxPeersPerAddress: o.maxPeersPerAddress,
          maxCandidates: o.maxCandidates,
          maxCandidatesPerAddress: o.maxCandidatesPerAddress,
        },
        tls,
        ice,
        log,
        files: [
          ...(text ? [text.bytes] : []),
          ...(table ? [readFileSync(table.data), ...(table.labels ? [readFileSync(table.labels.path)] : [])] : []),
        ],
      },
      (server) => printJoinLines(server.url, jobs, o, flagJob, generatedToken),
    );
  });
}

/** The flags that configure --job: what it trains, on what, and how many peers. */
function addJobFlags(cmd: Command): void {
  cmd
    .option('--job <id>', 'open a job with this id, configured by the flags below')
    .option(
      '--token-file <path>',
      `file holding the token peers need to join --job (or set ${TOKEN_ENV}; default: a random one, printed)`,
    )
    .option('--token <secret>', `the token, on the command line (visible in ps: prefer --token-file or ${TOKEN_ENV})`)
    .option(
      '--public',
      'list --job on GET /api/jobs for anyone (default: only requests bearing its token see it)',
      false,
    )
    .addOption(new Option('--model <kind>', `model the job trains (${MODEL_KINDS.join('|')})`).default('cnn'))
    .addOption(new Option('--optimizer <kind>', `optimizer (${OPTIMIZER_KINDS.join('|')})`).default('sgd'))
    .option('--batch <n>', 'examples per step per peer', '64')
    .option('--lr <x>', `learning rate (default ${perOptimizer(DEFAULT_LR)})`)
    .option('--weight-decay <x>', 'AdamW decoupled weight decay', '0.0001')
    .option('--min-peers <n>', 'the job starts when this many peers have joined', '2')
    .option('--max-peers <n>', 'peers beyond this many are refused', '16')
    // --momentum, --seed, --epochs and --steps, as train has them (src/job/fields.ts).
    .addOption(jobSettingOption('momentum'))
    .addOption(jobSettingOption('seed'))
    .addOption(jobSettingOption('epochs'))
    .addOption(jobSettingOption('steps'))
    .option(
      '--hp <key=value...>',
      `more settings for the job (compression=fp16, warmupSteps=100, scaleLr=true, ...); the keys: ${hyperparameterKeysHelp()}`,
    )
    .option(
      '--text <file>',
      '--job trains the transformer on this UTF-8 text (or @brown): the job records its SHA-256, workers pass their own copies (worker --text), and tabs that join download it from here',
    )
    .option('--context <n>', 'with --text: tokens per window (default 64)')
    .option(
      '--tokenizer <name>',
      `with --text: ${TOKENIZER_NAMES.join(', ')} (default: its characters, or bytes past 256 of them); every worker and tab tokenizes with it`,
    )
    .option(
      '--data <file>',
      '--job trains the mlp on this table (.csv, .npy, .json; with --label-column or --labels): the job records its SHA-256, workers pass their own copies (worker --data)',
    )
    .option('--label-column <name>', 'with --data: the column (CSV header name, or number) that holds the class')
    .option('--labels <file>', 'with --data: one class number per row, in its own file');
}

/** The flags of the server itself: more jobs, the page, heartbeats, TLS and the admission limits. */
function addServingFlags(cmd: Command): void {
  cmd
    .option('--jobs-file <path>', 'more jobs: a JSON array of {id, token, config}')
    .option('--static <dir>', 'folder of the built page (default: the one in the package, demo/dist)')
    .option('--no-static', 'serve no page')
    .option('--heartbeat-ms <n>', 'heartbeat interval; a peer silent for 3 of them is dropped', '5000')
    .option('--tls-cert <path>', 'PEM certificate (chain): serve https and wss (with --tls-key)')
    .option('--tls-key <path>', 'PEM private key of --tls-cert')
    .option(
      '--join-timeout-ms <n>',
      'a connection that has not sent its join this long after the upgrade is closed',
      String(5000),
    )
    .option(
      '--max-sockets-per-address <n>',
      'sockets (HTTP and WebSocket) one address may hold open',
      String(DEFAULT_ADMISSION_LIMITS.maxSocketsPerAddress),
    )
    .option(
      '--max-handshakes-per-address <n>',
      'connections one address may hold open before joining',
      String(DEFAULT_ADMISSION_LIMITS.maxHandshakesPerAddress),
    )
    .option(
      '--max-handshakes <n>',
      'connections not yet joined, in all; beyond it the oldest is closed',
      String(DEFAULT_ADMISSION_LIMITS.maxHandshakes),
    )
    .option(
      '--max-peers-per-address <n>',
      'members one address may hold in one job, for jobs whose config sets no maxPeersPerAddress (0: no limit)',
      String(DEFAULT_ADMISSION_LIMITS.maxPeersPerAddress),
    )
    .option(
      '--max-candidates <n>',
      'joiners of one running job proving their links at once (staged admission); beyond it a join is refused',
      String(DEFAULT_ADMISSION_LIMITS.maxCandidates),
    )
    .option(
      '--max-candidates-per-address <n>',
      'of those, how many one address may hold',
      String(DEFAULT_ADMISSION_LIMITS.maxCandidatesPerAddress),
    )
    .option('--quiet', 'log nothing but the address', false);
}

/**
 * How to join each job: the worker command and the page link. The token goes in the environment and in the
 * fragment of the page link (never sent to a server, removed from the address bar). Only a token the server
 * made up (`tokenGenerated`, for the --job job) is printed: one the user supplied (file, environment, jobs
 * file) is theirs already, and a log (a pod's, a CI job's) is no place for it.
 */
function printJoinLines(
  url: string,
  jobs: JobSpec[],
  o: ServerCliOptions,
  flagJob: JobSpec | null,
  tokenGenerated: boolean,
): void {
  void printLine(`ringtrain server listening on ${url}`);
  for (const j of jobs) {
    const known = j === flagJob && tokenGenerated;
    const token = known ? j.token : '<its token>';
    // A text or table job's workers bring their own copies (tabs download a text from here).
    const textFlag =
      j !== flagJob
        ? ''
        : o.text !== undefined
          ? ` --text ${o.text}`
          : o.data !== undefined
            ? ` --data ${o.data}${o.labels !== undefined ? ` --labels ${o.labels}` : ''}`
            : '';
    void printLine(`job ${j.id}: ${TOKEN_ENV}=${token} ringtrain worker --server ${url} --job ${j.id}${textFlag}`);
    void printLine(
      `job ${j.id}: page ${url}/?job=${encodeURIComponent(j.id)}#token=${known ? encodeURIComponent(j.token) : token}`,
    );
  }
}
