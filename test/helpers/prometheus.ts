// Reading a Prometheus text exposition, and running the alert rules' unit tests with promtool.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The value of the sample `name{labels}` in a Prometheus text exposition, or undefined when it is not exported. */
export function sampleIn(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** Every sample of `name`, whatever its labels, in a Prometheus text exposition, in order. */
export function samplesOf(text: string, name: string): number[] {
  return text
    .split('\n')
    .map((line) => /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})? (\S+)$/.exec(line))
    .filter((m) => m?.[1] === name)
    .map((m) => Number(m![2]));
}

/** Runs `promtool test rules` on `tests` against deploy/prometheus/rules.yml; returns promtool's output and status. */
export async function promtoolTest(tests: unknown[]): Promise<{ status: number | null; output: string }> {
  if (spawnSync('promtool', ['--version']).error) throw new Error('promtool is required (apt-get install prometheus, as .ci/run does)');
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-promtool-'));
  try {
    await fs.copyFile(path.join(ROOT, 'deploy/prometheus/rules.yml'), path.join(work, 'rules.yml'));
    await fs.writeFile(path.join(work, 'test.yml'), JSON.stringify({ rule_files: ['rules.yml'], evaluation_interval: '1m', tests }, null, 2));
    const run = spawnSync('promtool', ['test', 'rules', 'test.yml'], { cwd: work, encoding: 'utf8' });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}
