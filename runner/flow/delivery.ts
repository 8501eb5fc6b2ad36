// Acknowledged delivery of one session's output to its Durable Object.
//
// Every coalesced chunk is appended to the output log first and sent on the link only once
// its append has succeeded, so whatever a client sees is in the log (docs/protocol.md §5, "Offsets,
// replay and the switch to live"). An append that fails is not skipped: the chunk waits, appends
// stop, and after a back-off the log is tried again from the first chunk it lacks, in offset order,
// until it answers. Chunks stay here until the edge acknowledges them; after every (re)opened link
// the edge says what it has (`resume`) and nothing is sent before that, so a new link never starts
// past a hole. When more than `highWater` bytes are unacknowledged (unappended ones included) the
// PTY is paused, and it is resumed below `lowWater`, so memory stays bounded however fast the
// process writes and however long the log is away.
import { type ChunkMeta, UNKNOWN_META, encodeOutput } from "../../shared/protocol.js";

export interface DeliveryPort {
  /** Appends to the output log; resolves or rejects once the log has answered. */
  append(offset: number, bytes: Buffer, meta: ChunkMeta): Promise<void>;
  /** Sends on the link; false when the link is not open. */
  send(frame: string | Uint8Array): boolean;
  pause(): void;
  resume(): void;
  /** The log refused or failed an append (called once per outage). */
  onAppendFailed(error: unknown): void;
  /** Called after a chunk's append succeeded (the log's extent grew to `end`). */
  onAppended?(end: number): void;
}

export interface DeliveryOptions {
  highWater: number;
  lowWater: number;
  /** First wait before the log is tried again after a failed append; doubles up to `retryMaxMs`. */
  retryMs?: number;
  retryMaxMs?: number;
}

interface Chunk {
  offset: number;
  bytes: Buffer;
  /** Its stream (0x01 or 0x03 on the link), read time and terminal size, kept in the log. */
  meta: ChunkMeta;
  appended: boolean;
}

export class Delivery {
  /** Chunks emitted and not yet acknowledged, in offset order. */
  private queue: Chunk[] = [];
  /** Index in `queue` of the next chunk to send. */
  private nextToSend = 0;
  /** Index in `queue` of the next chunk whose append has not been asked for. */
  private nextToAppend = 0;
  /** Appends asked for and not answered yet. */
  private appending = 0;
  /** An append failed: no new appends until the retry, which waits for those in flight. */
  private logDown = false;
  /** After an outage: appending again from the first missing chunk, one at a time. */
  private recovering = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDue = false;
  private retryDelay: number;
  private queuedBytes = 0;
  private linkReady = false;
  private paused = false;
  private final: string | undefined;
  private finalSent = false;
  private disposed = false;

  constructor(
    private readonly port: DeliveryPort,
    private readonly options: DeliveryOptions,
  ) {
    this.retryDelay = options.retryMs ?? 200;
  }

  /** Bytes emitted and not yet acknowledged by the edge. */
  get unacknowledged(): number {
    return this.queuedBytes;
  }

  /** Whether the log has refused appends and is being retried. */
  get logFailing(): boolean {
    return this.logDown;
  }

  /** A coalesced chunk: log it, then send it in order. */
  push(offset: number, bytes: Buffer, meta: ChunkMeta = UNKNOWN_META): void {
    this.queue.push({ offset, bytes, meta, appended: false });
    this.queuedBytes += bytes.byteLength;
    if (!this.paused && this.queuedBytes > this.options.highWater) {
      this.paused = true;
      this.port.pause();
    }
    this.appendMore();
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

  /** The link closed: nothing more is sent until the next link's `resume`. */
  linkDown(): void {
    this.linkReady = false;
  }

  /** Stops retrying the log (the session is gone). */
  dispose(): void {
    this.disposed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  /** Normal mode: every chunk not yet asked for is appended at once (pipelined, in order). */
  private appendMore(): void {
    if (this.logDown || this.recovering || this.disposed) return;
    while (this.nextToAppend < this.queue.length) {
      const chunk = this.queue[this.nextToAppend++];
      if (chunk.appended) continue;
      this.appending++;
      this.port.append(chunk.offset, chunk.bytes, chunk.meta).then(
        () => this.appended(chunk),
        (error: unknown) => this.appendFailed(error),
      );
    }
  }

  private appended(chunk: Chunk): void {
    this.appending--;
    chunk.appended = true;
    this.port.onAppended?.(chunk.offset + chunk.bytes.byteLength);
    this.pump();
    this.retryWhenQuiet();
  }

  private appendFailed(error: unknown): void {
    this.appending--;
    if (!this.logDown && !this.disposed) {
      this.logDown = true;
      this.recovering = false;
      this.port.onAppendFailed(error);
      const delay = this.retryDelay;
      this.retryDelay = Math.min(delay * 2, this.options.retryMaxMs ?? 2000);
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.retryDue = true;
        this.retryWhenQuiet();
      }, delay);
    }
    this.retryWhenQuiet();
  }

  /**
   * Once the back-off is over and no append is in flight, the log gets everything from the
   * first chunk it lacks again, one chunk at a time: a pipelined append after a failed one may
   * have landed, so the log's append is idempotent and replaces what follows a missing chunk
   * (runner/log/output-log.ts), and only a one-at-a-time pass keeps that exact.
   */
  private retryWhenQuiet(): void {
    if (!this.retryDue || this.appending > 0 || this.disposed) return;
    this.retryDue = false;
    this.logDown = false;
    this.recovering = true;
    const first = this.queue.findIndex((chunk) => !chunk.appended);
    for (let i = Math.max(first, 0); first >= 0 && i < this.queue.length; i++) this.queue[i].appended = false;
    this.nextToAppend = first < 0 ? this.queue.length : first;
    this.recoverNext();
  }

  private recoverNext(): void {
    if (!this.recovering || this.logDown || this.disposed) return;
    if (this.nextToAppend >= this.queue.length) {
      this.recovering = false;
      this.retryDelay = this.options.retryMs ?? 200;
      return;
    }
    const chunk = this.queue[this.nextToAppend++];
    this.appending++;
    this.port.append(chunk.offset, chunk.bytes, chunk.meta).then(
      () => {
        this.appended(chunk);
        this.recoverNext();
      },
      (error: unknown) => this.appendFailed(error),
    );
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
      this.nextToAppend = Math.max(0, this.nextToAppend - drop);
    }
    if (this.paused && this.queuedBytes < this.options.lowWater) {
      this.paused = false;
      this.port.resume();
    }
  }

  /** Sends appended chunks in order; stops at the first one the log does not hold yet. */
  private pump(): void {
    if (!this.linkReady) return;
    while (this.nextToSend < this.queue.length) {
      const chunk = this.queue[this.nextToSend];
      if (!chunk.appended) return;
      if (!this.port.send(encodeOutput(chunk.offset, chunk.bytes, chunk.meta.stream))) {
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
