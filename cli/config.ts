// Where the CLI finds the API and its key: `--url`, then the environment (SYNCTIDE_URL,
// SYNCTIDE_API_KEY), then a JSON config file ({"url": …, "api_key": …}) named by `--config` or
// SYNCTIDE_CONFIG, else $XDG_CONFIG_HOME/synctide/config.json (~/.config/synctide/config.json).
// There is no flag for the key: a key on a command line is left in shell history and `ps`. The key
// is never printed, not even in errors; `synctide config` says only where it came from. The key
// must be one token a header can carry; the URL must be http or https and carry no user name or
// password.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { MIN_RETRY_WAIT_MS, usage } from './errors';

export interface Settings {
  url: string;
  apiKey: string;
  /** Where each came from, for `synctide config` and error messages. */
  sources: { url: string; apiKey: string };
  /** The config file read, if any. */
  file?: string;
  /**
   * The least wait in milliseconds before a read made again (a job followed, the feed tailed):
   * SYNCTIDE_RETRY_WAIT_MS, else MIN_RETRY_WAIT_MS (1 s). Each wait is the longer of this and
   * the --poll interval, times the count.
   */
  retryWaitMs: number;
}

interface FileSettings {
  url?: string;
  api_key?: string;
}

/** The default config file path for `env`. */
export function defaultConfigPath(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'synctide', 'config.json');
}

function readConfigFile(path: string, required: boolean): FileSettings | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (!required && (err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw usage(`cannot read config file ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // The parser's message may quote the file, key included: say only where.
    throw usage(`config file ${path} is not valid JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw usage(`config file ${path} must hold a JSON object`);
  const { url, api_key } = parsed as Record<string, unknown>;
  if (url !== undefined && typeof url !== 'string') throw usage(`config file ${path}: "url" must be a string`);
  if (api_key !== undefined && typeof api_key !== 'string') throw usage(`config file ${path}: "api_key" must be a string`);
  return { url, api_key };
}

/** The URL and key from the flags, `env` and the config file, or a usage error naming what is missing. */
export function resolveSettings(flags: { url?: string; config?: string }, env: NodeJS.ProcessEnv): Settings {
  const named = flags.config ?? (env.SYNCTIDE_CONFIG || undefined);
  const path = named ?? defaultConfigPath(env);
  const file = readConfigFile(path, named !== undefined);
  const pick = (flag: string | undefined, flagName: string, envName: string, fileValue: string | undefined): [string, string] | undefined => {
    if (flag) return [flag, flagName];
    if (env[envName]) return [env[envName]!, envName];
    if (fileValue) return [fileValue, path];
    return undefined;
  };
  const url = pick(flags.url, '--url', 'SYNCTIDE_URL', file?.url);
  const apiKey = pick(undefined, '', 'SYNCTIDE_API_KEY', file?.api_key);
  if (!url) throw usage(`no API URL: set SYNCTIDE_URL, pass --url, or put "url" in ${path}`);
  if (!apiKey) throw usage(`no API key: set SYNCTIDE_API_KEY or put "api_key" in ${path}`);
  // A key goes in a header, which carries one token of visible characters (surrounding blanks, such
  // as a file's trailing newline, are dropped as fetch drops them). fetch's own refusal of another
  // would quote the whole header, key included: refused here naming only where the key came from.
  const key = apiKey[0].trim();
  if (!/^[\x21-\x7e\x80-\xff]+$/.test(key)) {
    throw usage(`the API key from ${apiKey[1]} is not one token of visible characters (it holds a blank, a control character or a character past U+00FF); the key is not shown`);
  }
  let parsedUrl: URL;
  try {
    parsedUrl = new URL(url[0]);
  } catch {
    throw usage(`the API URL from ${url[1]} is not a URL`);
  }
  if (parsedUrl.protocol !== 'http:' && parsedUrl.protocol !== 'https:') throw usage(`the API URL from ${url[1]} must be http or https`);
  // fetch sends no URL with credentials in it, and the CLI prints the URL (`synctide config`): the
  // refusal names where the URL came from, never the URL.
  if (parsedUrl.username !== '' || parsedUrl.password !== '') throw usage(`the API URL from ${url[1]} must not carry a user name or password (user:password@)`);
  return {
    url: url[0].replace(/\/+$/, ''),
    apiKey: key,
    sources: { url: url[1], apiKey: apiKey[1] },
    ...(file && { file: path }),
    retryWaitMs: retryWait(env),
  };
}

/** SYNCTIDE_RETRY_WAIT_MS: a whole number of milliseconds from 1 to 600000 (10 min); unset or empty, MIN_RETRY_WAIT_MS. */
function retryWait(env: NodeJS.ProcessEnv): number {
  const value = env.SYNCTIDE_RETRY_WAIT_MS?.trim();
  if (!value) return MIN_RETRY_WAIT_MS;
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 600_000) throw usage('SYNCTIDE_RETRY_WAIT_MS must be a whole number of milliseconds from 1 to 600000');
  return Number(value);
}
