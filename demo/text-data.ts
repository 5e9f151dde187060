/**
 * A text job's text, for a tab that joins it. A worker reads the job's text
 * from its own disk; a tab has none, so it downloads the text from the server
 * that serves the page (`run --text FILE --serve-page`, `server --text FILE`),
 * by the SHA-256 the job records, with the job's token. Bundling the text into
 * the page could only ever cover the built-in corpus, while a job trains on
 * any file; and the job's hash already says which bytes every rank must hold,
 * so the tab checks the download against it exactly as a worker checks its
 * copy. Then the same code as in Node and Deno builds the vocabulary and the
 * windows (src/data/text.ts), so the tab draws the windows every rank draws.
 */
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import { decodeTextFile, textSplit, type TextSplit } from '../src/data/text.ts';
import { fetchAssetBytes } from './fetch-asset.ts';

export interface JobText {
  job: string;
  token: string;
  /** The job's `text` setting (a file's name, or @brown): for messages. */
  name: string;
  sha256: string;
  context: number;
}

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

export async function loadJobTextInPage(t: JobText, server = globalThis.location.origin): Promise<TextSplit> {
  const what = `the job's text ${JSON.stringify(t.name)}`;
  const url = `${server}/api/jobs/${encodeURIComponent(t.job)}/files/${t.sha256}`;
  const bytes = await fetchAssetBytes(url, what, {
    headers: { authorization: `Bearer ${t.token}` },
    onHttpError: (status, body) => {
      let said = '';
      try {
        said = String((JSON.parse(body) as { error?: unknown }).error ?? '');
      } catch {
        said = '';
      }
      return said || (status === 403 ? 'open the job’s link with its token.' : 'start the server with the job’s text.');
    },
  });
  const got = await sha256Hex(bytes);
  if (got !== t.sha256) {
    throw new RingtrainError(ErrorCode.BadData, `${what} came with SHA-256 ${got}, but the job trains on SHA-256 ${t.sha256}: other bytes would mean other windows; reload the page, and tell the job's owner if it happens again.`, { ours: got, expected: t.sha256 });
  }
  return textSplit(decodeTextFile(bytes, what), t.context, what);
}
