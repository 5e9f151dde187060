/**
 * Downloads one of the page's data files (the digits, the dictionary, a job's text), trying again
 * when the connection fails. A tab that joins fetches 21 MB of digits over several connections at
 * once; one connection cut on the way (a busy server, a proxy, a flaky Wi-Fi) must not send the
 * volunteer back to the Join button. HTTP errors are answers, not failures, and are not retried: a
 * 404 means the page was built without the file (or the server was not given the job's file).
 */
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';

/** How many times in all a download is tried. */
const TRIES = 3;

export interface FetchAssetOptions {
  /** The wait before the second try, doubled before each later one (tests shorten it). */
  firstWaitMs?: number;
  /** Request headers (a job's token, for a job's file). */
  headers?: Record<string, string>;
  /** What to do about an HTTP error, for the message (default: rebuild the page). */
  onHttpError?: (status: number, body: string) => string;
}

const rebuild = () => 'rebuild the page (npm run build:page).';

/** `what` names the file in errors (`mnist: digit file 3`). */
export function fetchAssetText(url: string, what: string, options: FetchAssetOptions = {}): Promise<string> {
  return fetchAsset(url, what, (res) => res.text(), options);
}

export function fetchAssetBytes(
  url: string,
  what: string,
  options: FetchAssetOptions = {},
): Promise<Uint8Array<ArrayBuffer>> {
  return fetchAsset(url, what, async (res) => new Uint8Array(await res.arrayBuffer()), options);
}

async function fetchAsset<T>(
  url: string,
  what: string,
  read: (res: Response) => Promise<T>,
  { firstWaitMs = 500, headers, onHttpError = rebuild }: FetchAssetOptions,
): Promise<T> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= TRIES; attempt++) {
    if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, firstWaitMs * 2 ** (attempt - 2)));
    let res: Response;
    try {
      res = await fetch(url, headers ? { headers } : undefined);
    } catch (err) {
      lastError = err;
      continue;
    }
    if (!res.ok) {
      const body = await res.text().catch(() => '');
      throw new RingtrainError(
        ErrorCode.BadData,
        `${what}: the server answered ${res.status} ${res.statusText} for ${url}; ${onHttpError(res.status, body)}`,
        { url, status: res.status },
      );
    }
    try {
      // The body can fail after the headers came (the connection cut mid-file): that is a failed try too.
      return await read(res);
    } catch (err) {
      lastError = err;
    }
  }
  const reason = lastError instanceof Error ? lastError.message : String(lastError);
  throw new RingtrainError(
    ErrorCode.BadData,
    `${what}: downloading ${url} failed ${TRIES} times (last: ${reason}); check this tab's connection to the server, then try again.`,
    { url, tries: TRIES },
    { cause: lastError },
  );
}
