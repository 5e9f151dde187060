// Mounts the page's panels exactly as the real page does, for the page tests.
import '../../../demo/src/page.css';
import { mountPage } from '../../../demo/src/page.ts';

const root = document.getElementById('app');
if (!root) throw new Error('page harness: #app is missing');
mountPage(root);
