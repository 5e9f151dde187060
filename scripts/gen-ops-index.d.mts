// Types of scripts/gen-ops-index.mjs, for the TypeScript that imports it (bin/ringtrain.js is plain JS).
/** The absolute path of src/nn/ops/index.ts. */
export declare const OPS_INDEX: string;
/** The op folders under src/nn/ops/, sorted. */
export declare function opFolders(): string[];
/** The barrel's text for the folders on disk now. */
export declare function renderOpsIndex(): string;
/** The absolute path of src/optimizers/index.ts. */
export declare const OPTIMIZERS_INDEX: string;
/** The optimizers' files under src/optimizers/ (all but the registry and the barrel), sorted. */
export declare function optimizerFiles(): string[];
/** The optimizers' barrel's text for the files on disk now. */
export declare function renderOptimizersIndex(): string;
/** Writes both barrels where they differ from what the files give; returns the paths written. */
export declare function writeOpsIndex(): string[];
