// The rules live beside the job settings' schema (src/signaling), which the server may import.
export {
  configSettingName,
  refuseConflicts,
  settingConflict,
  type Conflict,
  type ConflictSettings,
  type Setting,
} from '../signaling/setting-conflicts.ts';
