// The tests sync demo connections: register the demo provider (off by default, as in production),
// the one of test/helpers/demo.ts, whose fetch log and worlds the tests read.
import { enableDemoConnector } from '../connectors/registry';
import { demoConnector } from './helpers/demo';

enableDemoConnector(demoConnector);
