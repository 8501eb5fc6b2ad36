// Whoever receives a session's output: a WebSocket client (framed or raw) or a Server-Sent
// Events stream. Each one replays from its offset, then follows live output; the session
// object drives them through this one interface.
import { bytesToBase64 } from "../../shared/base64.js";
import type { ScreenSnapshot } from "../../shared/agent.js";
import { CloseCode } from "../../shared/errors.js";
import { type OutputStream, type ServerMessage, encodeOutput, encodeScreen } from "../../shared/protocol.js";
import { closeQuietly, sendQuietly } from "../io/sockets.js";
import { DeflateOutbox, MIN_DEFLATE_BYTES, deflatedFrame } from "./deflate.js";
import { SseBody, revokedEvent, textEvent } from "../io/sse-body.js";

const encoder = new TextEncoder();

/** `watch`: not a client, but an `expect` waiting on the output (agent/expect-watch.ts). */
export type SubscriberKind = "framed" | "raw" | "sse" | "watch";

/** What a lagging framed client does: is cut (4008), or skips ahead to the current screen. */
export type OnLag = "cut" | "screen";

export interface Subscriber {
  readonly kind: SubscriberKind;
  /** Offset of the next byte this subscriber receives. */
  cursor: number;
  /** Replay is over: live output goes to it as it arrives. */
  live: boolean;
  closed: boolean;
  /** Output bytes at `offset` from `stream`; `frame` is the same bytes already framed, when at hand. */
  deliver(offset: number, data: Uint8Array, stream: OutputStream, frame?: ArrayBuffer): void;
  control(message: ServerMessage): void;
  /** The screen as it is at `snapshot.offset` (from=screen, onLag=screen); output continues there. */
  screen(snapshot: ScreenSnapshot): void;
  /** Bytes sent that the subscriber has not taken yet, as far as the edge can tell. */
  lag(): number;
  /**
   * Runs `resume` once the subscriber has taken enough that its lag is at most `bytes` (at
   * once if it already is). Replay waits on this, so replaying never outruns a client.
   */
  whenLagAtMost(bytes: number, resume: () => void): void;
  close(code: number, reason: string): void;
}

/** What a client socket's attachment keeps across hibernation. */
export interface ClientAttachment {
  kind: "framed" | "raw";
  live: boolean;
  cursor: number;
  /** Only what a viewer may do: no input, resize or signal. */
  readOnly: boolean;
  /** Connected with the tenant's API key: may use the slot kept for the owner. */
  owner?: boolean;
  /** Closed by the edge (cut, ended): holds no slot while its close completes. */
  cut?: boolean;
  /** Names the client for the size policy ("who typed last"); absent on attachments made before it. */
  id?: string;
  /** The size the client last asked for with `resize` (its window), or absent (session/size-policy.ts). */
  size?: TermSize | null;
  /** What happens when it lags; absent = cut. */
  onLag?: OnLag;
  /** Output goes to it compressed once per chunk (0x06, `compress=deflate`); absent = plain. */
  compress?: boolean;
  /** The writer it numbers its input as (`connect?writer=`); absent: its input is not numbered. */
  writer?: WriterName;
}

/**
 * A client's writer: the id it chose (`connect?writer=`, kept across its reconnects) and the key
 * the runner counts its input by, the id scoped to the credential it came with, so that no other
 * credential can speak, or stop speaking, for it (docs/security.md).
 */
export interface WriterName {
  id: string;
  key: string;
  /** What the writer had acknowledged when this socket connected (`inputFrom`): its count starts there if the runner has none. */
  base: number;
}

export interface TermSize {
  cols: number;
  rows: number;
}

/**
 * A WebSocket client. workerd does not expose `bufferedAmount` (workerd#988), so a framed
 * client's lag is measured by its `ack` messages, and a raw client, which cannot acknowledge,
 * by the bytes sent to it since its own last frame (docs/protocol.md, "Slow clients").
 */
export class SocketSubscriber implements Subscriber {
  closed = false;
  acked: number;
  /** When the client last sent anything (ms since epoch). */
  lastHeard = Date.now();
  /** Raw mode: bytes sent since the client's last frame. */
  private sentSinceHeard = 0;
  /** The writer its numbered input (0x07) counts as; kept across hibernation. */
  writer: WriterName | undefined;

  constructor(
    readonly ws: WebSocket,
    readonly kind: "framed" | "raw",
    public cursor: number,
    public live: boolean,
    readonly readOnly: boolean,
    readonly owner: boolean,
    /** Names this client for the size policy; kept across hibernation. */
    readonly id: string = crypto.randomUUID(),
    /** The size this client last asked for (its window), applied or not (session/size-policy.ts). */
    public size: TermSize | null = null,
    readonly onLag: OnLag = "cut",
    /** Framed only: output compressed once per chunk (0x06), in order with everything else. */
    readonly compress = false,
  ) {
    this.acked = cursor;
    this.outbox = compress
      ? new DeflateOutbox(
          (message) => sendQuietly(ws, message),
          (code, reason) => closeQuietly(ws, code, reason),
        )
      : undefined;
  }

  private readonly outbox: DeflateOutbox | undefined;

  /** Sends now, or (a compressing client) after the frames still compressing before it. */
  private send(message: string | ArrayBuffer | Uint8Array): void {
    if (this.outbox) this.outbox.message(message);
    else sendQuietly(this.ws, message);
  }

  deliver(offset: number, data: Uint8Array, stream: OutputStream, frame?: ArrayBuffer): void {
    // Framed: 0x01 for stdout (or the terminal), 0x03 for stderr, or 0x06 for a client that
    // asked for compressed output; raw: both as they come. Offsets and lag count raw bytes.
    if (this.kind === "framed") {
      if (this.outbox && data.byteLength >= MIN_DEFLATE_BYTES) this.outbox.frame(deflatedFrame(offset, data, stream));
      else this.send(frame ?? encodeOutput(offset, data, stream));
    } else {
      sendQuietly(this.ws, data);
      this.sentSinceHeard += data.byteLength;
    }
    this.cursor = offset + data.byteLength;
  }

  control(message: ServerMessage): void {
    if (this.kind === "framed") this.send(JSON.stringify(message));
  }

  /** Framed: `screen` then a 0x04 frame; raw: the repaint bytes themselves. Neither moves the cursor. */
  screen(snapshot: ScreenSnapshot): void {
    const bytes = encoder.encode(snapshot.ansi);
    if (this.kind === "raw") {
      sendQuietly(this.ws, bytes);
      this.sentSinceHeard += bytes.byteLength;
      return;
    }
    const { offset, cols, rows } = snapshot;
    this.control({ type: "screen", offset, cols, rows });
    this.send(encodeScreen(offset, bytes));
  }

  /** Output continues at the screen's `offset` (skipped ahead to it); its lag counts up to there until it acks it. */
  skippedTo(offset: number): void {
    this.cursor = offset;
    this.waiting = undefined; // a replay waiting for acks was given up
  }

  private waiting: { bytes: number; resume: () => void } | undefined;

  /** The client sent a frame: it is there. */
  heard(): void {
    this.lastHeard = Date.now();
    this.sentSinceHeard = 0;
  }

  /** The client has every byte below `offset`; false when it claims more than it was sent. */
  ack(offset: number): boolean {
    if (offset > this.cursor) return false;
    if (offset > this.acked) this.acked = offset;
    const waiting = this.waiting;
    if (waiting && this.lag() <= waiting.bytes) {
      this.waiting = undefined;
      waiting.resume();
    }
    return true;
  }

  whenLagAtMost(bytes: number, resume: () => void): void {
    // A raw client cannot say what it took: its replay is bounded by the cut, not paced.
    if (this.kind === "raw" || this.lag() <= bytes) resume();
    else this.waiting = { bytes, resume };
  }

  lag(): number {
    return this.kind === "framed" ? this.cursor - this.acked : this.sentSinceHeard;
  }

  /** Behind, and silent (no ack, no frame) for `ms`: a framed client that stopped reading. */
  stalled(now: number, ms: number): boolean {
    return this.kind === "framed" && !this.closed && this.lag() > 0 && now - this.lastHeard > ms;
  }

  close(code: number, reason: string): void {
    if (!this.closed) {
      this.closed = true;
      this.persist();
    }
    // A compressing client gets what was queued for it before the close (its `exit`, say).
    if (this.outbox) this.outbox.closeAfter(code, reason);
    else closeQuietly(this.ws, code, reason);
  }

  persist(): void {
    try {
      this.ws.serializeAttachment({
        kind: this.kind,
        live: this.live,
        cursor: this.cursor,
        readOnly: this.readOnly,
        owner: this.owner,
        cut: this.closed,
        id: this.id,
        size: this.size,
        onLag: this.onLag,
        compress: this.compress,
        writer: this.writer,
      } satisfies ClientAttachment);
    } catch {
      // the socket is gone: nothing to keep
    }
  }
}

/**
 * A Server-Sent Events stream: `event: data` (or `event: stderr`) with `id: <offset after the
 * chunk>` and base64 bytes, `event: gap`, `event: screen`, `event: exit` (then the stream ends).
 * Its events wait in the stream's own queue (io/sse-body.ts), output as the very bytes delivered
 * (shared by every subscriber; encoded only when the client takes them), and its lag is the raw
 * output bytes queued, like a framed client's; past `maxLag` the stream is cut with `event: cut`
 * and the client resumes by Last-Event-ID (docs/protocol.md §5b).
 */
export class StreamSubscriber implements Subscriber {
  readonly kind = "sse" as const;
  live = false;
  private readonly sse: SseBody;
  private waiting: { bytes: number; resume: () => void } | undefined;

  /** `onCut`: it passed its bound (the hub lets it go); `onCancel`: the client went away. */
  constructor(
    public cursor: number,
    maxLag: number,
    hooks: { onCut: () => void; onCancel: () => void },
  ) {
    this.sse = new SseBody(maxLag, {
      pulled: () => {
        const waiting = this.waiting;
        if (waiting && this.lag() <= waiting.bytes) {
          this.waiting = undefined;
          waiting.resume();
        }
      },
      cut: hooks.onCut,
      cancelled: hooks.onCancel,
    });
  }

  get closed(): boolean {
    return !this.sse.open;
  }

  /** The response that carries the stream. */
  response(): Response {
    return this.sse.response();
  }

  /** Where the stream starts: the id a cut names when the client took no event with an id. */
  startAt(offset: number): void {
    this.sse.startAt(String(offset));
  }

  deliver(offset: number, data: Uint8Array, stream: OutputStream): void {
    const end = offset + data.byteLength;
    const event = stream === "stderr" ? "stderr" : "data";
    const id = String(end);
    this.sse.push({ size: data.byteLength, id, bytes: () => encodedOutput(event, id, data) });
    this.cursor = end;
  }

  control(message: ServerMessage): void {
    if (message.type === "gap") this.event("gap", { from: message.from, to: message.to });
    else if (message.type === "exit") {
      const { status, exitCode, signal, reason, offset } = message;
      this.event("exit", { status, exitCode, signal, reason, offset });
    } else if (message.type === "error") this.event("error", { code: message.code, message: message.message });
  }

  /** `event: screen`, its id the offset output continues at (a resume point like any other). */
  screen(snapshot: ScreenSnapshot): void {
    const { offset, cols, rows, ansi } = snapshot;
    const bytes = encoder.encode(ansi);
    const text = `event: screen\nid: ${offset}\ndata: ${JSON.stringify({ offset, cols, rows, data: bytesToBase64(bytes) })}\n\n`;
    this.sse.push(textEvent(text, String(offset), bytes.byteLength));
  }

  /** A keep-alive comment (only while nothing is queued). */
  comment(text: string): void {
    this.sse.comment(text);
  }

  lag(): number {
    return this.sse.lag();
  }

  whenLagAtMost(bytes: number, resume: () => void): void {
    if (this.lag() <= bytes) resume();
    else this.waiting = { bytes, resume };
  }

  /**
   * Cut as a slow consumer (4008 for a socket): `event: cut` with the id to resume from, what
   * is queued dropped; a revoked key (4011): `event: revoked`, what is queued dropped. Any other close ends the stream once the client has taken what is queued.
   */
  close(code: number, reason = ""): void {
    if (code === CloseCode.SlowConsumer) this.sse.cut();
    // Its key was revoked: nothing queued goes out; `event: revoked` is the last event.
    else if (code === CloseCode.KeyRevoked) this.sse.finish(revokedEvent(reason));
    else this.sse.end();
  }

  /** A control event without an id: the resume point does not move. */
  private event(name: string, data: object): void {
    this.sse.push(textEvent(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`));
  }
}

/**
 * An output event's bytes, made once for every stream that takes them: the hub hands each
 * stream the same Uint8Array of a chunk (live output, and replays from the cache), so 31
 * streams cost one encoding and one copy, not 31 (docs/protocol.md §5b). An entry lives as long
 * as its chunk does (while a stream's queue or the replay cache holds it).
 */
const encoded = new WeakMap<Uint8Array, { id: string; bytes: Uint8Array }>();

function encodedOutput(event: "data" | "stderr", id: string, data: Uint8Array): Uint8Array {
  const known = encoded.get(data);
  // A chunk is delivered at one offset; the id check keeps that an assumption, not a risk.
  if (known?.id === id) return known.bytes;
  const bytes = encoder.encode(`event: ${event}\nid: ${id}\ndata: ${bytesToBase64(data)}\n\n`);
  encoded.set(data, { id, bytes });
  return bytes;
}
