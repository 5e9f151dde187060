/**
 * A job's own data (a text, a table), for a tab that joins it. A worker reads
 * the job's file from its own disk; a tab has none, so it downloads the file
 * from the server that serves the page (`run --text FILE --serve-page`,
 * `server --text FILE`, `server --data FILE`), by the SHA-256 the job
 * records, with the job's token. Bundling data into the page could only ever
 * cover the built-in corpus, while a job trains on any file; and the job's
 * hash already says which bytes every rank must hold, so the tab checks the
 * download against it exactly as a worker checks its copy. Then the same code
 * as in Node and Deno builds the vocabulary and windows (src/data/text.ts) or
 * the split (src/data/table.ts), so the tab trains on what every rank does.
 */
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import { rowFormatOf } from '../src/data/rows.ts';
import { tableFromBytes, type TableSplit } from '../src/data/table.ts';
import { decodeTextFile, textVocabulary } from '../src/data/text.ts';
import { textSplit, type TextSplit } from '../src/data/text-split.ts';
import { gpt2Tokenizer, type TokenizerName, vocabularyTokenizer } from '../src/data/tokenizer.ts';
import { fetchAssetBytes } from './fetch-asset.ts';

export interface JobFile {
  job: string;
  token: string;
  /** The file's name in the job's settings (a file's name, or @brown): for messages. */
  name: string;
  sha256: string;
}

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The job's file with this hash, checked against it. */
async function fetchJobFile(f: JobFile, what: string, server: string): Promise<Uint8Array<ArrayBuffer>> {
  const url = `${server}/api/jobs/${encodeURIComponent(f.job)}/files/${f.sha256}`;
  const bytes = await fetchAssetBytes(url, what, {
    headers: { authorization: `Bearer ${f.token}` },
    onHttpError: (status, body) => {
      let said = '';
      try {
        said = String((JSON.parse(body) as { error?: unknown }).error ?? '');
      } catch {
        said = '';
      }
      return said || (status === 403 ? 'open the job’s link with its token.' : 'start the server with the job’s file.');
    },
  });
  const got = await sha256Hex(bytes);
  if (got !== f.sha256) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what} came with SHA-256 ${got}, but the job trains on SHA-256 ${f.sha256}: other bytes would mean other data; reload the page, and tell the job's owner if it happens again.`,
      { ours: got, expected: f.sha256 },
    );
  }
  return bytes;
}

export async function loadJobTextInPage(
  t: JobFile & { context: number; tokenizer?: TokenizerName },
  server = globalThis.location.origin,
): Promise<TextSplit> {
  const what = `the job's text ${JSON.stringify(t.name)}`;
  const text = decodeTextFile(await fetchJobFile(t, what, server), what);
  // char and byte follow from the text; gpt2 is GPT-2's own (tokenizer.ts). The tab tokenizes in memory: a text a tab
  // downloads is small.
  if (t.tokenizer === 'gpt2') return textSplit(text, t.context, what, await gpt2Tokenizer());
  return textSplit(
    text,
    t.context,
    what,
    t.tokenizer === undefined
      ? undefined
      : vocabularyTokenizer(textVocabulary(text, t.tokenizer === 'char' ? 'chars' : 'bytes')),
  );
}

/** A table job's split: its labels are a column of the table, or a file of their own (fetched the same way). */
export async function loadJobTableInPage(
  t: JobFile & { labelColumn?: string; labels?: JobFile },
  server = globalThis.location.origin,
): Promise<TableSplit> {
  const format = rowFormatOf(t.name);
  if (!format)
    throw new RingtrainError(
      ErrorCode.BadData,
      `the job's table ${JSON.stringify(t.name)} is not .csv, .npy or .json; the job is broken: tell its owner.`,
    );
  const bytes = await fetchJobFile(t, `the job's table ${JSON.stringify(t.name)}`, server);
  if (t.labels)
    return tableFromBytes(bytes, t.name, format, {
      labels: {
        bytes: await fetchJobFile(t.labels, `the job's labels ${JSON.stringify(t.labels.name)}`, server),
        file: t.labels.name,
      },
    });
  return tableFromBytes(bytes, t.name, format, { labelColumn: t.labelColumn ?? '' });
}
