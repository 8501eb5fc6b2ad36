// Where one Pty's output stands (docs/protocol.md §5, "Offsets, replay and the switch to live"):
// the offset of the next byte expected, the last one acknowledged, and a screen's header waiting
// for its frame. Turns the socket's binary frames into output delivered exactly once and in order
// (what was delivered before a reconnect is dropped, a hole is a gap) and acknowledges as it goes;
// the Pty (pty.ts) hears the result through its `OffsetsOwner` callbacks.
import { decodeFrame } from "../shared/protocol.js";
import type { ScreenRepaint } from "./agent.js";

/** How often the client acknowledges output (the edge cuts clients too far behind, 4008). */
const ACK_EVERY_BYTES = 256 * 1024;

export interface OffsetsOwner {
  /** Output bytes, each exactly once and in order; `offset` is the first byte's. */
  output(stream: "data" | "stderr", bytes: Uint8Array, offset: number): void;
  /** Output in [from, to) will never arrive. */
  gap(gap: { from: number; to: number }): void;
  /** The screen as it is at `screen.offset`; output continues there. */
  screen(screen: ScreenRepaint): void;
  /** Acknowledges output up to `offset` on the open socket; false when none is open (nothing sent). */
  ack(offset: number): boolean;
  /** The session's size as last heard, for a screen frame whose header did not come. */
  size(): { cols: number; rows: number } | undefined;
}

export class OutputOffsets {
  /** Offset of the next byte expected; unknown until the server says where replay starts. */
  private expected: number | undefined;
  private acked = 0;
  /** The `screen` message whose 0x04 frame comes next. */
  private screenHeader: { offset: number; cols: number; rows: number } | undefined;

  constructor(private readonly owner: OffsetsOwner) {}

  /** Offset of the next byte expected, once known: where a reconnect resumes. */
  get next(): number | undefined {
    return this.expected;
  }

  /** A new socket is being dialled: a screen header heard on the last one is void. */
  dialling(): void {
    this.screenHeader = undefined;
  }

  /**
   * The socket opened: the offset its first ack carries (where output resumes, 0 at first),
   * which the Pty sends at once.
   */
  opened(): number {
    this.acked = this.expected ?? 0;
    return this.acked;
  }

  /** `replay`: output starts at `from` (when nothing was delivered before). */
  replay(from: number): void {
    this.expected ??= from;
  }

  /** `live`: replay has caught up at `offset`. */
  live(offset: number): void {
    this.expected ??= offset;
  }

  /** `gap`: [from, to) is gone from the log; said unless all of it was delivered already. */
  gap(from: number, to: number): void {
    if (this.expected === undefined || this.expected < to) {
      this.owner.gap({ from, to });
      this.expected = to;
    }
  }

  /** `screen`: the size of the repaint whose frame comes next. */
  screenComing(header: { offset: number; cols: number; rows: number }): void {
    this.screenHeader = header;
  }

  /** A binary frame: output, stderr or a screen's repaint (anything else is ignored). */
  frame(data: ArrayBuffer): void {
    const frame = decodeFrame(new Uint8Array(data));
    if (frame.op === "screen") return this.screenFrame(frame.offset, frame.data);
    if (frame.op !== "output" && frame.op !== "stderr") return;
    let { offset, data: bytes } = frame;
    const end = offset + bytes.byteLength;
    if (this.expected !== undefined) {
      if (end <= this.expected) return; // already delivered before a reconnect
      if (offset < this.expected) {
        bytes = bytes.subarray(this.expected - offset);
        offset = this.expected;
      } else if (offset > this.expected) {
        this.owner.gap({ from: this.expected, to: offset });
      }
    }
    this.expected = end;
    if (bytes.byteLength > 0) this.owner.output(frame.op === "stderr" ? "stderr" : "data", bytes, offset);
    if (end - this.acked >= ACK_EVERY_BYTES && this.owner.ack(end)) this.acked = end;
  }

  /**
   * A repaint of the screen at `offset` (after its `screen` message): output continues there.
   * Bytes between what was delivered and `offset` are skipped, and said so unless a `gap` did.
   */
  private screenFrame(offset: number, data: Uint8Array): void {
    const header = this.screenHeader;
    this.screenHeader = undefined;
    if (this.expected !== undefined && offset < this.expected) return; // older than what was delivered
    if (this.expected !== undefined && offset > this.expected) this.owner.gap({ from: this.expected, to: offset });
    this.expected = offset;
    const cols = header?.offset === offset ? header.cols : (this.owner.size()?.cols ?? 80);
    const rows = header?.offset === offset ? header.rows : (this.owner.size()?.rows ?? 24);
    this.owner.screen({ offset, cols, rows, data });
    // Everything below `offset` is as good as received: the edge counts this client's lag from here.
    if (offset > this.acked && this.owner.ack(offset)) this.acked = offset;
  }
}
