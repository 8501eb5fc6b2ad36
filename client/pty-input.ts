// What a terminal types, numbered and kept until the process has it (docs/protocol.md §5, "Input
// exactly once"). Each Pty is one writer: a random id kept across its reconnects, and its input
// numbered by byte offset from 0. Bytes are sent as 0x07 frames at their offset and kept until
// the edge acknowledges them (`input_ack`, sent once the runner has written them to the
// process); after a reconnect, or when the edge asks, or when nothing is acknowledged for a
// while, everything not acknowledged is sent again from its offset, and the runner writes only
// what it has not written. So each byte reaches the process once, in the order typed.
import { encodeNumberedInput } from "../shared/protocol.js";
import { PtyBrokerError, statusOf } from "./errors.js";

/** Bytes typed and not yet acknowledged that a terminal keeps by default; `sendInput` past it rejects. */
export const INPUT_QUEUE_BYTES = 1 << 20;
/** Bytes per frame: well under the edge's default MAX_INPUT_BYTES (64 KiB). */
const PIECE_BYTES = 32 * 1024;
/** Nothing acknowledged for this long (doubling up to RESEND_MAX_MS): send the rest again. */
const RESEND_MS = 1000;
const RESEND_MAX_MS = 8000;
/** Refusals a resend would only repeat: the input is given up. */
const FINAL_REFUSALS = new Set(["FORBIDDEN", "SESSION_EXITED", "NOT_FOUND", "INVALID_REQUEST", "PAYLOAD_TOO_LARGE", "NOT_A_TTY"]);

export interface InputPort {
  /** Sends a frame on the open socket; false when none is open (it is sent after the reconnect). */
  send(frame: Uint8Array): boolean;
  /** Bytes waiting for their acknowledgement changed (for a person: what is typed but not there yet). */
  changed(pending: number): void;
}

interface Piece {
  offset: number;
  bytes: Uint8Array;
}

interface Waiter {
  /** Resolved once every byte below `end` is acknowledged. */
  end: number;
  resolve: () => void;
  reject: (error: PtyBrokerError) => void;
}

export class InputQueue {
  /** This terminal's writer id (`connect?writer=`). */
  readonly writer = randomWriterId();
  /** Every byte below this is written to the process. */
  private acked = 0;
  /** The offset the next typed byte gets. */
  private end = 0;
  /** Not yet acknowledged, in order, from `acked` to `end`. */
  private pieces: Piece[] = [];
  /** Sent on the current socket up to here. */
  private sentTo = 0;
  /** A socket has said `hello` and not dropped since: only then is anything sent. */
  private connected = false;
  private waiters: Waiter[] = [];
  private failure: PtyBrokerError | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private delay = RESEND_MS;

  constructor(
    private readonly port: InputPort,
    /** The most bytes kept unacknowledged. */
    readonly maxBytes = INPUT_QUEUE_BYTES,
  ) {}

  /** Every byte of this writer's input below this offset is written to the process (`connect?inputFrom=`). */
  get acknowledged(): number {
    return this.acked;
  }

  /** Bytes typed and not yet acknowledged. */
  get pending(): number {
    return this.end - this.acked;
  }

  /** The bytes typed and not yet acknowledged, in order. */
  pendingBytes(): Uint8Array {
    const out = new Uint8Array(this.pending);
    let at = 0;
    for (const piece of this.pieces) {
      const skip = Math.max(0, this.acked - piece.offset);
      out.set(piece.bytes.subarray(skip), at);
      at += piece.bytes.byteLength - skip;
    }
    return out;
  }

  /**
   * Queues `bytes` after everything typed before; resolves once the process has them all, rejects
   * when they cannot get there (the session ended, the terminal closed, a final refusal) or, at
   * once, when they do not fit in the queue.
   */
  push(bytes: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.pending + bytes.byteLength > this.maxBytes) {
      const message = `input queue is full: ${this.pending} bytes typed are not yet acknowledged, and ${bytes.byteLength} more would pass its bound of ${this.maxBytes} bytes (inputQueueBytes)`;
      return Promise.reject(new PtyBrokerError("QUOTA_EXCEEDED", message, statusOf("QUOTA_EXCEEDED")));
    }
    for (let at = 0; at < bytes.byteLength; at += PIECE_BYTES) {
      const piece = bytes.slice(at, at + PIECE_BYTES);
      this.pieces.push({ offset: this.end, bytes: piece });
      this.end += piece.byteLength;
    }
    const done = this.delivered();
    if (bytes.byteLength > 0) {
      this.port.changed(this.pending);
      this.flush();
    }
    return done;
  }

  /** Resolves once everything typed so far is acknowledged (what `eof` waits for). */
  delivered(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.end <= this.acked) return Promise.resolve();
    return new Promise<void>((resolve, reject) => this.waiters.push({ end: this.end, resolve, reject }));
  }

  /** A socket opened (`hello`): `acked` is the edge's word, if it has one; the rest goes again. */
  opened(acked: number | null): void {
    if (acked !== null) this.ack(acked);
    this.connected = true;
    this.sentTo = this.acked;
    this.delay = RESEND_MS;
    this.flush();
  }

  /** The socket dropped: what is typed is kept, and nothing is sent (nor sent again) until the next `hello`. */
  disconnected(): void {
    this.connected = false;
    this.sentTo = this.acked;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * The process has every byte below `offset`; or, with `resend`, the runner dropped a frame past
   * a hole and asks for everything from `offset` (not an acknowledgement: it may not have
   * written up to there yet).
   */
  ack(offset: number, resend = false): void {
    if (resend) {
      if (offset > this.sentTo || offset < this.acked) return;
      this.sentTo = offset;
      this.flush();
      return;
    }
    if (offset > this.acked && offset <= this.end) {
      this.acked = offset;
      this.pieces = this.pieces.filter((piece) => piece.offset + piece.bytes.byteLength > offset);
      this.sentTo = Math.max(this.sentTo, offset);
      const done = this.waiters.filter((waiter) => waiter.end <= offset);
      this.waiters = this.waiters.filter((waiter) => waiter.end > offset);
      for (const waiter of done) waiter.resolve();
      this.delay = RESEND_MS;
      this.port.changed(this.pending);
      this.arm(true);
    }
  }

  /** The edge did not take the frame at `offset`: kept for later, or given up when a resend would be refused too. */
  refused(offset: number, code: string, message: string, final = false): void {
    if (final || FINAL_REFUSALS.has(code)) {
      this.fail(new PtyBrokerError(code as PtyBrokerError["code"], `input not delivered: ${message}`, statusOf(code)));
      return;
    }
    // Sent again by the timer: a link that comes back, a process that reads again.
    this.sentTo = Math.max(this.acked, Math.min(offset, this.sentTo));
    this.arm(false);
  }

  /** Nothing more can be delivered: what waits is rejected, and so is what comes. */
  fail(error: PtyBrokerError): void {
    if (this.failure) return;
    this.failure = error;
    clearTimeout(this.timer);
    this.timer = undefined;
    const waiters = this.waiters;
    this.waiters = [];
    this.pieces = [];
    this.acked = this.end;
    for (const waiter of waiters) waiter.reject(error);
    this.port.changed(0);
  }

  /** Sends what the current socket has not had yet. */
  private flush(): void {
    if (!this.connected) return;
    for (const piece of this.pieces) {
      const pieceEnd = piece.offset + piece.bytes.byteLength;
      if (pieceEnd <= this.sentTo) continue;
      const skip = Math.max(0, this.sentTo - piece.offset);
      if (!this.port.send(encodeNumberedInput(piece.offset + skip, piece.bytes.subarray(skip)))) break;
      this.sentTo = pieceEnd;
    }
    this.arm(false);
  }

  /**
   * While anything waits for its acknowledgement, a timer sends it again if none comes: started
   * when there is none, started over when an acknowledgement moves the offset on.
   */
  private arm(restart: boolean): void {
    if (this.timer !== undefined && !restart) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending === 0 || this.failure || !this.connected) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.delay = Math.min(this.delay * 2, RESEND_MAX_MS);
      this.sentTo = this.acked;
      this.flush();
    }, this.delay);
  }
}

/** 16 random bytes as base64url: 22 characters, within the edge's writer id pattern. */
function randomWriterId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
