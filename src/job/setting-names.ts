/**
 * Setting keys as people type them: a value given as text (`--hp key=value`)
 * read as the type its key takes, the known key nearest a slip, and outside
 * text made safe to show in a message.
 */
import { FIELDS, JOB_SETTING_KEYS, type JobSettingKey } from './fields.ts';

/**
 * A setting given as text (`server --hp key=value`) as the value its key takes:
 * 'true'/'false' and numbers become a boolean and a number only where the key
 * takes one, so a text setting that looks like a number (a model name, a hash)
 * stays text. An unknown key gets the old reading; the job's check refuses it.
 */
export function settingFromText(key: string, text: string): number | string | boolean {
  const n = Number(text);
  const candidates = [
    text === 'true' ? true : text === 'false' ? false : undefined,
    text.trim() !== '' && Number.isFinite(n) ? n : undefined,
    text,
  ].filter((v) => v !== undefined);
  if (!Object.hasOwn(FIELDS, key)) return candidates[0];
  const { schema } = FIELDS[key as JobSettingKey];
  return candidates.find((v) => schema.safeParse(v).success) ?? candidates[0];
}

/** Edits (insert, delete, replace) between a and b, case-insensitive. */
function editDistance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}

/** The known key nearest `key`, if one is close enough to be a slip (a third of its letters at most). */
export function nearestSettingKey(key: string): JobSettingKey | undefined {
  let best: JobSettingKey | undefined;
  let bestD = Infinity;
  for (const k of JOB_SETTING_KEYS) {
    const d = editDistance(key, k);
    if (d < bestD) [best, bestD] = [k, d];
  }
  return bestD <= Math.max(1, Math.floor(key.length / 3)) ? best : undefined;
}

/** Text from outside shown in a message: bounded, no control characters. */
export function shown(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  const clean = s.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length > 80 ? `${clean.slice(0, 80)}…` : clean;
}
