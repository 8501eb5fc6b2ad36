// The client side of compressed output (docs/protocol.md §5, "Compressed output"): a 0x06 frame
// inflated with DecompressionStream("deflate-raw") (browsers, Node 20), bounded by the length its
// header names, and a socket's messages kept in the order they came while a frame inflates.
// Used by the SDK (pty.ts), and so by the page (web/), which connects through it; web APIs only.
import { InOrder } from "../shared/in-order.js";
import { MAX_DEFLATED_OUTPUT_BYTES, Op, checkInflated, decodeFrame, encodeOutput } from "../shared/protocol.js";

/** A Deflated frame's output bytes; rejects with a clear error on a bad or oversized stream. */
export async function inflateRaw(frame: { offset: number; length: number; data: Uint8Array }): Promise<Uint8Array> {
  const bound = Math.min(frame.length, MAX_DEFLATED_OUTPUT_BYTES);
  const out = new Uint8Array(bound);
  let size = 0;
  const input = new Blob([frame.data as Uint8Array<ArrayBuffer>]).stream();
  const reader = input.pipeThrough(new DecompressionStream("deflate-raw")).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (size + value.byteLength > bound) {
        throw new Error(`deflated frame at offset ${frame.offset}: inflates to more than the ${frame.length} bytes its header says`);
      }
      out.set(value, size);
      size += value.byteLength;
    }
  } catch (error) {
    void reader.cancel().catch(() => undefined);
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(reason.startsWith("deflated frame") ? reason : `deflated frame at offset ${frame.offset}: not a raw DEFLATE stream (${reason})`);
  }
  const inflated = out.subarray(0, size);
  checkInflated(frame, inflated);
  return inflated;
}

/** Queued messages at most; a socket never has this many frames inflating at once in practice. */
const MAX_WAITING = 4096;

/**
 * A socket's messages handed on in the order they came, each 0x06 frame as the 0x01 (or 0x03)
 * frame it stands for. Without 0x06 frames every message is handed on at once, as before. A
 * frame that does not inflate is reported (`failed`) and dropped: the next frame's offset shows
 * the hole, as a gap.
 */
export class InflatingInbox {
  private readonly steps = new InOrder();

  constructor(
    private readonly deliver: (message: string | ArrayBuffer) => void,
    private readonly failed: (error: Error) => void,
  ) {}

  push(message: string | ArrayBuffer): void {
    const deflated = typeof message !== "string" && new Uint8Array(message, 0, Math.min(1, message.byteLength))[0] === Op.Deflated;
    if (!deflated) {
      if (this.roomFor()) this.steps.now(() => this.deliver(message));
      return;
    }
    const frame = decodeFrame(new Uint8Array(message));
    if (frame.op !== "deflated") {
      this.failed(new Error(frame.op === "invalid" ? frame.reason : "bad deflated frame"));
      return;
    }
    if (!this.roomFor()) return;
    this.steps.later(
      inflateRaw(frame).then(
        (bytes) => {
          const ready = toArrayBuffer(encodeOutput(frame.offset, bytes, frame.stream));
          return () => this.deliver(ready);
        },
        (error: unknown) => {
          this.failed(error instanceof Error ? error : new Error(String(error)));
          return undefined;
        },
      ),
    );
  }

  /** Runs `then` once every message received so far is handed on: at once when none waits. */
  whenDrained(then: () => void): void {
    this.steps.whenDrained(then);
  }

  /** Whether one more message may wait; reports the failure when not. */
  private roomFor(): boolean {
    if (this.steps.size < MAX_WAITING) return true;
    this.failed(new Error(`more than ${MAX_WAITING} messages waiting behind a deflated frame`));
    return false;
  }
}

function toArrayBuffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.byteLength === bytes.byteLength ? (bytes.buffer as ArrayBuffer) : (bytes.slice().buffer as ArrayBuffer);
}

/** A binary message as an ArrayBuffer (binaryType "arraybuffer"; a view's bytes copied otherwise). */
export function asArrayBuffer(data: unknown): ArrayBuffer {
  if (data instanceof ArrayBuffer) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice().buffer;
  return new ArrayBuffer(0);
}
