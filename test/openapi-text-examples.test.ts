// Examples of the OpenAPI document that are not JSON, held to what the real API answers: a reader
// (or a dashboard written from the document) goes by them, so a metric or label they show must be
// one /metrics serves.
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createSyncMetrics } from '../lib/metrics';
import { useApiWithoutTemporal } from './helpers/api';

type Json = Record<string, any>;

const registry = new Registry();
const metrics = createSyncMetrics(registry);

describe('text examples of the document (real API app, real Postgres)', () => {
  const api = useApiWithoutTemporal('openapi-text-examples', { registry, metrics });

  it("the /metrics example shows a metric as /metrics serves it: its HELP and TYPE lines, and a sample with the family's own labels", async () => {
    const doc = (await (await api.app.request('/openapi.json')).json()) as Json;
    const example = String(doc.paths['/metrics'].get.responses['200'].content['text/plain'].example);
    const lines = example.trim().split('\n');
    const samples = lines.filter((l) => !l.startsWith('#'));
    expect(samples.length).toBeGreaterThan(0);
    for (const sample of samples) {
      const [, name, labelText, value] = /^([a-zA-Z_:][\w:]*)\{([^}]*)\} (\S+)$/.exec(sample) ?? [];
      expect(name, sample).toBeDefined();
      const labels = Object.fromEntries([...labelText!.matchAll(/(\w+)="([^"]*)"/g)].map(([, k, v]) => [k, v]));
      // The sample, counted for real: a label the family does not have is refused here.
      const family = registry.getSingleMetric(name!);
      expect(family, `${name} is a metric the API registers`).toBeInstanceOf(Counter);
      (family as Counter<string>).inc(labels, Number(value));
    }
    const served = await (await api.app.request('/metrics', { headers: { authorization: 'Bearer test-admin-key-0123456789abcdef' } })).text();
    const servedLines = served.split('\n');
    for (const line of lines.filter((l) => l.startsWith('#'))) expect(servedLines, 'a HELP or TYPE line of the example').toContain(line);
    for (const sample of samples) {
      const [, name, labelText, value] = /^([a-zA-Z_:][\w:]*)\{([^}]*)\} (\S+)$/.exec(sample)!;
      const pairs = labelText!.split(',').sort();
      expect(servedLines.some((l) => l.startsWith(`${name}{`) && l.endsWith(` ${value}`) && l.slice(name!.length + 1, l.lastIndexOf('}')).split(',').sort().join(',') === pairs.join(',')), sample).toBe(true);
    }
  });
});
