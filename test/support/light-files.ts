/**
 * The test files that share their vitest workers (vitest.config.ts, project 'shared', `isolate: false`): those
 * measured at LIGHT_SECONDS or less in the last full run (test/durations.json). They are unit tests, and in a
 * fresh worker each paid about half a second of CPU to start it and to evaluate its imports anew (137 such files:
 * 146 s of CPU isolated, 90 s sharing workers). A file with no recorded duration runs isolated, as do the
 * longer ones, which start processes, servers and browsers, where a fresh worker costs little beside them.
 */
import { readFileSync } from 'node:fs';

export const LIGHT_SECONDS = 3;

const durations = JSON.parse(readFileSync(new URL('../durations.json', import.meta.url), 'utf8')) as Record<
  string,
  number
>;

/** Paths from the repository's root, as in test/durations.json. */
export const LIGHT_FILES = Object.keys(durations).filter((file) => durations[file] <= LIGHT_SECONDS);
