// The rule a receiver's `Retry-After` sets a delivery's next attempt by (pure: policy/retry-after.ts
// reads the header, policy/delivery-shares.ts decides the delay): a 429 or 503 waits what it asks,
// as delay-seconds or an HTTP-date, at most RETRY_AFTER_MAX_SECONDS; anything unreadable or on
// another status keeps the schedule. The delivery activity itself is tested on Temporal's test server in
// test/webhook-retry-after.test.ts.
import { describe, expect, it } from 'vitest';
import { deliveryRetrySeconds, nextDeliverySeconds, RETRY_AFTER_MAX_SECONDS } from '../policy/delivery-shares';
import { retryAfterSeconds } from '../policy/retry-after';

const NOW = Date.UTC(2026, 11, 1, 3, 0, 0);
/** The next delay after the first failed attempt answered `status` with `Retry-After: value`. */
const next = (status: number, value: string) => nextDeliverySeconds(1, status, retryAfterSeconds(value, NOW));

describe("a receiver's Retry-After on a delivery", () => {
  it('is waited for on a 429 or a 503, as seconds or as an HTTP-date', () => {
    expect(next(429, '120')).toBe(120);
    expect(next(503, ' 900 ')).toBe(900);
    expect(next(503, new Date(NOW + 20 * 60_000).toUTCString())).toBe(1200);
    // The obsolete forms a recipient must read: RFC 850 and asctime.
    expect(next(429, 'Tuesday, 01-Dec-26 03:10:00 GMT')).toBe(600);
    expect(next(429, 'Tue Dec  1 03:10:00 2026')).toBe(600);
  });

  it('is capped at the schedule\'s largest delay (an hour), however long it asks', () => {
    expect(RETRY_AFTER_MAX_SECONDS).toBe(3600);
    expect(next(503, '86400')).toBe(3600);
    expect(next(503, '99999999999999999999')).toBe(3600);
    expect(next(503, new Date(NOW + 400 * 86_400_000).toUTCString())).toBe(3600);
  });

  it('keeps the schedule when it is unreadable, already passed, shorter than the schedule, or on another status', () => {
    const scheduled = deliveryRetrySeconds(1);
    for (const value of ['', 'soon', '-5', '1.5', '1e3', '0x10', '120 seconds', 'Tue, 31 Jun 2026 03:10:00 GMT', 'x 2030', '9'.repeat(400)]) {
      expect(next(503, value), JSON.stringify(value)).toBe(scheduled);
    }
    expect(next(503, new Date(NOW - 60_000).toUTCString())).toBe(scheduled);
    expect(next(503, '0')).toBe(scheduled);
    expect(nextDeliverySeconds(6, 503, 30)).toBe(deliveryRetrySeconds(6));
    expect(next(500, '600')).toBe(scheduled);
    expect(nextDeliverySeconds(1, null, 600)).toBe(scheduled);
  });
});
