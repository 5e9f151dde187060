/**
 * docs/ARCHITECTURE.md after the move (scripts/move-by-concern.mjs): the new folders' rows
 * (scripts/move-by-concern.layers.md) in place of the three they split, the layers drawn
 * before "## Conventions", and rows widened where an import the table does not allow remains.
 */
import { readFileSync } from 'node:fs';

const LAYERS = new URL('./move-by-concern.layers.md', import.meta.url);
/** Folder names other rows may still give for the folders that were split (now rows of their parts). */
const SPLIT_WORDS = /,\s*distributed(?=[,\s|])/g;

/**
 * The blocks of the layers file: `replaces \`folder/\`` → rows, `may import \`folder/\`` → that
 * row's new last column (keyed `column:folder/`), and `glance` → the drawing.
 */
function layerBlocks() {
  const blocks = new Map();
  let current = null;
  for (const line of readFileSync(LAYERS, 'utf8').split('\n')) {
    const marker = /^<!-- (?:replaces `([^`]+)`|may import `([^`]+)`|(glance)) -->$/.exec(line);
    if (marker) blocks.set((current = marker[1] ?? (marker[2] ? `column:${marker[2]}` : marker[3])), []);
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
    if (folder && blocks.has(`column:${folder}`)) return withColumn(line, blocks.get(`column:${folder}`));
    if (folder) return withColumn(line, null);
    return line;
  });
  for (const [key, block] of blocks) {
    const found = key.startsWith('column:') ? lines.some((l) => l.endsWith(` | ${block} |`)) : lines.includes(block);
    if (key !== 'glance' && !found) throw new Error(`no row \`${key.replace('column:', '')}\` in the layer table`);
  }
  const conventions = lines.indexOf('## Conventions');
  if (conventions < 0) throw new Error('no "## Conventions" heading to put the drawing before');
  lines.splice(conventions, 0, blocks.get('glance'), '');
  return lines.join('\n');
}

/** A row with `column` as its last column; without one, the old column less a folder that is no longer one row. */
function withColumn(line, column) {
  const cells = line.split(' | ');
  const last = cells.length - 1;
  cells[last] = column === null ? cells[last].replace(SPLIT_WORDS, '') : `${column} |`;
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
