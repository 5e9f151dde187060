/**
 * Every optimizer's test file, `test/optimizers/<name>.cases.ts`, found by listing this folder
 * (Node and Deno alike: neither can glob imports), so a new optimizer adds its tests without
 * editing a list. A file exports `ORACLE_CASES` (its update against an f64 reference: update-case.ts),
 * which join the oracle list that runs under Node (test/gpu/oracles.test.ts) and Deno
 * (test/deno/run-oracles.ts), and may export `WORDS_RUN`: the flags with which `ringtrain train`
 * trains the words transformer with it (test/optimizers/words.test.ts runs them).
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { OracleCase } from '../oracles/oracle-case.ts';

export interface OptimizerCaseFile {
  ORACLE_CASES: OracleCase[];
  /** Flags for `ringtrain train --model transformer --optimizer <name>` beyond the test's own. */
  WORDS_RUN?: string[];
}

const dir = fileURLToPath(new URL('./', import.meta.url));
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.cases.ts'))
  .map((f) => f.slice(0, -'.cases.ts'.length))
  .sort();

/** Each optimizer's test file by the optimizer's name (its file name). */
export const OPTIMIZER_CASE_FILES: Readonly<Record<string, OptimizerCaseFile>> = Object.fromEntries(
  await Promise.all(names.map(async (n) => [n, (await import(`${dir}${n}.cases.ts`)) as OptimizerCaseFile] as const)),
);

export const OPTIMIZER_ORACLE_CASES: OracleCase[] = Object.values(OPTIMIZER_CASE_FILES).flatMap((f) => f.ORACLE_CASES);
