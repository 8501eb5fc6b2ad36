// Output compressed once per chunk for every viewer that asked for it (`compress=deflate`,
// docs/protocol.md §5, "Compressed output"): the session's fan-out hands every subscriber the
// same Uint8Array of a chunk, so the first such viewer's delivery starts one raw DEFLATE of it
// (CompressionStream("deflate-raw"), workerd's native zlib) and the others take the same
// promise. Without this, workerd's permessage-deflate compresses the same bytes again on each
// socket. A socket that takes these frames sends them in order (DeflateOutbox).
import { InOrder } from "../../shared/in-order.js";
import { log } from "../../shared/log.js";
import { type OutputStream, OUTPUT_HEADER_BYTES, DEFLATED_HEADER_BYTES, encodeDeflated, encodeOutput } from "../../shared/protocol.js";

/** Chunks smaller than this go as plain 0x01 frames: a deflate header costs more than it saves. */
export const MIN_DEFLATE_BYTES = 64;

/** A chunk's frame for compressing viewers: 0x06, or the plain frame when deflate does not shrink it. */
const frames = new WeakMap<Uint8Array, { offset: number; frame: Promise<Uint8Array> }>();

/**
 * The frame a compressing viewer gets for `data` at `offset`: made once per chunk (the cache
 * lives as long as the chunk does). Never rejects: if compression fails, the plain frame.
 */
export function deflatedFrame(offset: number, data: Uint8Array, stream: OutputStream): Promise<Uint8Array> {
  const known = frames.get(data);
  // A chunk is delivered at one offset; a part of one (subarray) is a new key.
  if (known?.offset === offset) return known.frame;
  const frame = deflateRaw(data).then(
    (compressed) =>
      // Never more bytes than the plain frame: incompressible output (random bytes) goes as 0x01.
      DEFLATED_HEADER_BYTES + compressed.byteLength < OUTPUT_HEADER_BYTES + data.byteLength
        ? encodeDeflated(offset, data.byteLength, compressed, stream)
        : encodeOutput(offset, data, stream),
    (error: unknown) => {
      log.warn("client.deflate", { offset, bytes: data.byteLength, outcome: "failed", error: String(error) });
      return encodeOutput(offset, data, stream);
    },
  );
  frames.set(data, { offset, frame });
  return frame;
}

async function deflateRaw(data: Uint8Array): Promise<Uint8Array> {
  const stream = new CompressionStream("deflate-raw");
  const writer = stream.writable.getWriter();
  void writer.write(data).catch(() => undefined);
  void writer.close().catch(() => undefined);
  return new Uint8Array(await new Response(stream.readable).arrayBuffer());
}

/**
 * A compressing socket's messages in the order they were given: a deflated frame may still be
 * compressing while a control message (`resize`, `exit`) or the close comes after it. Bounded by
 * the client's lag bound: output is queued here only as it is delivered, and deliveries stop at
 * the cut (client-hub.ts).
 */
export class DeflateOutbox {
  private readonly steps = new InOrder();

  constructor(
    private readonly send: (message: string | ArrayBuffer | Uint8Array) => void,
    private readonly close: (code: number, reason: string) => void,
  ) {}

  /** Queued messages (frames still compressing and what waits behind them). */
  get size(): number {
    return this.steps.size;
  }

  message(message: string | ArrayBuffer | Uint8Array): void {
    this.steps.now(() => this.send(message));
  }

  /** `frame` never rejects (deflatedFrame). */
  frame(frame: Promise<Uint8Array>): void {
    this.steps.later(frame.then((ready) => () => this.send(ready)));
  }

  closeAfter(code: number, reason: string): void {
    this.steps.now(() => this.close(code, reason));
  }
}
