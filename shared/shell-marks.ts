// OSC 133 shell-integration marks (A prompt, B command, C output, D done) found in a PTY's raw
// output, with the raw byte range of each mark (docs/protocol.md §3, "Agents"). Like TextStripper
// (text-stripper.ts), any ESC ends an open sequence, so the two agree on where sequences end.

/** OSC 133: a body (the bytes between `ESC ]` and the terminator) longer than this is not a mark. */
export const MAX_SHELL_MARK_BODY_BYTES = 4096;

// The C0 controls that end or cancel an OSC (the same values as in text-stripper.ts).
const BEL = 0x07;
const CAN = 0x18;
const SUB = 0x1a;
const ESC = 0x1b;

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
