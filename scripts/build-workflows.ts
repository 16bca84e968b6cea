// `npm run build:workflows [-- <file>]`: writes the workflow bundle (default dist/workflow-bundle.js)
// for workers started with WORKFLOW_BUNDLE_PATH, e.g. when building a production image.
import path from 'node:path';
import { writeWorkflowBundle } from '../infra/workflow-bundle';

const file = path.resolve(process.argv[2] ?? 'dist/workflow-bundle.js');
await writeWorkflowBundle(file);
console.log(`workflow bundle written to ${file}`);
