// How a refusal lists what is wrong with an input: the first problems, each cut to a readable
// length, and a count of the rest. An input can carry any number of problems (a body of 1 MiB holds
// a hundred thousand unknown keys): quoting every one answered a refusal as large as the input.

/** Problems listed in one message; the rest are counted ("… and N more"). */
export const MAX_LISTED_PROBLEMS = 10;
/**
 * Characters of one problem's text kept (a key or value it quotes may be long); room for a nested
 * list of problems (a connector's config, listed so itself) to stay whole.
 */
export const MAX_PROBLEM_CHARS = 2000;
/** Names of a list (unknown keys, say) quoted in one problem; the rest are counted. */
const MAX_QUOTED_NAMES = 10;

/** A zod issue as far as a refusal reads it. */
export interface InputIssue {
  path: readonly PropertyKey[];
  message: string;
  code?: string;
  keys?: readonly string[];
}

/** `problems` as one message: `a; b; … and N more`, each cut to MAX_PROBLEM_CHARS. */
export function listProblems(problems: readonly string[]): string {
  const listed = problems.slice(0, MAX_LISTED_PROBLEMS).map((p) => (p.length > MAX_PROBLEM_CHARS ? `${p.slice(0, MAX_PROBLEM_CHARS - 1)}…` : p));
  const rest = problems.length - listed.length;
  return rest > 0 ? `${listed.join('; ')}; and ${rest} more` : listed.join('; ');
}

/** One issue's problem: its message, an unknown-keys issue naming the first keys and counting the rest. */
export function issueProblem(issue: InputIssue): string {
  if (issue.code === 'unrecognized_keys' && issue.keys && issue.keys.length > MAX_QUOTED_NAMES) {
    const named = issue.keys.slice(0, MAX_QUOTED_NAMES).map((k) => JSON.stringify(k.length > 40 ? `${k.slice(0, 39)}…` : k));
    return `Unrecognized keys: ${named.join(', ')} and ${issue.keys.length - MAX_QUOTED_NAMES} more`;
  }
  return issue.message;
}
