// The schema lives with the signaling schemas, which the server may import (docs/ARCHITECTURE.md).
export {
  stepCheckOn,
  withOutsiderChecks,
  JOB_SETTING_DEFAULTS,
  JOB_SETTING_KEYS,
  jobSettingsSchema,
  nearestSettingKey,
  parseJobSettings,
  settingFromText,
  type JobSettingKey,
  type JobSettings,
} from '../signaling/settings.ts';
