// `expect`: waits for a regular expression (or a literal) in a session's output, searching a
// bounded window of the text an agent reads (docs/protocol.md §3, "Agents"). The text comes from
// TextStripper, so a match's start and end are absolute raw byte offsets (docs/protocol.md §5,
// "Offsets, replay and the switch to live"). The pattern runs on the JavaScript RegExp engine:
// this file is the one place that knows it.
import { type StrippedText, TextStripper } from "./text-stripper.js";

/** `expect`: the most text (UTF-16 units) searched at once. */
export const EXPECT_WINDOW_CHARS = 65536;
/** `expect`: the longest pattern. */
export const MAX_EXPECT_PATTERN_CHARS = 4096;

export interface ExpectMatch {
  match: string;
  groups: (string | null)[];
  start: number;
  end: number;
}

const ALLOWED_FLAGS = "imsu";

/** A string matched as itself: every regex syntax character escaped (only those, so the `u` flag accepts it). */
export function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}

/** Waits for a pattern in a session's output from an offset. */
export class ExpectMatcher {
  /** Returns an error message for a bad pattern/flags (for a 400), or null. */
  static validate(pattern: string, literal: boolean, flags: string): string | null {
    if (pattern.length === 0) return "pattern: must not be empty";
    if (pattern.length > MAX_EXPECT_PATTERN_CHARS) return `pattern: longer than ${MAX_EXPECT_PATTERN_CHARS} characters`;
    for (let i = 0; i < flags.length; i++) {
      const flag = flags[i] as string;
      if (!ALLOWED_FLAGS.includes(flag)) return `flags: "${flag}" is not allowed (only i, m, s and u)`;
      if (flags.indexOf(flag) !== i) return `flags: "${flag}" is repeated`;
    }
    try {
      new RegExp(literal ? escapeRegExp(pattern) : pattern, flags);
    } catch (error) {
      return `pattern: ${error instanceof Error ? error.message : String(error)}`;
    }
    return null;
  }

  private readonly regex: RegExp;
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

  constructor(options: { pattern: string; literal: boolean; flags: string; from: number; windowChars?: number }) {
    const { pattern, literal, flags, from } = options;
    const invalid = ExpectMatcher.validate(pattern, literal, flags);
    if (invalid !== null) throw new Error(invalid);
    const limit = options.windowChars ?? EXPECT_WINDOW_CHARS;
    if (!Number.isInteger(limit) || limit < 2) throw new RangeError("windowChars: an integer of at least 2");
    // Not global: exec always searches the whole window from its start, and finds the first match.
    this.regex = new RegExp(literal ? escapeRegExp(pattern) : pattern, flags);
    this.limit = limit;
    this.from = from;
    this.stripper = new TextStripper(from);
  }

  /** Raw offset up to which output has been fed. */
  get offset(): number {
    return this.stripper.offset;
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
    if (this.found !== null) return this.found;
    const skip = this.offset - offset;
    if (skip < 0) throw new RangeError(`expect: output at ${offset} leaves a hole after ${this.offset}`);
    if (skip < bytes.length) this.append(this.stripper.push(skip > 0 ? bytes.subarray(skip) : bytes));
    if (!this.searched) {
      this.searched = true;
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
    if (cut > 0 && cut < total && (unitAt(cut) & 0xfc00) === 0xdc00) cut++;
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

  /** One exec over the window: linear in the window per push, however long the stream. */
  private search(): ExpectMatch | null {
    const result = this.regex.exec(this.text);
    if (result === null) return null;
    const first = result.index;
    const last = first + result[0].length - 1;
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
    return { match: result[0], groups: result.slice(1).map((group) => group ?? null), start, end };
  }
}
