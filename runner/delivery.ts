// Acknowledged delivery of one session's output to its Durable Object.
//
// Every coalesced chunk is appended to the output log first and sent on the link only once
// the append has settled, so the edge never holds an offset the log lacks (unless the log
// failed, which a later read reports as a gap). Chunks stay here until the edge acknowledges
// them; after a reconnect the edge says what it has (`resume`) and the rest is sent again.
// When more than `highWater` bytes are unacknowledged the PTY is paused, and it is resumed
// below `lowWater`, so memory stays bounded however fast the process writes.
import { encodeOutput } from "../shared/protocol.js";

export interface DeliveryPort {
  /** Appends to the output log; resolves or rejects once the log has answered. */
  append(offset: number, bytes: Buffer): Promise<void>;
  /** Sends on the link; false when the link is not open. */
  send(frame: string | Uint8Array): boolean;
  pause(): void;
  resume(): void;
  onAppendFailed(error: unknown): void;
  /** Called after a chunk's append succeeded (the log's extent grew to `end`). */
  onAppended?(end: number): void;
}

export interface DeliveryOptions {
  highWater: number;
  lowWater: number;
}

interface Chunk {
  offset: number;
  bytes: Buffer;
  settled: boolean;
  whenSettled: Promise<void>;
}

export class Delivery {
  /** Chunks emitted and not yet acknowledged, in offset order. */
  private queue: Chunk[] = [];
  /** Index in `queue` of the next chunk to send. */
  private nextToSend = 0;
  private queuedBytes = 0;
  private linkReady = false;
  private paused = false;
  private final: string | undefined;
  private finalSent = false;
  private waitingOn: Chunk | undefined;

  constructor(
    private readonly port: DeliveryPort,
    private readonly options: DeliveryOptions,
  ) {}

  /** Bytes emitted and not yet acknowledged by the edge. */
  get unacknowledged(): number {
    return this.queuedBytes;
  }

  /** A coalesced chunk: log it, then send it in order. */
  push(offset: number, bytes: Buffer): void {
    const chunk: Chunk = { offset, bytes, settled: false, whenSettled: Promise.resolve() };
    chunk.whenSettled = this.port.append(offset, bytes).then(
      () => {
        chunk.settled = true;
        this.port.onAppended?.(offset + bytes.byteLength);
      },
      (error: unknown) => {
        chunk.settled = true;
        this.port.onAppendFailed(error);
      },
    );
    this.queue.push(chunk);
    this.queuedBytes += bytes.byteLength;
    if (!this.paused && this.queuedBytes > this.options.highWater) {
      this.paused = true;
      this.port.pause();
    }
    this.pump();
  }

  /** A message to send after every chunk (the exit report); sent again after each resume. */
  finish(message: string): void {
    this.final = message;
    this.finalSent = false;
    this.pump();
  }

  /** The edge has stored every byte below `offset`. */
  ack(offset: number): void {
    this.dropBelow(offset);
    this.pump();
  }

  /** A link is open and the edge holds output below `offset`: send the rest from there. */
  resume(offset: number): void {
    this.dropBelow(offset);
    this.nextToSend = 0;
    this.finalSent = false;
    this.linkReady = true;
    this.pump();
  }

  linkDown(): void {
    this.linkReady = false;
  }

  private dropBelow(offset: number): void {
    let drop = 0;
    while (drop < this.queue.length) {
      const chunk = this.queue[drop];
      const end = chunk.offset + chunk.bytes.byteLength;
      if (end <= offset) {
        this.queuedBytes -= chunk.bytes.byteLength;
        drop++;
        continue;
      }
      if (chunk.offset < offset) {
        // The edge holds part of this chunk (it never acknowledges mid-chunk, but be exact).
        const cut = offset - chunk.offset;
        this.queuedBytes -= cut;
        chunk.bytes = chunk.bytes.subarray(cut);
        chunk.offset = offset;
      }
      break;
    }
    if (drop > 0) {
      this.queue.splice(0, drop);
      this.nextToSend = Math.max(0, this.nextToSend - drop);
    }
    if (this.paused && this.queuedBytes < this.options.lowWater) {
      this.paused = false;
      this.port.resume();
    }
  }

  private pump(): void {
    if (!this.linkReady) return;
    while (this.nextToSend < this.queue.length) {
      const chunk = this.queue[this.nextToSend];
      if (!chunk.settled) {
        if (this.waitingOn !== chunk) {
          this.waitingOn = chunk;
          void chunk.whenSettled.then(() => {
            if (this.waitingOn === chunk) this.waitingOn = undefined;
            this.pump();
          });
        }
        return;
      }
      if (!this.port.send(encodeOutput(chunk.offset, chunk.bytes))) {
        this.linkReady = false;
        return;
      }
      this.nextToSend++;
    }
    if (this.final !== undefined && !this.finalSent) {
      if (this.port.send(this.final)) this.finalSent = true;
      else this.linkReady = false;
    }
  }
}
