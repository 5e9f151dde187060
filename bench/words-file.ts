/**
 * Prints the transformer workload's word list, one a–z word per line, in the
 * order the project uses (src/data/words.ts: the CMUdict keys lowercased,
 * variants merged, sorted, at most 30 letters): the WORDS_FILE that the
 * PyTorch reference (gpt_ref.py SEED WORDS_FILE STEPS) reads, so both train on
 * the same 116,505 words. scripts/gpu-carry.sh writes it into the carry.
 *
 *   node --import tsx bench/words-file.ts > words.txt
 */
import { readFileSync } from 'node:fs';
import { cmudictPath } from '../src/data/words.node.ts';
import { wordsFromDictionary } from '../src/data/words.ts';

process.stdout.write(wordsFromDictionary(readFileSync(cmudictPath(), 'utf8')).join('\n') + '\n');
