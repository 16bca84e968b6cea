// A configuration error never shows an address's credentials. TEMPORAL_ADDRESS is host:port with
// no scheme, and an operator may write credentials before its host (`user:secret@host:7233`,
// `token@host:7233`): its error names the variable and the form expected, never its value, and
// no host holds an `@`, so such an address is refused rather than taken (and logged while the
// process waits for the frontend). Any other variable's value that holds an `@` without being a
// scheme:// URL (where its password ends cannot be told) is not shown either.
import { describe, expect, it } from 'vitest';
import { shownValue } from '../lib/config';
import { configError } from './helpers/config';

const TEMPORAL_ADDRESS_RULE = 'must be host:port with a port from 1 to 65535, for example localhost:7233 or [fd00::7]:7233';

describe('TEMPORAL_ADDRESS in a configuration error', () => {
  it('names the variable and its form, never its value', () => {
    for (const address of ['user:hunter2@temporal:7233', 'hunter2@temporal:7233', 'https://user:hunter2@temporal:7233', 'temporal-hunter2:72330', 'user:hunter2@[::1]:7233']) {
      expect(configError({ TEMPORAL_ADDRESS: address }), address).toBe(`Invalid configuration:\n  TEMPORAL_ADDRESS: ${TEMPORAL_ADDRESS_RULE}`);
    }
  });
});

describe('another address or URL holding credentials without a scheme', () => {
  it('is not echoed by its configuration error', () => {
    const cases: [string, string][] = [
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'user:hunter2@collector:4318'],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http:/user:hunter2@collector:4318'],
      ['PROVIDER_HOSTS', 'api.github.com,user:hunter2@ghe.example.com'],
    ];
    for (const [name, value] of cases) {
      const message = configError({ [name]: value });
      expect(message, `${name}=${value}`).toMatch(new RegExp(`^  ${name}: must`, 'm'));
      expect(message, `${name}=${value}`).not.toContain('hunter2');
    }
    expect(shownValue('API_HOST', 'user:hunter2@0.0.0.0')).toBeUndefined();
    // A scheme:// URL still shows, its password masked.
    expect(shownValue('OTEL_EXPORTER_OTLP_ENDPOINT', 'ftp://user:hunter2@collector:4318')).toBe('ftp://user:***@collector:4318');
    // A user alone may be the secret (a token as the URL's user, as Git hosts take it): masked whole.
    expect(shownValue('OTEL_EXPORTER_OTLP_ENDPOINT', 'ftp://ghp_hunter2@collector:4318')).toBe('ftp://***@collector:4318');
    expect(configError({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://ghp_hunter2@collector:4318' })).not.toContain('hunter2');
  });
});
