// Types of scripts/gen-ops-index.mjs, for the TypeScript that imports it (bin/ringtrain.js is plain JS).
/** The absolute path of src/nn/ops/index.ts. */
export declare const OPS_INDEX: string;
/** The op folders under src/nn/ops/, sorted. */
export declare function opFolders(): string[];
/** The barrel's text for the folders on disk now. */
export declare function renderOpsIndex(): string;
/** Writes the barrel when it differs from what the folders give; returns whether it wrote. */
export declare function writeOpsIndex(): boolean;
