#!/usr/bin/env node
// The chaos entry under Node, as bin/ringtrain.js is the CLI's: TypeScript through tsx's loader.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
