/**
 * docs/ARCHITECTURE.md after the move (scripts/move-by-concern.mjs): the new folders' rows
 * (scripts/move-by-concern.layers.md) in place of the three they split, the layers drawn
 * before "## Conventions", and rows widened where an import the table does not allow remains.
 */
import { readFileSync } from 'node:fs';

const LAYERS = new URL('./move-by-concern.layers.md', import.meta.url);
/** Folder names other rows may still give for the folders that were split (now rows of their parts). */
const SPLIT_WORDS = /,\s*distributed(?=[,\s|])/g;

/** The blocks of the layers file: `replaces \`folder/\`` → rows, and `glance` → the drawing. */
function layerBlocks() {
  const blocks = new Map();
  let current = null;
  for (const line of readFileSync(LAYERS, 'utf8').split('\n')) {
    const marker = /^<!-- (?:replaces `([^`]+)`|(glance)) -->$/.exec(line);
    if (marker) blocks.set((current = marker[1] ?? marker[2]), []);
    else if (current) blocks.get(current).push(line);
  }
  for (const [key, lines] of blocks) blocks.set(key, lines.join('\n').trim());
  return blocks;
}

const firstCell = (line) => /^\| `([^`]+)` \|/.exec(line)?.[1];

/** The new table rows and the drawing, in place of the rows they replace. */
export function spliceLayerTable(markdown) {
  const blocks = layerBlocks();
  const lines = markdown.split('\n').map((line) => {
    const folder = firstCell(line);
    if (folder && blocks.has(folder)) return blocks.get(folder);
    if (folder) return withoutSplitWords(line);
    return line;
  });
  for (const folder of blocks.keys()) {
    if (folder !== 'glance' && !lines.includes(blocks.get(folder))) throw new Error(`no row \`${folder}\` to replace`);
  }
  const conventions = lines.indexOf('## Conventions');
  if (conventions < 0) throw new Error('no "## Conventions" heading to put the drawing before');
  lines.splice(conventions, 0, blocks.get('glance'), '');
  return lines.join('\n');
}

/** A row's last column without the name of a folder that is no longer one row. */
function withoutSplitWords(line) {
  const cells = line.split(' | ');
  cells[cells.length - 1] = cells[cells.length - 1].replace(SPLIT_WORDS, '');
  return cells.join(' | ');
}

/**
 * Each row named by a violation may now import the layer it was found importing: the table
 * then states what the code does, and the lead reads the printed list to undo what should not be.
 */
export function widenRows(markdown, violations) {
  const wanted = new Map();
  for (const v of violations) {
    if (!wanted.has(v.fromLayer)) wanted.set(v.fromLayer, new Set());
    wanted.get(v.fromLayer).add(v.toLayer.replace(/^src\//, ''));
  }
  return markdown
    .split('\n')
    .map((line) => {
      const folder = firstCell(line)?.replace(/\/$/, '');
      const more = folder && wanted.get(folder);
      return more ? line.replace(/ \|$/, `, ${[...more].sort().join(', ')} |`) : line;
    })
    .join('\n');
}
