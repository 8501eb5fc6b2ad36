// Gathers node-pty's ~1 KiB data events into larger chunks (up to `maxBytes`, or whatever
// arrived within `delayMs`), numbers them by absolute offset, and cuts only on UTF-8
// character boundaries. A process without a terminal has two streams: a chunk never mixes
// them (a push of the other stream emits what is pending first), and each stream is cut on its
// own character boundaries (an unfinished character waits for its stream's next bytes).
import type { OutputStream } from "../../shared/protocol.js";
import { completeUtf8Length } from "../../shared/utf8.js";

export interface CoalescerOptions {
  maxBytes: number;
  delayMs: number;
  /**
   * Emit a push at once when nothing is pending, for up to `immediateBytes` per `delayMs`
   * window; past that, gather as usual. A keystroke's echo or a command's short answer is not
   * held back, while a flood is gathered after its first few reads.
   */
  leadingEdge?: boolean;
  /** leadingEdge's budget of bytes sent at once per window. Default 8 KiB. */
  immediateBytes?: number;
}

/** A chunk at `offset` of one stream; `at` is when its first byte arrived (ms since epoch). */
export type ChunkSink = (offset: number, bytes: Buffer, stream: OutputStream, at: number) => void;

export class Coalescer {
  private parts: Buffer[] = [];
  private size = 0;
  private timer: NodeJS.Timeout | undefined;
  /** leadingEdge: start of the current window (performance.now()) and bytes sent at once in it. */
  private windowStart = -Infinity;
  private immediate = 0;
  /** An unfinished UTF-8 sequence already waited one period: the next flush sends it as is. */
  private tailWaited = false;
  /** The stream of what is pending. */
  private stream: OutputStream = "stdout";
  /** When the first pending byte arrived. */
  private firstAt = 0;
  /** An unfinished character of the stream that is not pending now, kept for its next bytes. */
  private readonly held: Record<OutputStream, Buffer | undefined> = { stdout: undefined, stderr: undefined };

  constructor(
    private readonly sink: ChunkSink,
    private readonly options: CoalescerOptions,
    /** Offset of the next byte to emit. */
    public offset = 0,
  ) {}

  get pending(): number {
    return this.size;
  }

  push(chunk: Buffer, stream: OutputStream = "stdout"): void {
    if (chunk.byteLength === 0) return;
    if (stream !== this.stream) this.switchTo(stream);
    if (this.size === 0) this.firstAt = Date.now();
    this.parts.push(chunk);
    this.size += chunk.byteLength;
    this.tailWaited = false;
    if (this.size >= this.options.maxBytes || this.mayEmitAtOnce()) this.flush();
    else this.arm();
  }

  /** leadingEdge: nothing else is pending and this window's budget has room for the push. */
  private mayEmitAtOnce(): boolean {
    if (!this.options.leadingEdge || this.timer || this.parts.length !== 1) return false;
    const now = performance.now();
    if (now - this.windowStart >= this.options.delayMs) {
      this.windowStart = now;
      this.immediate = 0;
    }
    if (this.immediate + this.size > (this.options.immediateBytes ?? 8192)) return false;
    this.immediate += this.size;
    return true;
  }

  /**
   * The other stream writes: what is pending goes out (an unfinished character of it is held
   * for that stream's next bytes), and the other stream's held character, if any, comes first.
   */
  private switchTo(stream: OutputStream): void {
    this.flush();
    this.disarm();
    if (this.size > 0) this.held[this.stream] = Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    this.tailWaited = false;
    this.stream = stream;
    const held = this.held[stream];
    if (held) {
      this.held[stream] = undefined;
      this.firstAt = Date.now();
      this.parts.push(held);
      this.size = held.byteLength;
    }
  }

  /** Emits what is buffered; `final` also emits an unfinished UTF-8 tail (and one held for the other stream). */
  flush(final = false): void {
    this.disarm();
    if (final) this.emitHeld();
    if (this.size === 0) return;
    let all = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.size);
    while (all.byteLength > 0) {
      const piece = all.subarray(0, this.options.maxBytes);
      let cut = piece.byteLength;
      if (!final && !this.tailWaited) cut = completeUtf8Length(piece);
      // A whole piece of continuation bytes is not UTF-8 at all: send it rather than stall.
      if (cut === 0 && piece.byteLength >= 4) cut = piece.byteLength;
      if (cut === 0) break;
      this.sink(this.offset, all.subarray(0, cut), this.stream, this.firstAt);
      this.offset += cut;
      all = all.subarray(cut);
    }
    this.parts = all.byteLength > 0 ? [all] : [];
    this.size = all.byteLength;
    this.tailWaited = this.size > 0;
    if (this.size > 0) this.arm();
  }

  dispose(): void {
    this.disarm();
    this.parts = [];
    this.size = 0;
    this.held.stdout = this.held.stderr = undefined;
  }

  /** The end: an unfinished character held for the stream that is not pending goes out as it is. */
  private emitHeld(): void {
    for (const stream of ["stdout", "stderr"] as const) {
      const held = this.held[stream];
      if (!held || stream === this.stream) continue;
      this.held[stream] = undefined;
      this.sink(this.offset, held, stream, Date.now());
      this.offset += held.byteLength;
    }
  }

  private arm(): void {
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, this.options.delayMs);
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
