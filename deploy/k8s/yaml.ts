/**
 * Plain objects to YAML, enough for Kubernetes manifests: maps, lists,
 * strings, numbers, booleans. Every string is written double-quoted (JSON's
 * escapes are YAML's), so no value is ever read back as another type (`"true"`,
 * `"0755"`, `"3600"` stay strings). No dependency: kubectl reads it as is.
 */
type Yamlable = string | number | boolean | null | Yamlable[] | { [key: string]: Yamlable };

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_./-]*$/;
const key = (k: string) => (PLAIN_KEY.test(k) ? k : JSON.stringify(k));
const scalar = (v: string | number | boolean | null) => (typeof v === 'string' ? JSON.stringify(v) : String(v));
const isEmpty = (v: Yamlable) => (Array.isArray(v) ? v.length === 0 : typeof v === 'object' && v !== null && Object.keys(v).length === 0);

function lines(value: Yamlable, indent: string): string[] {
  if (Array.isArray(value)) {
    const out: string[] = [];
    for (const item of value) {
      if (typeof item === 'object' && item !== null && !isEmpty(item)) {
        // The first line of a nested block goes after the dash; the rest keep the dash's indent plus two.
        const [first, ...rest] = lines(item, `${indent}  `);
        out.push(`${indent}- ${first.trimStart()}`, ...rest);
      } else {
        out.push(`${indent}- ${inline(item)}`);
      }
    }
    return out;
  }
  if (typeof value === 'object' && value !== null) {
    const out: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue;
      if (typeof v === 'object' && v !== null && !isEmpty(v)) out.push(`${indent}${key(k)}:`, ...lines(v, Array.isArray(v) ? indent : `${indent}  `));
      else out.push(`${indent}${key(k)}: ${inline(v)}`);
    }
    return out;
  }
  return [`${indent}${scalar(value)}`];
}

function inline(v: Yamlable): string {
  if (Array.isArray(v)) return '[]';
  if (typeof v === 'object' && v !== null) return '{}';
  return scalar(v);
}

/** One YAML document per object, separated by `---`. */
export function toYaml(objects: readonly object[]): string {
  return objects.map((o) => `---\n${lines(o as Yamlable, '').join('\n')}\n`).join('');
}
