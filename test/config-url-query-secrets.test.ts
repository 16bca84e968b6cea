// A configuration error, and the log line naming the OTLP endpoint, show a URL's value with its
// password masked. node-postgres also takes the password (and libpq's sslpassword) from the URL's
// query (`?password=`), and a collector's token may be a query parameter: such values are masked
// too, whatever else of the URL is shown.
import { describe, expect, it } from 'vitest';
import { shownValue } from '../lib/config';
import { configError } from './helpers/config';

describe('a URL whose secret is in its query', () => {
  it('is never echoed by a configuration error: the variable and its rule are named, the password is not', () => {
    const cases: [string, string][] = [
      ['DATABASE_URL', 'postgress://app@db/synctide?password=hunter2-query&sslmode=require'],
      ['DATABASE_MIGRATION_URL', 'http://owner@db/synctide?sslmode=verify-full&sslpassword=hunter2-query'],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://collector:4317/?api_key=hunter2-query'],
    ];
    for (const [name, value] of cases) {
      const message = configError({ [name]: value });
      expect(message, `${name}=${value}`).toMatch(new RegExp(`^  ${name}: must be`, 'm'));
      expect(message, `${name}=${value}`).not.toContain('hunter2-query');
    }
  });

  it('shows the rest of the URL, each secret parameter masked, the others as they are', () => {
    expect(shownValue('DATABASE_URL', 'postgress://app@db/synctide?password=hunter2&sslmode=require')).toBe('postgress://app@db/synctide?password=***&sslmode=require');
    expect(shownValue('DATABASE_URL', 'mysql://app:hunter2@db/x?PassWord=hunter2&Token=hunter2&application_name=a')).toBe('mysql://app:***@db/x?PassWord=***&Token=***&application_name=a');
    expect(shownValue('OTEL_EXPORTER_OTLP_ENDPOINT', 'https://collector:4318/?sig=hunter2#x')).toBe('https://collector:4318/?sig=***#x');
    expect(shownValue('OTEL_EXPORTER_OTLP_ENDPOINT', 'https://collector:4318/v1')).toBe('https://collector:4318/v1');
  });
});
