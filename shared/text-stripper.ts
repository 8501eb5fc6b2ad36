// A PTY's raw output bytes → the text an agent reads (docs/protocol.md §3, "Agents"), keeping
// track of where each character came from in the raw stream (absolute byte offsets,
// docs/protocol.md §5, "Offsets, replay and the switch to live").
//
// - TextStripper: streaming. UTF-8 decoding (invalid bytes → U+FFFD, as TextDecoder does), escape
//   sequences removed (CSI, OSC, DCS, SOS/PM/APC, ESC + intermediates + final), C0/C1 controls and
//   DEL removed except \t and \n, \r\n read as \n, a lone \r dropped. Every UTF-16 unit of the
//   text carries the raw byte range [start, end) of the character it belongs to.
// - stripTerminal: the same, one-shot (`run`'s output).
// The expect matcher (expect-matcher.ts) searches this text; shell marks (shell-marks.ts) are
// found in the raw bytes.
//
// The escape parser follows the VT500-series state machine that xterm and xterm.js use, reduced to
// what matters for removing sequences: an ESC always ends whatever sequence was open and starts a
// new one, CAN/SUB cancel, C0 controls inside CSI and ESC sequences are executed (so a \n there
// still ends a line). Pure TypeScript: it runs in workerd, Node and browsers.

/** An unterminated OSC/DCS/SOS/PM/APC string longer than this is dropped and output is text again. */
export const MAX_STRING_SEQUENCE_BYTES = 64 * 1024;

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
