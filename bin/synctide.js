#!/usr/bin/env node
// `npx synctide …` from the repository: the CLI is TypeScript (cli/main.ts), run through tsx's
// loader, registered here so no build step is needed.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
