/**
 * Downloads one of the page's data files (the digits, the dictionary) as text, trying again when
 * the connection fails. A tab that joins fetches 21 MB of digits over several connections at once;
 * one connection cut on the way (a busy server, a proxy, a flaky Wi-Fi) must not send the volunteer
 * back to the Join button. HTTP errors are answers, not failures, and are not retried: a 404 means
 * the page was built without the file.
 */
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';

/** How many times in all a download is tried. */
const TRIES = 3;

/**
 * `what` names the file in errors (`mnist: digit file 3`). `firstWaitMs` is the wait before the
 * second try, doubled before each later one (tests shorten it).
 */
export async function fetchAssetText(url: string, what: string, { firstWaitMs = 500 }: { firstWaitMs?: number } = {}): Promise<string> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= TRIES; attempt++) {
    if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, firstWaitMs * 2 ** (attempt - 2)));
    let res: Response;
    try {
      res = await fetch(url);
    } catch (err) {
      lastError = err;
      continue;
    }
    if (!res.ok) {
      throw new RingtrainError(ErrorCode.BadData, `${what}: the server answered ${res.status} ${res.statusText} for ${url}; rebuild the page (npm run build:page).`, { url, status: res.status });
    }
    try {
      // The body can fail after the headers came (the connection cut mid-file): that is a failed try too.
      return await res.text();
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
