import { register } from 'node:module';

// AVA's test workers load TypeScript through ts-hooks.mjs (see there why not tsx).
register('./ts-hooks.mjs', import.meta.url);
