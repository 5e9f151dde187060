/**
 * A job's settings in words, for whoever shows them (the page's settings
 * table): each given key with its name, its value as text, and its help and
 * unit from the settings' table (fields.ts), in the order of the job's keys.
 */
import { FIELDS, type JobSettingKey } from './fields.ts';

export interface SettingRow {
  key: string;
  /** The key in words: `globalBatch` → `global batch`. */
  name: string;
  value: string;
  /** What it does (absent for a key this version does not know: another version's server). */
  help?: string;
  unit?: string;
}

/** A setting's key in words: `globalBatch` → `global batch`. */
export function settingName(key: string): string {
  return key.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
}

/** The rows of the settings a job's `hyperparameters` give, as given (nothing defaulted). */
export function settingRowsOf(hyperparameters: Record<string, unknown>): SettingRow[] {
  return Object.entries(hyperparameters).map(([key, v]) => {
    const f: { help: string; unit?: string } | undefined = Object.hasOwn(FIELDS, key)
      ? FIELDS[key as JobSettingKey]
      : undefined;
    const value = typeof v === 'string' ? v : JSON.stringify(v);
    return { key, name: settingName(key), value, ...(f ? { help: f.help } : {}), ...(f?.unit ? { unit: f.unit } : {}) };
  });
}
