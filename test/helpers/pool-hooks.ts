// A pool that runs a test's hook once around one statement: for making another session's change
// fall exactly between two statements of the code under test.
import type { Pool } from '../../db/pool';

/**
 * `pool`, running `hook` once, `when` the first statement (`pool.query` text) that `matches`
 * runs: before it is sent, or after it answered (then the statement's result is returned after
 * the hook). A string matches as a part of the text, a RegExp as it tests.
 */
export function poolWithHook(pool: Pool, when: 'before' | 'after', matches: string | RegExp, hook: () => Promise<unknown>): Pool {
  let pending: (() => Promise<unknown>) | null = hook;
  const take = (args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : '';
    if (!pending || !(typeof matches === 'string' ? text.includes(matches) : matches.test(text))) return null;
    const taken = pending;
    pending = null;
    return taken;
  };
  return new Proxy(pool, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      if (key !== 'query') return value.bind(target);
      return async (...args: unknown[]) => {
        const taken = take(args);
        if (taken && when === 'before') await taken();
        const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (taken && when === 'after') await taken();
        return result;
      };
    },
  });
}
