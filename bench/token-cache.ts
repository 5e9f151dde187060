/**
 * How fast a text is tokenized into the token cache, and in how much memory.
 *
 *   npx tsx bench/token-cache.ts --write /tmp/big.txt --mb 200
 *   /usr/bin/time -v npx tsx bench/token-cache.ts --text /tmp/big.txt --tokenizer gpt2
 *
 * --write makes a text of --mb MB from the Brown corpus's paragraphs, shuffled
 * afresh on each pass over them (so a large text is real English, not one
 * sentence repeated), and exits. --text builds that text's cache with
 * --tokenizer (default gpt2) in a fresh folder, deletes it again, and prints
 * one JSON line: bytes, tokens, seconds, tokens/s, MB/s and the process's
 * peak RSS.
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadText, textSource } from '../src/data/text.node.ts';
import { cachedTokens } from '../src/data/token-cache.node.ts';
import { parseTokenizerName } from '../src/data/tokenizer.ts';
import { mulberry32 } from '../src/core/random.ts';
import { opt } from './args.ts';

/** `mb` MB of Brown paragraphs at `path`, shuffled afresh each pass over them. */
function writeText(path: string, mb: number): void {
  const paragraphs = loadText('@brown')
    .text.split('\n')
    .filter((p) => p.length > 0);
  const random = mulberry32(1);
  const fd = openSync(path, 'w');
  const encoder = new TextEncoder();
  let written = 0;
  while (written < mb * 1e6) {
    for (let i = paragraphs.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [paragraphs[i], paragraphs[j]] = [paragraphs[j], paragraphs[i]];
    }
    for (let at = 0; at < paragraphs.length && written < mb * 1e6; at += 1000) {
      const bytes = encoder.encode(paragraphs.slice(at, at + 1000).join('\n') + '\n');
      writeSync(fd, bytes);
      written += bytes.length;
    }
  }
  closeSync(fd);
}

const write = opt('write', '');
if (write) {
  writeText(write, Number(opt('mb', '20')));
} else {
  const tokenizer = parseTokenizerName(opt('tokenizer', 'gpt2'));
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-token-cache-'));
  try {
    const source = textSource(opt('text', ''));
    const started = performance.now();
    const { cache } = await cachedTokens(source, tokenizer, dir);
    const seconds = (performance.now() - started) / 1000;
    console.log(
      JSON.stringify({
        tokenizer: cache.header.name,
        bytes: source.size,
        tokens: cache.length,
        seconds: Number(seconds.toFixed(2)),
        tokens_per_s: Math.round(cache.length / seconds),
        mb_per_s: Number((source.size / 1e6 / seconds).toFixed(2)),
        cache_bytes: cache.length * cache.header.idBytes,
        peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
      }),
    );
    cache.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
