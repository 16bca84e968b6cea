// TEMPORAL_ADDRESS is host:port with a port a frontend can listen on (1-65535). A port outside it
// (a typo such as 72330, or 0) used to be accepted: the process then waited the whole
// TEMPORAL_STARTUP_WAIT_SECONDS (300 s by default) "for the Temporal frontend to answer" and exited
// 1, instead of naming the variable at once.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../lib/config';

function configError(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  return '';
}

describe('TEMPORAL_ADDRESS', () => {
  // Never its value (it may hold credentials: test/config-address-secrets.test.ts).
  it('refuses a port outside 1-65535, naming the variable and the rule', () => {
    for (const address of ['localhost:72330', 'temporal:0', 'temporal:00000', 'temporal:65536']) {
      expect(configError({ TEMPORAL_ADDRESS: address }), address).toBe(
        `Invalid configuration:\n  TEMPORAL_ADDRESS: must be host:port with a port from 1 to 65535, for example localhost:7233 or [fd00::7]:7233`,
      );
    }
  });

  it('accepts every host:port with a port from 1 to 65535', () => {
    for (const address of ['localhost:7233', 'temporal:1', 'acme.a1b2c.tmprl.cloud:7233', '10.0.0.7:65535', ' temporal:7233 ']) {
      expect(loadConfig({ TEMPORAL_ADDRESS: address }).TEMPORAL_ADDRESS, address).toBe(address.trim());
    }
  });
});
