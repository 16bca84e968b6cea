// TEMPORAL_ADDRESS may name the frontend by an IPv6 address, in brackets as in a URL
// ([fd00::7]:7233): the client and the worker's native connection both connect to it. Such an
// address used to be refused ("must be host:port"), so an IPv6-only cluster could not name its
// frontend by address.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../lib/config';
import { configError } from './helpers/config';

describe('TEMPORAL_ADDRESS with an IPv6 address', () => {
  it('accepts a bracketed IPv6 address with a port', () => {
    for (const address of ['[::1]:7233', '[fd00::7]:7233', '[2001:db8::a:1]:443', '[::ffff:10.0.0.7]:7233']) {
      expect(configError({ TEMPORAL_ADDRESS: address }), address).toBe('');
      expect(loadConfig({ TEMPORAL_ADDRESS: address }).TEMPORAL_ADDRESS).toBe(address);
    }
  });

  it('refuses one without brackets, without a port, or with a port outside 1-65535, naming the variable', () => {
    for (const address of ['::1:7233', '[::1]', '[::1]:0', '[::1]:72330', '[not-an-ip]:7233']) {
      expect(configError({ TEMPORAL_ADDRESS: address }), address).toMatch(/^Invalid configuration:\n {2}TEMPORAL_ADDRESS: must be host:port/);
    }
  });
});
