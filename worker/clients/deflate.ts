// Output compressed once per chunk for every viewer that asked for it (`compress=deflate`,
// docs/protocol.md §5, "Compressed output"): the session's fan-out hands every subscriber the
// same Uint8Array of a chunk, so the first such viewer's delivery starts one raw DEFLATE of it
// (CompressionStream("deflate-raw"), workerd's native zlib) and the others take the same
// promise. Without this, workerd's permessage-deflate compresses the same bytes again on each
// socket. A socket that takes these frames sends them in order (DeflateOutbox).
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

/** Largest batch of consecutive chunks compressed as one frame. */
export const MAX_BATCH_BYTES = 1 << 20;
/** Batches waiting behind the one compressing, at most; past it chunks go one frame each. */
const MAX_BATCHES = 64;

interface Batch {
  offset: number;
  end: number;
  stream: OutputStream;
  parts: Uint8Array[];
  /** The last chunk added and its offset: the other viewers of the same chunk find it here. */
  last: Uint8Array;
  lastOffset: number;
  members: Set<DeflateOutbox>;
  started: boolean;
  frame: Promise<Uint8Array>;
  resolve: (frame: Uint8Array) => void;
}

/**
 * Live output for a session's compressing viewers, batched while a compression is under way: a
 * chunk that comes while nothing compresses is compressed at once (no added latency), and the
 * chunks that come meanwhile wait and go as one frame (fewer, larger frames and sends, one
 * compression for all of them) once it is done. Every viewer that was at the batch's start
 * gets the batch; one that joins later (its replay just ended) gets its chunks one frame each.
 */
export class DeflateBatcher {
  private readonly queue: Batch[] = [];

  /** `data` at `offset` for the viewer whose outbox this is, which holds every byte before it. */
  add(outbox: DeflateOutbox, offset: number, data: Uint8Array, stream: OutputStream): void {
    const last = this.queue.at(-1);
    if (last && last.last === data && last.lastOffset === offset) {
      // Another viewer of this chunk put it in a batch already.
      if (last.members.has(outbox)) return;
      if (last.offset === offset && last.end === offset + data.byteLength) return this.join(last, outbox);
      return outbox.frame(deflatedFrame(offset, data, stream));
    }
    if (last && !last.started && last.end === offset && last.stream === stream && last.end - last.offset + data.byteLength <= MAX_BATCH_BYTES) {
      last.parts.push(data);
      last.end += data.byteLength;
      last.last = data;
      last.lastOffset = offset;
      if (!last.members.has(outbox)) outbox.frame(deflatedFrame(offset, data, stream));
      return;
    }
    if (this.queue.length > MAX_BATCHES) return outbox.frame(deflatedFrame(offset, data, stream));
    let resolve!: (frame: Uint8Array) => void;
    const frame = new Promise<Uint8Array>((done) => (resolve = done));
    const batch: Batch = { offset, end: offset + data.byteLength, stream, parts: [data], last: data, lastOffset: offset, members: new Set(), started: false, frame, resolve };
    this.queue.push(batch);
    this.join(batch, outbox);
    if (this.queue.length === 1) this.start(batch);
  }

  private join(batch: Batch, outbox: DeflateOutbox): void {
    batch.members.add(outbox);
    outbox.frame(batch.frame);
  }

  private start(batch: Batch): void {
    batch.started = true;
    const data = batch.parts.length === 1 ? batch.parts[0] : concat(batch.parts, batch.end - batch.offset);
    batch.parts = [];
    const made = data.byteLength < MIN_DEFLATE_BYTES ? Promise.resolve(encodeOutput(batch.offset, data, batch.stream)) : deflatedFrame(batch.offset, data, batch.stream);
    void made.then((frame) => {
      batch.resolve(frame);
      this.queue.shift();
      const next = this.queue[0];
      if (next) this.start(next);
    });
  }
}

function concat(parts: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

type Entry = { kind: "send"; message: string | ArrayBuffer | Uint8Array } | { kind: "frame"; frame: Promise<Uint8Array>; ready?: Uint8Array } | { kind: "close"; code: number; reason: string };

/**
 * A compressing socket's messages in the order they were given: a deflated frame may still be
 * compressing while a control message (`resize`, `exit`) or the close comes after it. Bounded by
 * the client's lag bound: output is queued here only as it is delivered, and deliveries stop at
 * the cut (client-hub.ts).
 */
export class DeflateOutbox {
  private readonly queue: Entry[] = [];

  constructor(
    private readonly send: (message: string | ArrayBuffer | Uint8Array) => void,
    private readonly close: (code: number, reason: string) => void,
  ) {}

  /** Queued messages (frames still compressing and what waits behind them). */
  get size(): number {
    return this.queue.length;
  }

  message(message: string | ArrayBuffer | Uint8Array): void {
    if (this.queue.length === 0) this.send(message);
    else this.queue.push({ kind: "send", message });
  }

  frame(frame: Promise<Uint8Array>): void {
    const entry: Entry = { kind: "frame", frame };
    this.queue.push(entry);
    void frame.then((ready) => {
      entry.ready = ready;
      this.pump();
    });
  }

  closeAfter(code: number, reason: string): void {
    if (this.queue.length === 0) this.close(code, reason);
    else this.queue.push({ kind: "close", code, reason });
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0];
      if (head.kind === "frame") {
        if (!head.ready) return;
        this.send(head.ready);
      } else if (head.kind === "send") this.send(head.message);
      else this.close(head.code, head.reason);
      this.queue.shift();
    }
  }
}
