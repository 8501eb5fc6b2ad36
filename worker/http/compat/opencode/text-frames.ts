// Output bytes as the UTF-8 text frames OpenCode's clients read, with a cursor that stays
// ptybroker's byte offset (docs/protocol.md, "Compatibility: OpenCode", "Text frames").
//
// Two rules make a client's own arithmetic land on byte offsets:
// - A frame never ends inside a UTF-8 character: the 1 to 3 bytes of a character cut at the end
//   of a chunk are held back and open the next frame. The cursor a frame brings a client to is
//   therefore always a character boundary, and a reconnect from it replays the held bytes whole.
// - OpenCode's web terminal adds each text frame's `length` (UTF-16 code units) to its cursor,
//   while the frame carried more bytes than that whenever it held a character beyond ASCII (or a
//   byte that is not UTF-8, read as U+FFFD). Such a frame ends with as many NUL characters as
//   the difference, so that its length equals the bytes it stands for, in the same frame: no drop
//   between two frames can leave the count wrong. A terminal does nothing on NUL; a frame of
//   ASCII alone carries no padding.

const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

/** How many bytes a UTF-8 sequence led by `byte` has, or 0 when `byte` leads none. */
function sequenceLength(byte: number): number {
  if (byte >= 0xc2 && byte <= 0xdf) return 2;
  if (byte >= 0xe0 && byte <= 0xef) return 3;
  if (byte >= 0xf0 && byte <= 0xf4) return 4;
  return 0;
}

/** Where a character left incomplete at the end of `bytes` starts, or `bytes.length` when none is. */
export function completeLength(bytes: Uint8Array): number {
  const end = bytes.byteLength;
  for (let back = 1; back <= 3 && back <= end; back++) {
    const byte = bytes[end - back];
    if (byte >= 0x80 && byte <= 0xbf) continue; // a continuation byte: look further back
    const need = sequenceLength(byte);
    return need > back ? end - back : end;
  }
  return end;
}

/** `text` with NULs added so that its length in UTF-16 code units is `bytes`. */
export function padToBytes(text: string, bytes: number): string {
  return text.length < bytes ? text + "\0".repeat(bytes - text.length) : text;
}

export class TextFramer {
  /** Bytes of a character not yet complete: they start at `cursor`. */
  private held = new Uint8Array(0);

  /** @param cursor the offset below which every byte has been framed (held bytes excluded) */
  constructor(public cursor: number) {}

  /** Bytes held back at the end of what was pushed. */
  get holding(): number {
    return this.held.byteLength;
  }

  /** The text frame for `data`, the output at `offset` (which must be `cursor` + held bytes); "" when it all waits. */
  push(offset: number, data: Uint8Array): string {
    const expected = this.cursor + this.held.byteLength;
    if (offset !== expected) throw new Error(`output at ${offset}, expected ${expected}`);
    let bytes = data;
    if (this.held.byteLength > 0) {
      bytes = new Uint8Array(this.held.byteLength + data.byteLength);
      bytes.set(this.held);
      bytes.set(data, this.held.byteLength);
    }
    const complete = completeLength(bytes);
    this.held = bytes.slice(complete);
    return this.frame(bytes.subarray(0, complete));
  }

  /** Whatever is held, as text (U+FFFD for an incomplete character), when no more output follows it. */
  flush(): string {
    const bytes = this.held;
    this.held = new Uint8Array(0);
    return this.frame(bytes);
  }

  /** Output skips to `offset` (a gap in the log): what is held is told as it is, then framing goes on there. */
  skipTo(offset: number): string {
    const text = this.flush();
    this.cursor = offset;
    return text;
  }

  private frame(bytes: Uint8Array): string {
    if (bytes.byteLength === 0) return "";
    this.cursor += bytes.byteLength;
    return padToBytes(decoder.decode(bytes), bytes.byteLength);
  }
}
