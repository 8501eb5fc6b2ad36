// A PTY's raw output bytes → the text an agent reads (DESIGN §10), keeping track of where each
// character came from in the raw stream (absolute byte offsets, DESIGN §2).
//
// - TextStripper: streaming. UTF-8 decoding (invalid bytes → U+FFFD, as TextDecoder does), escape
//   sequences removed (CSI, OSC, DCS, SOS/PM/APC, ESC + intermediates + final), C0/C1 controls and
//   DEL removed except \t and \n, \r\n read as \n, a lone \r dropped. Every UTF-16 unit of the
//   text carries the raw byte range [start, end) of the character it belongs to.
// - stripTerminal: the same, one-shot (`run`'s output).
// - ExpectMatcher: a regular expression (or a literal) over a bounded window of that text.
// - ShellMarkScanner: OSC 133 shell-integration marks (A prompt, B command, C output, D done).
//
// The escape parser follows the VT500-series state machine that xterm and xterm.js use, reduced to
// what matters for removing sequences: an ESC always ends whatever sequence was open and starts a
// new one, CAN/SUB cancel, C0 controls inside CSI and ESC sequences are executed (so a \n there
// still ends a line). Pure TypeScript: it runs in workerd, Node and browsers.

/** An unterminated OSC/DCS/SOS/PM/APC string longer than this is dropped and output is text again. */
export const MAX_STRING_SEQUENCE_BYTES = 64 * 1024;
/** `expect`: the most text (UTF-16 units) searched at once. */
export const EXPECT_WINDOW_CHARS = 65536;
/** `expect`: the longest pattern. */
export const MAX_EXPECT_PATTERN_CHARS = 4096;
/** OSC 133: a body (the bytes between `ESC ]` and the terminator) longer than this is not a mark. */
export const MAX_SHELL_MARK_BODY_BYTES = 4096;

const BEL = 0x07;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const CAN = 0x18;
const SUB = 0x1a;
const ESC = 0x1b;
const DEL = 0x7f;
const REPLACEMENT = 0xfffd;

/** Text a push completed; starts[i]/ends[i] are the raw byte range of the character text[i] belongs to. */
export interface StrippedText {
  text: string;
  starts: Float64Array;
  ends: Float64Array;
}

// ─── Output buffer ───────────────────────────────────────────────────────────────────────────

/** Collects the text of one push as UTF-16 units with their raw ranges. */
class TextOutput {
  private readonly units: Uint16Array;
  private readonly starts: Float64Array;
  private readonly ends: Float64Array;
  private length = 0;

  /** `capacity` UTF-16 units: a push of n bytes completes at most n + 1 (see TextStripper.push). */
  constructor(capacity: number) {
    this.units = new Uint16Array(capacity);
    this.starts = new Float64Array(capacity);
    this.ends = new Float64Array(capacity);
  }

  char(codePoint: number, start: number, end: number): void {
    if (codePoint >= 0x10000) {
      // Both halves of a surrogate pair point at the whole 4-byte character.
      const c = codePoint - 0x10000;
      this.unit(0xd800 | (c >> 10), start, end);
      this.unit(0xdc00 | (c & 0x3ff), start, end);
    } else this.unit(codePoint, start, end);
  }

  /** bytes[from..to), all printable ASCII: one unit each, at raw offset base + index. */
  ascii(bytes: Uint8Array, from: number, to: number, base: number): void {
    const { units, starts, ends } = this;
    let j = this.length;
    for (let i = from; i < to; i++, j++) {
      units[j] = bytes[i] as number;
      starts[j] = base + i;
      ends[j] = base + i + 1;
    }
    this.length = j;
  }

  private unit(unit: number, start: number, end: number): void {
    const i = this.length++;
    this.units[i] = unit;
    this.starts[i] = start;
    this.ends[i] = end;
  }

  result(): StrippedText {
    const n = this.length;
    // Views, not copies: the arrays were sized for this push (at most two units more than its bytes).
    return { text: unitsToString(this.units, n), starts: this.starts.subarray(0, n), ends: this.ends.subarray(0, n) };
  }
}

function unitsToString(units: Uint16Array, length: number): string {
  let text = "";
  // In slices, as arguments: one call per 8 Ki units stays far below the engines' argument limits, and
  // apply takes a typed array as it is (a spread would iterate it, about 8 times slower).
  for (let i = 0; i < length; i += 8192) {
    text += String.fromCharCode.apply(null, units.subarray(i, Math.min(length, i + 8192)) as unknown as number[]);
  }
  return text;
}

// ─── TextStripper ────────────────────────────────────────────────────────────────────────────

// Escape parser states.
const GROUND = 0;
/** After ESC, and after ESC + intermediates (0x20–0x2F): waiting for the final byte. */
const ESCAPE = 1;
const ESCAPE_INTERMEDIATE = 2;
/** After ESC [: parameters and intermediates (0x20–0x3F) until a final byte (0x40–0x7E). */
const CSI = 3;
/** Inside an OSC/DCS/SOS/PM/APC string: everything is dropped until its terminator. */
const STRING = 4;

/**
 * Streaming: raw output → plain text. Chunks may split anywhere (inside an escape sequence, a
 * UTF-8 character, or a \r\n); the text is the same however the stream is split.
 */
export class TextStripper {
  private rawOffset: number;

  // UTF-8 decoder (the WHATWG algorithm, so the text equals TextDecoder's for the same bytes).
  private utf8Needed = 0;
  private utf8Seen = 0;
  private utf8CodePoint = 0;
  private utf8Lower = 0x80;
  private utf8Upper = 0xbf;
  /** Raw offset of the lead byte of the character being decoded. */
  private utf8Start = 0;

  // Escape parser.
  private state = GROUND;
  /** In STRING: whether BEL ends it (OSC only; DCS, SOS, PM and APC need ESC \). */
  private stringEndsOnBel = false;
  /** In STRING: body bytes so far, to abandon an unterminated one. */
  private stringBytes = 0;
  /** Raw offset of a \r executed just before the current character, or -1. */
  private crStart = -1;

  constructor(startOffset: number) {
    this.rawOffset = startOffset;
  }

  /** Raw offset up to which bytes have been fed. */
  get offset(): number {
    return this.rawOffset;
  }

  /**
   * Feeds the next raw bytes (they start at `this.offset`). Returns the text they completed, and for
   * each UTF-16 code unit text[i]: starts[i] = raw offset of the first byte of the character it belongs to,
   * ends[i] = raw offset just after that character's last byte (for "\n" made from "\r\n", the \r's offset and the offset after the \n).
   * A character still incomplete at the end of `bytes` comes out with the push that completes it.
   */
  push(bytes: Uint8Array): StrippedText {
    // Each byte completes at most one character, except that the first byte can also end a
    // 4-byte character begun in the previous push (2 units) or turn its lead into U+FFFD.
    const out = new TextOutput(bytes.length + 2);
    const base = this.rawOffset;
    let i = 0;
    while (i < bytes.length) {
      if (this.state === GROUND && this.utf8Needed === 0) {
        // Fast path for the bulk of most output: a run of printable ASCII in plain text.
        const end = printableRunEnd(bytes, i);
        if (end > i) {
          out.ascii(bytes, i, end, base);
          this.crStart = -1;
          i = end;
          continue;
        }
      }
      this.decodeByte(bytes[i] as number, base + i, out);
      i++;
    }
    this.rawOffset = base + bytes.length;
    return out.result();
  }

  /**
   * Ends the stream for now: a UTF-8 character left incomplete comes out as U+FFFD (as TextDecoder
   * does at the end). An unterminated escape sequence stays open: it produces no text either way.
   */
  flush(): StrippedText {
    const out = new TextOutput(1);
    if (this.utf8Needed > 0) this.invalidSequence(out);
    return out.result();
  }

  /** One byte into the UTF-8 decoder; complete characters go on to the escape parser. */
  private decodeByte(byte: number, at: number, out: TextOutput): void {
    if (this.utf8Needed === 0) {
      if (byte < 0x80) return this.character(byte, at, at + 1, out);
      this.utf8Start = at;
      if (byte >= 0xc2 && byte <= 0xdf) {
        this.utf8Needed = 1;
        this.utf8CodePoint = byte & 0x1f;
      } else if (byte >= 0xe0 && byte <= 0xef) {
        // No overlong forms (E0 80–9F) and no surrogates (ED A0–BF).
        if (byte === 0xe0) this.utf8Lower = 0xa0;
        if (byte === 0xed) this.utf8Upper = 0x9f;
        this.utf8Needed = 2;
        this.utf8CodePoint = byte & 0x0f;
      } else if (byte >= 0xf0 && byte <= 0xf4) {
        // No overlong forms (F0 80–8F) and nothing above U+10FFFF (F4 90–BF).
        if (byte === 0xf0) this.utf8Lower = 0x90;
        if (byte === 0xf4) this.utf8Upper = 0x8f;
        this.utf8Needed = 3;
        this.utf8CodePoint = byte & 0x07;
      } else this.character(REPLACEMENT, at, at + 1, out); // a byte that never starts a character
      return;
    }
    if (byte < this.utf8Lower || byte > this.utf8Upper) {
      // The sequence so far is one U+FFFD; the byte that broke it is read afresh.
      this.invalidSequence(out);
      return this.decodeByte(byte, at, out);
    }
    this.utf8Lower = 0x80;
    this.utf8Upper = 0xbf;
    this.utf8CodePoint = (this.utf8CodePoint << 6) | (byte & 0x3f);
    if (++this.utf8Seen === this.utf8Needed) {
      const codePoint = this.utf8CodePoint;
      this.resetDecoder();
      this.character(codePoint, this.utf8Start, at + 1, out);
    }
  }

  /** The bytes of an unfinished UTF-8 sequence become one U+FFFD covering them. */
  private invalidSequence(out: TextOutput): void {
    const end = this.utf8Start + 1 + this.utf8Seen;
    this.resetDecoder();
    this.character(REPLACEMENT, this.utf8Start, end, out);
  }

  private resetDecoder(): void {
    this.utf8Needed = 0;
    this.utf8Seen = 0;
    this.utf8CodePoint = 0;
    this.utf8Lower = 0x80;
    this.utf8Upper = 0xbf;
  }

  /** One decoded character through the escape parser. */
  private character(c: number, start: number, end: number, out: TextOutput): void {
    // A \r counts for the \r\n rule only when the very next character is the \n.
    const crStart = this.crStart;
    this.crStart = -1;
    switch (this.state) {
      case GROUND:
        return this.ground(c, start, end, crStart, out);
      case ESCAPE:
      case ESCAPE_INTERMEDIATE:
        // ESC's final byte is 0x30–0x7E; `[`, `]`, `P`, `X`, `^`, `_` right after ESC open longer sequences.
        if (this.state === ESCAPE && this.opensSequence(c)) return;
        return this.sequence(c, start, end, crStart, out, 0x2f);
      case CSI:
        return this.sequence(c, start, end, crStart, out, 0x3f);
      default:
        return this.string(c, start, end, crStart, out);
    }
  }

  private ground(c: number, start: number, end: number, crStart: number, out: TextOutput): void {
    if (c === ESC) this.state = ESCAPE;
    else if (isControl(c)) this.control(c, start, end, crStart, out);
    else out.char(c, start, end);
  }

  /** A control character executed: \t and \n are text, a \r is remembered for \r\n, the rest is dropped. */
  private control(c: number, start: number, end: number, crStart: number, out: TextOutput): void {
    if (c === TAB) out.char(c, start, end);
    else if (c === LF) out.char(c, crStart >= 0 ? crStart : start, end);
    else if (c === CR) this.crStart = start;
  }

  /** Right after ESC: does `c` open a CSI or a string? */
  private opensSequence(c: number): boolean {
    if (c === 0x5b /* [ */) this.state = CSI;
    else if (c === 0x5d /* ] */) this.openString(true);
    else if (c === 0x50 /* P */ || c === 0x58 /* X */ || c === 0x5e /* ^ */ || c === 0x5f /* _ */) this.openString(false);
    else return false;
    return true;
  }

  private openString(endsOnBel: boolean): void {
    this.state = STRING;
    this.stringEndsOnBel = endsOnBel;
    this.stringBytes = 0;
  }

  /**
   * Inside an ESC or CSI sequence: bytes 0x20..`lastMiddle` continue it, the next ones up to 0x7E end
   * it. C0 controls are executed on the way, as terminals do; anything else (a non-ASCII character)
   * cancels the sequence and is read as text, so a broken sequence never eats real output.
   */
  private sequence(c: number, start: number, end: number, crStart: number, out: TextOutput, lastMiddle: number): void {
    if (c === ESC) this.state = ESCAPE;
    else if (c === CAN || c === SUB) this.state = GROUND;
    else if (c < 0x20) this.control(c, start, end, crStart, out);
    else if (c <= lastMiddle) {
      if (this.state === ESCAPE) this.state = ESCAPE_INTERMEDIATE;
    } else if (c < DEL) this.state = GROUND;
    else if (c > DEL) {
      this.state = GROUND;
      this.ground(c, start, end, crStart, out);
    } // DEL is ignored inside a sequence
  }

  /** Inside an OSC/DCS/SOS/PM/APC string: dropped up to BEL (OSC) or ESC \, or abandoned when too long. */
  private string(c: number, start: number, end: number, crStart: number, out: TextOutput): void {
    // Any ESC ends the string; ESC \ (ST) is then an ordinary two-byte escape, dropped too.
    if (c === ESC) this.state = ESCAPE;
    else if (c === CAN || c === SUB || (c === BEL && this.stringEndsOnBel)) this.state = GROUND;
    else if ((this.stringBytes += end - start) > MAX_STRING_SEQUENCE_BYTES) {
      // Never terminated (a stray ESC ] in binary output, say): give the output back as text.
      this.state = GROUND;
      this.ground(c, start, end, crStart, out);
    }
  }
}

/** Index after the run of printable ASCII (0x20–0x7E) that starts at `from`. */
function printableRunEnd(bytes: Uint8Array, from: number): number {
  let i = from;
  while (i < bytes.length) {
    const b = bytes[i] as number;
    if (b < 0x20 || b >= DEL) break;
    i++;
  }
  return i;
}

/** C0 controls, DEL and C1 controls (U+0080–U+009F, as characters: the input is UTF-8). */
function isControl(c: number): boolean {
  return c < 0x20 || (c >= DEL && c <= 0x9f);
}

/** One-shot: raw bytes → clean text (used for `run`'s output). Same rules as TextStripper. */
export function stripTerminal(bytes: Uint8Array): string {
  const stripper = new TextStripper(0);
  return stripper.push(bytes).text + stripper.flush().text;
}

// ─── ExpectMatcher ───────────────────────────────────────────────────────────────────────────

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

// ─── ShellMarkScanner ────────────────────────────────────────────────────────────────────────

/** OSC 133 shell-integration marks (FinalTerm/VS Code/kitty): ESC ] 133 ; <A|B|C|D>[;params] (BEL | ESC \) */
export interface ShellMark {
  kind: "A" | "B" | "C" | "D";
  /** D's exit code (`133;D;2` → 2), null when absent or not an integer; always null for A/B/C */
  exitCode: number | null;
  /** everything after the kind letter and its `;` (e.g. "2" for D;2, "" when none) */
  params: string;
  /** raw offsets of the whole escape sequence: [start, end) */
  start: number;
  end: number;
}

// Scanner states.
const IDLE = 0;
/** After ESC. */
const MARK_ESCAPE = 1;
/** After ESC ]: collecting the body while it can still be `133;<kind>…`. */
const MARK_BODY = 2;
/** After an ESC inside the body: `\` ends the mark, anything else starts another escape. */
const MARK_BODY_ESCAPE = 3;

const MARK_PREFIX = [0x31, 0x33, 0x33, 0x3b]; // "133;"
// shared/ compiles without the DOM library; TextDecoder is in every runtime this code runs in.
declare const TextDecoder: new () => { decode(bytes: Uint8Array): string };
const utf8Decoder = new TextDecoder();

/**
 * Finds OSC 133 marks in raw output, split across pushes anywhere. Other OSCs end the search as
 * soon as their number differs, and as in TextStripper any ESC ends an open sequence, so between
 * sequences only ESC bytes need looking at.
 */
export class ShellMarkScanner {
  private rawOffset: number;
  private state = IDLE;
  /** Raw offset of the ESC that began the current sequence, and of an ESC seen inside a body. */
  private escStart = 0;
  private bodyEscStart = 0;
  /** Body bytes kept (C0 controls inside an OSC are ignored, as terminals do) and seen. */
  private readonly body = new Uint8Array(MAX_SHELL_MARK_BODY_BYTES);
  private bodyLength = 0;
  private bodySeen = 0;

  constructor(startOffset: number) {
    this.rawOffset = startOffset;
  }

  /** Raw offset up to which bytes have been fed. */
  get offset(): number {
    return this.rawOffset;
  }

  /** Feeds raw bytes starting at `offset` (must equal the end of the previous push; throw otherwise). Returns the marks completed in them, in order. */
  push(offset: number, bytes: Uint8Array): ShellMark[] {
    if (offset !== this.rawOffset) throw new RangeError(`shell marks: output at ${offset}, expected ${this.rawOffset}`);
    const marks: ShellMark[] = [];
    let i = 0;
    while (i < bytes.length) {
      if (this.state === IDLE) {
        const esc = bytes.indexOf(ESC, i);
        if (esc < 0) break;
        this.escStart = offset + esc;
        this.state = MARK_ESCAPE;
        i = esc + 1;
        continue;
      }
      const mark = this.byte(bytes[i] as number, offset + i);
      if (mark === undefined) continue; // the byte is read again in the new state
      if (mark !== null) marks.push(mark);
      i++;
    }
    this.rawOffset = offset + bytes.length;
    return marks;
  }

  /** One byte outside IDLE. Returns a completed mark, null, or undefined to read the byte again. */
  private byte(b: number, at: number): ShellMark | null | undefined {
    switch (this.state) {
      case MARK_ESCAPE:
        if (b === 0x5d /* ] */) {
          this.state = MARK_BODY;
          this.bodyLength = 0;
          this.bodySeen = 0;
        } else if (b === ESC) this.escStart = at;
        else this.state = IDLE;
        return null;
      case MARK_BODY_ESCAPE:
        if (b === 0x5c /* \ */) return this.complete(at + 1);
        // The ESC ended the OSC unterminated, and began a new sequence.
        this.escStart = this.bodyEscStart;
        this.state = MARK_ESCAPE;
        return undefined;
      default:
        return this.bodyByte(b, at);
    }
  }

  private bodyByte(b: number, at: number): ShellMark | null {
    if (b === BEL) return this.complete(at + 1);
    if (b === ESC) {
      this.state = MARK_BODY_ESCAPE;
      this.bodyEscStart = at;
    } else if (b === CAN || b === SUB || ++this.bodySeen > MAX_SHELL_MARK_BODY_BYTES) this.state = IDLE;
    else if (b >= 0x20) {
      const i = this.bodyLength++;
      this.body[i] = b;
      // Leave as soon as it cannot be `133;[ABCD]`: other OSCs (titles, 1337…) are not ours.
      if (i < MARK_PREFIX.length ? b !== MARK_PREFIX[i] : i === 4 ? b < 0x41 || b > 0x44 : i === 5 && b !== 0x3b) {
        this.state = IDLE;
      }
    }
    return null;
  }

  /** The terminator arrived: the body is a mark if it is `133;X` or `133;X;params`. */
  private complete(end: number): ShellMark | null {
    this.state = IDLE;
    const body = this.body;
    const length = this.bodyLength;
    if (length < 5 || (length > 5 && body[5] !== 0x3b)) return null;
    const kind = String.fromCharCode(body[4] as number) as ShellMark["kind"];
    const params = length > 6 ? utf8Decoder.decode(body.subarray(6, length)) : "";
    return { kind, exitCode: kind === "D" ? parseExitCode(params) : null, params, start: this.escStart, end };
  }
}

/** The first `;`-separated field of D's params as an integer (`2`, or `2;aid=…` as some shells send), else null. */
function parseExitCode(params: string): number | null {
  const field = params.split(";", 1)[0] as string;
  if (!/^-?\d{1,10}$/.test(field)) return null;
  return Number(field);
}
