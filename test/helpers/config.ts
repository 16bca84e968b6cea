import { loadConfig } from '../../lib/config';

/** The message of the configuration error `env` makes, or '' when it loads. */
export function configError(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env);
  } catch (err) {
    return (err as Error).message;
  }
  return '';
}
