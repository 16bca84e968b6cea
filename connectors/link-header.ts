// The `Link` header (RFC 8288): the one parser of provider paging links, used by the github
// connector and the declarative http connector's `link_header` pagination.

/** One link of a `Link` header: its target (resolved against the base, when given) and params. */
export interface ParsedLink {
  url: string;
  /** Relation types, lower-cased (`rel="next last"` gives both). */
  rels: string[];
  /** Every parameter, names lower-cased, first occurrence wins (RFC 8288 §3). */
  params: Record<string, string>;
}

const isWs = (c: string | undefined) => c === ' ' || c === '\t';

/**
 * Parses a `Link` header per RFC 8288: `<URI-Reference>` followed by `; name[=value]` params,
 * values as tokens or quoted-strings (with `\` escapes), links separated by commas — commas and
 * semicolons inside `<…>` or quotes are part of the URL/value. Malformed links are skipped up to
 * the next top-level comma. Relative targets are resolved against `base` when given.
 */
export function parseLinkHeader(header: string | null | undefined, base?: string): ParsedLink[] {
  const links: ParsedLink[] = [];
  if (!header) return links;
  const s = header;
  let i = 0;

  /** Skips to just after the next top-level comma (error recovery). */
  const skipLink = () => {
    let quoted = false;
    let bracketed = false;
    for (; i < s.length; i++) {
      const c = s[i];
      if (quoted) {
        if (c === '\\') i++;
        else if (c === '"') quoted = false;
      } else if (bracketed) {
        if (c === '>') bracketed = false;
      } else if (c === '"') quoted = true;
      else if (c === '<') bracketed = true;
      else if (c === ',') {
        i++;
        return;
      }
    }
  };

  while (i < s.length) {
    while (i < s.length && (isWs(s[i]) || s[i] === ',')) i++;
    if (i >= s.length) break;
    if (s[i] !== '<') {
      skipLink();
      continue;
    }
    const end = s.indexOf('>', i + 1);
    if (end < 0) break;
    const target = s.slice(i + 1, end).trim();
    i = end + 1;
    const params: Record<string, string> = {};
    let ok = true;
    for (;;) {
      while (isWs(s[i])) i++;
      if (i >= s.length || s[i] === ',') break;
      if (s[i] !== ';') {
        ok = false;
        break;
      }
      i++;
      while (isWs(s[i])) i++;
      let name = '';
      while (i < s.length && !isWs(s[i]) && s[i] !== '=' && s[i] !== ';' && s[i] !== ',') name += s[i++];
      while (isWs(s[i])) i++;
      let value = '';
      if (s[i] === '=') {
        i++;
        while (isWs(s[i])) i++;
        if (s[i] === '"') {
          i++;
          let closed = false;
          while (i < s.length) {
            const c = s[i++];
            if (c === '\\' && i < s.length) value += s[i++];
            else if (c === '"') {
              closed = true;
              break;
            } else value += c;
          }
          if (!closed) ok = false;
        } else {
          while (i < s.length && !isWs(s[i]) && s[i] !== ';' && s[i] !== ',') value += s[i++];
        }
      }
      name = name.toLowerCase();
      if (name && !(name in params)) params[name] = value;
      if (!ok) break;
    }
    if (!ok) {
      skipLink();
      continue;
    }
    let url: string;
    try {
      url = base === undefined ? new URL(target).href : new URL(target, base).href;
    } catch {
      continue; // not a usable URL: ignore this link, keep the others
    }
    const rels = (params.rel ?? '').toLowerCase().split(/[ \t]+/).filter(Boolean);
    links.push({ url, rels, params });
  }
  return links;
}

/** The rel="next" target of a `Link` header, or null. */
export function nextLink(header: string | null | undefined, base?: string): string | null {
  return parseLinkHeader(header, base).find((link) => link.rels.includes('next'))?.url ?? null;
}
