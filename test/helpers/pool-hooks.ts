// A pool that runs a test's hook around a statement: for making another session's change fall
// exactly between two statements of the code under test.
import type { Pool } from '../../db/pool';

/**
 * `pool`, running `hook` at each of the first `times` statements (one unless given) that `matches`,
 * whether sent by `pool.query` or by a client the pool hands out (`pool.connect`, inside a
 * transaction): before it is sent, or after it answered (then the statement's result is returned
 * after the hook). A string matches as a part of the text, a RegExp as it tests. A hook at a
 * statement of a transaction runs while that transaction is open: it must not wait for a lock the
 * transaction holds.
 */
export function poolWithHook(pool: Pool, when: 'before' | 'after', matches: string | RegExp, hook: () => Promise<unknown>, times = 1): Pool {
  let left = times;
  const take = (args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : '';
    if (left <= 0 || !(typeof matches === 'string' ? text.includes(matches) : matches.test(text))) return null;
    left -= 1;
    return hook;
  };
  const hooked = <T extends object>(target: T, connect?: () => Promise<object>): T =>
    new Proxy(target, {
      get(t, key) {
        if (key === 'connect' && connect) return async () => hooked(await connect());
        const value: unknown = Reflect.get(t, key, t);
        if (typeof value !== 'function') return value;
        if (key !== 'query') return value.bind(t);
        return async (...args: unknown[]) => {
          const taken = take(args);
          if (taken && when === 'before') await taken();
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(t, args);
          if (taken && when === 'after') await taken();
          return result;
        };
      },
    });
  return hooked(pool, () => pool.connect());
}
