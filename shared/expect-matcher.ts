// `expect`: waits for a regular expression (or a literal) in a session's output, searching a
// bounded window of the text an agent reads (docs/protocol.md §3, "Agents"). The text comes from
// TextStripper, so a match's start and end are absolute raw byte offsets (docs/protocol.md §5,
// "Offsets, replay and the switch to live").
//
// Patterns run on RE2 (re2js, pure JavaScript, so the same in workerd, Node and browsers): its
// time is linear in the text searched, times at most the size of the pattern's program, where
// JavaScript's backtracking RegExp can take exponential time on the session object's thread
// (docs/security.md, "Fair share"). This file is the one place that knows the engine.
import { RE2JS, RE2JSSyntaxException } from "re2js";
import { type StrippedText, TextStripper } from "./text-stripper.js";

/** `expect`: the most text (UTF-16 units) searched at once. */
export const EXPECT_WINDOW_CHARS = 65536;
/** `expect`: the longest pattern. */
export const MAX_EXPECT_PATTERN_CHARS = 4096;
/**
 * `expect`: the largest compiled program (RE2 instructions) a pattern may have. A search costs at
 * worst the window times this: about 80 ms for a full window at 64 (docs/security.md, "Fair
 * share"); the prompts, errors and counters agents wait for compile to 5 to 40.
 */
export const MAX_EXPECT_PROGRAM = 64;

/**
 * What the lazy DFA of one pattern may keep between searches (its own accounting, bytes). It
 * grows up to 8 MiB within a search on text made to defeat it; kept, sixteen expects on one
 * session would hold 128 MiB of the edge's memory. Past this it is emptied after the search.
 */
const KEPT_DFA_BYTES = 256 << 10;
/**
 * Patterns whose program is surely larger than this are refused before compiling: RE2 expands
 * `x{1000}` into 1000 copies, and a 4 KiB pattern of such repeats compiles for a second into a
 * program of half a million instructions.
 */
const MAX_ESTIMATED_PROGRAM = 16 * MAX_EXPECT_PROGRAM;

const WHY = "expect patterns use RE2 syntax and run in linear time";

const FLAG_BITS: Record<string, number> = { i: RE2JS.CASE_INSENSITIVE, m: RE2JS.MULTILINE, s: RE2JS.DOTALL, u: 0 };

export interface ExpectMatch {
  match: string;
  groups: (string | null)[];
  start: number;
  end: number;
}

/** The first match in a window of text: UTF-16 index, matched text and groups (null: took no part). */
interface Found {
  index: number;
  match: string;
  groups: (string | null)[];
}

type Finder = (text: string) => Found | null;

/** A pattern ready to search: its finder and its program size (1 for a literal found with indexOf). */
interface Compiled {
  find: Finder;
  size: number;
}

/** Waits for a pattern in a session's output from an offset. */
export class ExpectMatcher {
  /** Returns an error message for a bad pattern/flags (for a 400), or null. */
  static validate(pattern: string, literal: boolean, flags: string): string | null {
    const compiled = compile(pattern, literal, flags);
    return typeof compiled === "string" ? compiled : null;
  }

  /** The program size of a valid pattern: what one search costs per unit of window (1 for a plain literal). */
  static programSize(pattern: string, literal: boolean, flags: string): number {
    const compiled = compile(pattern, literal, flags);
    if (typeof compiled === "string") throw new Error(compiled);
    return compiled.size;
  }

  private readonly find: Finder;
  private readonly size: number;
  private readonly limit: number;
  private readonly stripper: TextStripper;
  private readonly from: number;

  // The window: the newest `limit` UTF-16 units of text, with their raw ranges. The arrays grow
  // (by doubling) up to `limit` units, so a short wait does not pay for the whole window.
  private text = "";
  private starts = new Float64Array(0);
  private ends = new Float64Array(0);
  /** Whether the window has been searched since it last changed. */
  private searched = false;
  private found: ExpectMatch | null = null;
  private lastCost = 0;

  constructor(options: { pattern: string; literal: boolean; flags: string; from: number; windowChars?: number }) {
    const { pattern, literal, flags, from } = options;
    const compiled = compile(pattern, literal, flags);
    if (typeof compiled === "string") throw new Error(compiled);
    const limit = options.windowChars ?? EXPECT_WINDOW_CHARS;
    if (!Number.isInteger(limit) || limit < 2) throw new RangeError("windowChars: an integer of at least 2");
    this.find = compiled.find;
    this.size = compiled.size;
    this.limit = limit;
    this.from = from;
    this.stripper = new TextStripper(from);
  }

  /** Raw offset up to which output has been fed. */
  get offset(): number {
    return this.stripper.offset;
  }

  /**
   * What the last push's search could cost at worst: the window's UTF-16 units times the
   * pattern's program size (RE2's time is linear in both); 0 when it searched nothing.
   */
  get searchCost(): number {
    return this.lastCost;
  }

  /** UTF-16 units of text kept (never more than `windowChars`; for tests). */
  get windowLength(): number {
    return this.text.length;
  }

  /**
   * Feeds raw output bytes starting at `offset`. Bytes before the matcher's current offset are
   * skipped (overlap is allowed: offset < this.offset trims the front); a hole (offset > this.offset) throws.
   * Returns the first match in the stream so far, or null. `start`/`end` are raw byte offsets: where the first
   * matched character's first byte is, and just after the last matched character's last byte.
   *
   * The match is the first one in the window as it stood after the push that first matched: a
   * greedy pattern matches what had arrived by then. Once it matched, the matcher is done: every
   * later push returns the same match and feeds nothing.
   */
  push(offset: number, bytes: Uint8Array): ExpectMatch | null {
    this.lastCost = 0;
    if (this.found !== null) return this.found;
    const skip = this.offset - offset;
    if (skip < 0) throw new RangeError(`expect: output at ${offset} leaves a hole after ${this.offset}`);
    if (skip < bytes.length) this.append(this.stripper.push(skip > 0 ? bytes.subarray(skip) : bytes));
    if (!this.searched) {
      this.searched = true;
      this.lastCost = this.text.length * this.size;
      this.found = this.search();
    }
    return this.found;
  }

  /** Adds text to the window, dropping the oldest beyond the limit. */
  private append({ text, starts, ends }: StrippedText): void {
    if (text.length === 0) return;
    this.searched = false;
    const oldLength = this.text.length;
    const total = oldLength + text.length;
    // Units to drop from the front of old + new; never half a surrogate pair.
    let cut = Math.max(0, total - this.limit);
    const unitAt = (i: number) => (i < oldLength ? this.text.charCodeAt(i) : text.charCodeAt(i - oldLength));
    if (cut > 0 && cut < total && isLowSurrogate(unitAt(cut))) cut++;
    const keptOld = Math.max(0, oldLength - cut);
    const newFrom = Math.max(0, cut - oldLength);
    const length = total - cut;

    let nextStarts = this.starts;
    let nextEnds = this.ends;
    if (length > nextStarts.length) {
      const capacity = Math.min(this.limit, Math.max(length, 2 * nextStarts.length, 1024));
      nextStarts = new Float64Array(capacity);
      nextEnds = new Float64Array(capacity);
      nextStarts.set(this.starts.subarray(cut, oldLength));
      nextEnds.set(this.ends.subarray(cut, oldLength));
    } else if (keptOld > 0 && cut > 0) {
      nextStarts.copyWithin(0, cut, oldLength);
      nextEnds.copyWithin(0, cut, oldLength);
    }
    nextStarts.set(starts.subarray(newFrom), keptOld);
    nextEnds.set(ends.subarray(newFrom), keptOld);
    this.starts = nextStarts;
    this.ends = nextEnds;
    this.text = (keptOld > 0 ? this.text.slice(cut) : "") + (newFrom > 0 ? text.slice(newFrom) : text);
  }

  /** One search of the window: linear in the window per push, however long the stream. */
  private search(): ExpectMatch | null {
    const result = this.find(this.text);
    if (result === null) return null;
    const first = result.index;
    const last = first + result.match.length - 1;
    let start: number;
    let end: number;
    if (last >= first) {
      start = this.starts[first] as number;
      end = this.ends[last] as number;
    } else {
      // An empty match sits before the character at its index (or after the last one).
      const length = this.text.length;
      start = end = first < length ? (this.starts[first] as number) : length > 0 ? (this.ends[length - 1] as number) : this.from;
    }
    return { match: result.match, groups: result.groups, start, end };
  }
}

// ─── The engine ───────────────────────────────────────────────────────────────────────────────

/** The search for a pattern, or the reason it is refused (`pattern: ...`, `flags: ...`). */
function compile(pattern: string, literal: boolean, flags: string): Compiled | string {
  if (pattern.length === 0) return "pattern: must not be empty";
  if (pattern.length > MAX_EXPECT_PATTERN_CHARS) return `pattern: longer than ${MAX_EXPECT_PATTERN_CHARS} characters`;
  let bits = 0;
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i] as string;
    const bit = FLAG_BITS[flag];
    if (bit === undefined) return `flags: "${flag}" is not allowed (only i, m, s and u)`;
    if (flags.indexOf(flag) !== i) return `flags: "${flag}" is repeated`;
    bits |= bit;
  }
  // A literal is found with indexOf, not the engine: only a case-insensitive one needs folding.
  if (literal && (bits & RE2JS.CASE_INSENSITIVE) === 0) return { find: (text) => findLiteral(text, pattern), size: 1 };
  const source = literal ? RE2JS.quote(pattern) : pattern;
  if (estimatedProgram(source) > MAX_ESTIMATED_PROGRAM) return tooLarge(`more than ${MAX_ESTIMATED_PROGRAM}`);
  let re: RE2JS;
  try {
    re = RE2JS.compile(source, bits);
  } catch (error) {
    return refusal(error);
  }
  const size = re.programSize();
  if (size > MAX_EXPECT_PROGRAM) return tooLarge(String(size));
  return { find: (text) => findPattern(re, text), size };
}

/** The first occurrence of a literal that does not split a surrogate pair (as RE2 never would). */
function findLiteral(text: string, literal: string): Found | null {
  for (let at = text.indexOf(literal); at >= 0; at = text.indexOf(literal, at + 1)) {
    const after = at + literal.length;
    const splitsFirst = at > 0 && isLowSurrogate(text.charCodeAt(at)) && isHighSurrogate(text.charCodeAt(at - 1));
    const splitsLast = after < text.length && isLowSurrogate(text.charCodeAt(after)) && isHighSurrogate(text.charCodeAt(after - 1));
    if (!splitsFirst && !splitsLast) return { index: at, match: literal, groups: [] };
  }
  return null;
}

/**
 * Whether the pattern occurs at all, on RE2's DFA (no groups: its fastest path, about a
 * millisecond for a full window), then, once it does, where and with which groups (the NFA: up
 * to the window times the program). A matcher is done once it matched, so the second step runs
 * once per matcher and each push pays for the first only.
 */
function findPattern(re: RE2JS, text: string): Found | null {
  const occurs = re.test(text);
  const result = occurs ? (re.exec(text) as RegExpExecArray | null) : null;
  const dfa = re.re2().lazyDFA;
  if (dfa !== null && dfa.stateBudget - dfa.memBudget > KEPT_DFA_BYTES) dfa.clearCache();
  if (result === null) return null;
  return { index: result.index, match: result[0], groups: result.slice(1).map((group) => group ?? null) };
}

function tooLarge(size: string): string {
  return (
    `pattern: too large: it compiles to ${size} RE2 instructions, at most ${MAX_EXPECT_PROGRAM} ` +
    "(a search costs the text times the pattern's size; counted repeats such as x{100} count each copy)"
  );
}

/** What re2js refused, said as a reason: what is not supported, or the syntax error and where. */
function refusal(error: unknown): string {
  if (!(error instanceof RE2JSSyntaxException)) return `pattern: ${error instanceof Error ? error.message : String(error)}`;
  const what = error.getDescription();
  const where = error.getPattern() ?? "";
  if (what === "invalid escape sequence" && /^\\[1-9]/.test(where)) return `pattern: backreferences (${where}) are not supported: ${WHY}`;
  if (what === "invalid escape sequence" && where === "\\k") return `pattern: backreferences (\\k<name>) are not supported: ${WHY}`;
  if (where === "(?=" || where === "(?!") return `pattern: lookahead (${where}) is not supported: ${WHY}`;
  if (where.startsWith("(?<=") || where.startsWith("(?<!")) return `pattern: lookbehind (${where.slice(0, 4)}) is not supported: ${WHY}`;
  if (where === "\\u") return "pattern: \\u escapes are not RE2 syntax: write \\x{HHHH} (e.g. \\x{e9} for é)";
  if (what === "invalid repeat count") return `pattern: invalid repeat count ${where}: counts are at most 1000, nested ones too, and min <= max`;
  return `pattern: ${what}: \`${where}\` (expect patterns use RE2 syntax)`;
}

/**
 * An upper bound of the instructions a pattern compiles to, read from its text: each atom one,
 * a group its contents and two, `|`, `*`, `+` and `?` one, a counted repeat `{n,m}` m copies of
 * its atom and m more. Counts over 1000 are left to RE2, which refuses them before expanding.
 */
function estimatedProgram(source: string): number {
  const outer: { total: number; last: number }[] = [];
  let group = { total: 0, last: 0 };
  const atom = (size: number) => {
    group.total += size;
    group.last = size;
  };
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    if (c === "\\") {
      const next = source[i + 1];
      if (next === "Q") {
        const stop = source.indexOf("\\E", i + 2);
        const end = stop < 0 ? source.length : stop;
        group.total += end - (i + 2);
        group.last = 1;
        i = stop < 0 ? end : end + 2;
        continue;
      }
      const braced = (next === "p" || next === "P" || next === "x") && source[i + 2] === "{";
      const close = braced ? source.indexOf("}", i) : -1;
      i = braced ? (close < 0 ? source.length : close + 1) : i + 2;
      atom(1);
    } else if (c === "[") {
      i = classEnd(source, i);
      atom(1);
    } else if (c === "(") {
      outer.push(group);
      group = { total: 0, last: 0 };
      i++;
    } else if (c === ")") {
      const size = group.total + 2;
      group = outer.pop() ?? { total: 0, last: 0 };
      atom(size);
      i++;
    } else if (c === "|" || c === "*" || c === "+" || c === "?") {
      group.total += 1;
      if (c === "|") group.last = 0;
      i++;
    } else {
      const repeat = c === "{" ? /^\{(\d{1,4})(,(\d{0,4}))?\}/.exec(source.slice(i, i + 11)) : null;
      if (repeat === null) {
        atom(1);
        i++;
        continue;
      }
      const min = Number(repeat[1]);
      const max = repeat[2] === undefined ? min : repeat[3] === "" ? min + 1 : Number(repeat[3]);
      const copies = max > 1000 || min > max ? 1 : max; // RE2 refuses these itself, before expanding
      group.total += group.last * (copies - 1) + copies;
      group.last *= copies;
      i += repeat[0].length;
    }
  }
  while (outer.length > 0) {
    const size = group.total + 2;
    group = outer.pop() as { total: number; last: number };
    group.total += size;
  }
  return group.total;
}

/** Just after the character class that starts at `open` (`[`): `]` first is a member, `[:alpha:]` too. */
function classEnd(source: string, open: number): number {
  let i = open + 1;
  if (source[i] === "^") i++;
  if (source[i] === "]") i++;
  while (i < source.length && source[i] !== "]") {
    if (source[i] === "\\") i += 2;
    else if (source.startsWith("[:", i)) {
      const close = source.indexOf(":]", i + 2);
      i = close < 0 ? i + 1 : close + 2;
    } else i++;
  }
  return i + 1;
}

function isHighSurrogate(unit: number): boolean {
  return (unit & 0xfc00) === 0xd800;
}

function isLowSurrogate(unit: number): boolean {
  return (unit & 0xfc00) === 0xdc00;
}
