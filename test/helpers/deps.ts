import { DEFAULT_RATE_LIMIT_POLICY, DEFAULT_RATE_LIMIT_RETRY_CAP } from '../../policy/rate-limit';
import type { RateLimitSettings } from '../../activities/deps';

/** The rate-limit settings of an unconfigured worker (SPEC §5 defaults). */
export const DEFAULT_RATE_LIMIT_SETTINGS: RateLimitSettings = {
  defaults: DEFAULT_RATE_LIMIT_POLICY,
  overrides: {},
  retryCap: DEFAULT_RATE_LIMIT_RETRY_CAP,
};
