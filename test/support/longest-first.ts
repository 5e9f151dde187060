/**
 * The order the suite's files start in: longest first, by the durations last measured
 * (test/durations.json, written by scripts/test-durations.mjs from vitest's own cache).
 * vitest orders by its cache, but CI starts from a clean clone with none, and then runs files
 * in path order: a two-minute file starting last kept one worker busy for minutes after the
 * other had finished. Files with no recorded duration count as DEFAULT_SECONDS.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const DEFAULT_SECONDS = 10;
const durations = JSON.parse(readFileSync(new URL('../durations.json', import.meta.url), 'utf8')) as Record<
  string,
  number
>;

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const seconds = (f: TestSpecification) => durations[relative(root, f.moduleId)] ?? DEFAULT_SECONDS;
    return [...files].sort((a, b) => seconds(b) - seconds(a));
  }
}
