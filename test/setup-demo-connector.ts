// The tests sync demo connections: register the demo provider (off by default, as in production)
// and record its fetch log, which they read to prove what was fetched.
import { recordDemoFetches } from '../connectors/demo';
import { enableDemoConnector } from '../connectors/registry';

enableDemoConnector();
recordDemoFetches(true);
