import { describe, expect, inject, it } from 'vitest';
import { ConfigError, loadConfig } from '../lib/config';

describe('configuration', () => {
  it('uses documented defaults for an empty environment', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      API_PORT: 3000,
      TEMPORAL_UI_PORT: 8233,
      TEMPORAL_NAMESPACE: 'default',
      SCHEDULER_TICK_SECONDS: 60,
      JITTER_PCT_MIN: 0,
      JITTER_PCT_MAX: 0.2,
      MAX_OVERRIDDEN_INTERVAL_SECONDS: 86400,
      RETENTION_DAYS: 7,
      IMMEDIATE_SYNC_TIMEOUT_SECONDS: 60,
      MAX_PAGES_PER_TASK: 10000,
    });
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it('names the variable and the rule of an invalid value', () => {
    expect(() => loadConfig({ API_PORT: 'abc' })).toThrow(ConfigError);
    expect(() => loadConfig({ API_PORT: 'abc' })).toThrow(/API_PORT: must be an integer port number between 1 and 65535 \(got "abc"\)/);
    expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL: must be a postgres:\/\//);
    expect(() => loadConfig({ TEMPORAL_ADDRESS: 'http://x' })).toThrow(/TEMPORAL_ADDRESS: must be host:port/);
    expect(() => loadConfig({ JITTER_PCT_MAX: '1.5' })).toThrow(/JITTER_PCT_MAX: must be a number from 0 up to \(not including\) 1/);
    expect(() => loadConfig({ WORKFLOW_BUNDLE_PATH: '/no/such/bundle.js' })).toThrow(/WORKFLOW_BUNDLE_PATH: no file there; build it with `npm run build:workflows/);
    expect(loadConfig({ WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath') }).WORKFLOW_BUNDLE_PATH).toBe(inject('workflowBundlePath'));
  });

  it('rejects jitter bounds whose minimum exceeds the maximum', () => {
    expect(() => loadConfig({ JITTER_PCT_MIN: '0.3', JITTER_PCT_MAX: '0.1' })).toThrow(/JITTER_PCT_MIN: must not exceed JITTER_PCT_MAX/);
    expect(loadConfig({ JITTER_PCT_MIN: '0.05', JITTER_PCT_MAX: '0.3' })).toMatchObject({ JITTER_PCT_MIN: 0.05, JITTER_PCT_MAX: 0.3 });
  });

  it('refuses a DEFAULT_INTERVAL_SECONDS below the smallest allowed interval (60 s)', () => {
    expect(() => loadConfig({ DEFAULT_INTERVAL_SECONDS: '30' })).toThrow(ConfigError);
    expect(() => loadConfig({ DEFAULT_INTERVAL_SECONDS: '30' })).toThrow(/DEFAULT_INTERVAL_SECONDS: must be at least 60 \(the smallest allowed interval\) \(got "30"\)/);
    expect(loadConfig({ DEFAULT_INTERVAL_SECONDS: '60' }).DEFAULT_INTERVAL_SECONDS).toBe(60);
  });

  it('reports every invalid variable at once', () => {
    try {
      loadConfig({ API_PORT: '0', LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/API_PORT/);
      expect((err as Error).message).toMatch(/LOG_LEVEL/);
    }
  });
});
