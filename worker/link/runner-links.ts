// A session's runner links (docs/security.md, docs/protocol.md §7): the host link, over which
// the runner that hosts the process sends output and status and receives input, and reader links
// that only answer log reads. Owns who may open them (the link tokens), which link is current,
// the exactness rule at the edge (no forward jumps), the acks and their storage syncs, and the
// runner's input state. The session object wires it with a LinkPort of callbacks.
import { CloseCode } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import {
  type EdgeLinkMessage,
  PING_TEXT,
  PONG_TEXT,
  MAX_LINK_MESSAGE_BYTES,
  type OutputStream,
  RunnerLinkMessage,
  decodeFrame,
  encodeInput,
  encodeWriterInput,
  parseMessage,
} from "../../shared/protocol.js";
import { runnerFromHeaders, secretsEqual } from "../auth/auth.js";
import { type InputPiece, InputLedger } from "./input-ledger.js";
import type { LinkCalls } from "./link-calls.js";
import type { LogReads } from "./log-reads.js";
import { closeQuietly, sendQuietly } from "../io/sockets.js";

const Tag = { Host: "link", Reader: "reader" } as const;

/**
 * The id of the empty log read the edge sends after `resume` on a host link whose resend it
 * waits for: its `read_end` comes after every chunk the runner sends again (log reads count ids
 * from 1).
 */
const RESEND_MARK_ID = 0;

/** Output acknowledged to the runner at the latest after this many bytes or this delay. */
const ACK_BYTES = 256 << 10;
const ACK_DELAY_MS = 250;

export class RunnerLinks {
  /** When the host link last sent a frame (0 after a wake-up: not known yet). */
  private lastActivity = 0;
  /** A storage sync for an ack is in flight; the offset it was started for; the next one's timer. */
  private syncing = false;
  private ackRequested = 0;
  private ackTimer: ReturnType<typeof setTimeout> | undefined;
  /** The runner says input waiting for the process is past its bound. */
  private inputFull = false;
  /** Input sent on host links, kept until the runner has said it took it (input-ledger.ts). */
  private input = new InputLedger();
  /**
   * The link token (one per incarnation) whose process the ledger counts for: a purged id
   * created again is another process, which must never be sent the old one's input.
   */
  private inputFor: string | undefined;
  /** An eof came while a new link waited for the runner's count: it follows the held input. */
  private eofHeld = false;
  /**
   * Whether the edge's offset is known to hold every byte it ever fanned out (offsetExact).
   * Woken with its host link open, the object was hibernating, which it does only with its
   * offset stored (no ack pending); woken without one, it may have restarted with output past
   * its stored offset, until a host link has resent it.
   */
  private exact: boolean;

  constructor(
    private readonly ctx: DurableObjectState,
    private readonly reads: LogReads,
    private readonly calls: LinkCalls,
    private readonly port: LinkPort,
  ) {
    this.exact = this.host() !== undefined;
  }

  /**
   * Whether no client can hold an offset past the edge's (docs/protocol.md §5, "An offset past
   * the end"): this object has lost no output it fanned out, or a host link has since sent it
   * again.
   */
  get offsetExact(): boolean {
    return this.exact;
  }

  /**
   * A runner's link. The host link needs this session's link token (given only to the runner
   * the session was placed on) and, from a runner with a credential, that runner's id; a
   * reader link needs the reader token. Anything else is refused, and never replaces a link.
   */
  async accept(reader: boolean, headers: Headers, credentials: LinkCredentials, ended: boolean): Promise<Response> {
    const runner = runnerFromHeaders(headers);
    const expected = reader ? credentials.readerToken : credentials.linkToken;
    const presented = headers.get("x-link-token") ?? "";
    const misplaced = !reader && runner.verified && runner.runnerId !== credentials.runnerId;
    if (!(await secretsEqual(presented, expected)) || misplaced) {
      log.warn("link.refused", { key: this.port.keyForLog(), reader, runnerId: runner.runnerId, misplaced });
      return new Response("this link credential is not this session's", { status: 403 });
    }
    if (!reader && ended) return new Response("session has ended", { status: 409 });
    const { 0: runnerSide, 1: server } = new WebSocketPair();
    if (reader) {
      this.ctx.acceptWebSocket(server, [Tag.Reader]);
    } else {
      for (const old of this.ctx.getWebSockets(Tag.Host)) closeQuietly(old, 1000, "replaced by a new link");
      this.ctx.acceptWebSocket(server, [Tag.Host]);
      this.lastActivity = Date.now();
      if (credentials.linkToken !== this.inputFor) {
        this.input = new InputLedger();
        this.eofHeld = false;
        this.inputFor = credentials.linkToken;
      }
      this.input.linkOpened();
      this.port.hostLinked();
      const offset = this.port.offset();
      sendQuietly(server, JSON.stringify({ type: "resume", offset } satisfies EdgeLinkMessage));
      // The runner sends again everything from `offset` as it takes `resume`, before it reads the
      // next message: the answer to this empty read comes after all of it (resendDone).
      if (!this.exact) {
        const mark: EdgeLinkMessage = { type: "read", id: RESEND_MARK_ID, from: offset, to: offset };
        sendQuietly(server, JSON.stringify(mark));
      }
    }
    this.reads.linkOpened(server);
    if (reader) this.calls.readerOpened(server);
    return new Response(null, { status: 101, webSocket: runnerSide });
  }

  /** Whether `ws` is one of this session's runner links (host or reader). */
  owns(ws: WebSocket): boolean {
    const tags = this.ctx.getTags(ws);
    return tags.includes(Tag.Host) || tags.includes(Tag.Reader);
  }

  /** The open host link, if any. */
  host(): WebSocket | undefined {
    return this.ctx.getWebSockets(Tag.Host).find((ws) => ws.readyState === WebSocket.OPEN);
  }

  /** An open reader link, if any. */
  reader(): WebSocket | undefined {
    return this.ctx.getWebSockets(Tag.Reader).find((ws) => ws.readyState === WebSocket.OPEN);
  }

  /** An open link that can serve log reads: the host's, else a reader's. */
  forReads(): WebSocket | undefined {
    return this.host() ?? this.reader();
  }

  send(message: EdgeLinkMessage): void {
    const link = this.host();
    if (link) sendQuietly(link, JSON.stringify(message));
  }

  /**
   * Input for the process (at most MAX_INPUT_BYTES), on the host link; kept so that a link that
   * dies with it can be made whole, and held while a new link waits for the runner's count.
   */
  sendInput(piece: InputPiece): void {
    const now = this.input.input(piece);
    if (now !== "held") this.sendPiece(now);
  }

  /** A 0x02 frame, or a writer's numbered 0x08 frame (docs/protocol.md §7, "Input exactly once"). */
  private sendPiece(piece: InputPiece): void {
    const link = this.host();
    if (!link) return;
    const { writer } = piece;
    sendQuietly(link, writer ? encodeWriterInput(writer.key, writer.offset, writer.base, piece.bytes) : encodeInput(piece.bytes));
  }

  /**
   * The runner's count of input taken, after a `resume`: what a dead link lost is sent again,
   * then what waited, then the stdin's end if the runner missed it (docs/protocol.md §7).
   */
  private runnerTook(taken: number | undefined, eof: boolean | undefined): void {
    const { resend, lost, held } = this.input.runnerTook(taken);
    for (const piece of [...resend, ...held]) this.sendPiece(piece);
    const resent = resend.reduce((sum, piece) => sum + piece.bytes.byteLength, 0);
    if (resent > 0 || lost > 0) log.warn("link.input", { key: this.port.keyForLog(), outcome: lost > 0 ? "lost" : "resent", resent, lost });
    // Once: an eof that waited behind held input, or one a dead link lost (pipes).
    if (this.eofHeld || (eof === false && this.port.stdinClosed())) this.send({ type: "eof" });
    this.eofHeld = false;
  }

  /** The end of stdin (a terminal: Ctrl+D), after the input before it: it waits with held input. */
  sendEof(): void {
    if (this.input.waiting) this.eofHeld = true;
    else this.send({ type: "eof" });
  }

  /** Whether the runner has said that the process is not taking its input, or a new link holds enough of it. */
  get inputRefused(): boolean {
    return this.inputFull || this.input.full;
  }

  /** The session ended: its host links close (the runner confirms the exit by that). */
  closeHost(): void {
    for (const link of this.ctx.getWebSockets(Tag.Host)) closeQuietly(link, CloseCode.SessionEnded, "session ended");
  }

  /**
   * How long the host link has been silent (no frame, no heartbeat), or null when it was heard
   * within `limitMs`, or "none" when there is no host link. A link not heard since this object
   * woke (and with no heartbeat answered while it slept) counts as silent since forever: this
   * is asked only when its runner's control socket has gone silent too.
   */
  silentFor(now: number, limitMs: number): { link: WebSocket; silentMs: number } | null | "none" {
    const link = this.host();
    if (!link) return "none";
    const heard = Math.max(this.lastActivity, this.ctx.getWebSocketAutoResponseTimestamp(link)?.getTime() ?? 0);
    return now - heard > limitMs ? { link, silentMs: now - heard } : null;
  }

  async onClose(ws: WebSocket, code: number): Promise<void> {
    this.reads.linkClosed(ws);
    this.calls.linkClosed(ws);
    if (!this.ctx.getTags(ws).includes(Tag.Host)) return;
    const otherLink = this.ctx.getWebSockets(Tag.Host).some((w) => w !== ws && w.readyState === WebSocket.OPEN);
    if (!otherLink) await this.port.hostGone(code);
  }

  async onMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    const isHost = this.ctx.getTags(ws).includes(Tag.Host);
    // Only the current host link speaks for the process: a replaced link's late frames are ignored.
    const host = isHost && ws === this.host();
    if (isHost && !host) return log.warn("link.message", { key: this.port.keyForLog(), outcome: "stale_link" });
    if (host) this.lastActivity = Date.now();
    if (typeof message !== "string") {
      const frame = decodeFrame(new Uint8Array(message));
      if (frame.op === "readChunk") return this.reads.chunk(ws, frame.readId, frame.offset, frame.data, frame.meta);
      if ((frame.op === "output" || frame.op === "stderr") && host) {
        return this.onOutput(ws, frame.offset, frame.data, frame.op === "stderr" ? "stderr" : "stdout", message);
      }
      log.warn("link.frame", { key: this.port.keyForLog(), outcome: frame.op === "invalid" ? frame.reason : "bad_op" });
      return;
    }
    if (message === PING_TEXT) return sendQuietly(ws, PONG_TEXT);
    const parsed = parseMessage(RunnerLinkMessage, message, MAX_LINK_MESSAGE_BYTES);
    if (!parsed.ok) return log.warn("link.message", { key: this.port.keyForLog(), outcome: "invalid", reason: parsed.reason });
    const msg = parsed.value;
    switch (msg.type) {
      case "read_gap":
        return this.reads.gap(ws, msg.id, msg.from, msg.to);
      case "read_end":
        if (msg.id === RESEND_MARK_ID) return this.resendDone(ws);
        return this.reads.end(ws, msg.id, msg.to, msg.error);
      case "log_reset":
        return this.port.logMaybeLost();
      case "ping":
        return;
      case "screen_result":
      case "run_result":
      case "call_failed":
        return this.calls.answered(ws, msg);
    }
    if (!host) return log.warn("link.message", { key: this.port.keyForLog(), outcome: "reader_sent", type: msg.type });
    switch (msg.type) {
      case "input_state":
        if (msg.taken !== undefined || this.input.waiting) this.runnerTook(msg.taken, msg.eof);
        if (msg.full === this.inputFull) return;
        this.inputFull = msg.full;
        return log.info("session.input", { key: this.port.keyForLog(), outcome: msg.full ? "full" : "drained" });
      case "input_ack":
        return this.port.inputAcked(msg.acks);
      default:
        return this.port.hostSaid(msg);
    }
  }

  /** The host link has sent again what the edge lacked: its offset is exact from now on. */
  private resendDone(link: WebSocket): void {
    if (this.exact || link !== this.host()) return;
    this.exact = true;
    log.info("link.resent", { key: this.port.keyForLog(), offset: this.port.offset(), outcome: "offset_exact" });
    this.port.offsetExact();
  }

  /** Output from the host: never past a hole; what the edge has already is dropped. */
  private onOutput(link: WebSocket, offset: number, data: Uint8Array, stream: OutputStream, frame: ArrayBuffer): void {
    const current = this.port.offset();
    const end = offset + data.byteLength;
    if (end <= current) {
      // Sent again after a reconnect: already taken (acknowledged once that is durable).
      this.ackWhenDurable();
      return;
    }
    if (offset > current) {
      // A hole: bytes before `offset` never arrived. Never accept it; a new link resumes from
      // the edge's offset, and the runner sends again everything from there.
      log.warn("link.frame", { key: this.port.keyForLog(), outcome: "offset_gap", expected: current, got: offset });
      closeQuietly(link, CloseCode.Resync, "output skipped ahead: reconnect and resume");
      return;
    }
    if (offset < current) this.port.output(current, data.subarray(current - offset), stream, undefined);
    else this.port.output(offset, data, stream, frame);
    this.ackSoon();
  }

  /**
   * Acknowledges new output soon rather than at once: each ack waits for a storage sync, and a
   * sync per chunk across hundreds of busy sessions is a flood of fsyncs (measured under wrangler
   * dev: 300 sessions printing ten times a second stalled workerd, links and all, for 25 s).
   * An ack goes out once ACK_BYTES are unacknowledged or ACK_DELAY_MS after the first of them,
   * well inside the runner's flow-control window (FLOW_HIGH_WATER, 1 MiB).
   */
  private ackSoon(): void {
    if (this.port.offset() - this.ackRequested >= ACK_BYTES) return this.ackWhenDurable();
    this.ackTimer ??= setTimeout(() => this.ackWhenDurable(), ACK_DELAY_MS);
  }

  /**
   * Stores the offset and acknowledges it to the runner once that is durable; one sync at a
   * time. The ack goes to the host link open when the sync ends, which may be a newer one than
   * the frame's.
   */
  private ackWhenDurable(): void {
    if (this.ackTimer) clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    if (this.syncing) return;
    this.syncing = true;
    const target = this.port.storeOffset();
    this.ackRequested = target;
    this.ctx.storage.sync().then(
      () => {
        this.syncing = false;
        this.send({ type: "ack", offset: target });
        if (this.port.offset() > target) this.ackSoon();
      },
      (error: unknown) => {
        this.syncing = false;
        log.error("storage.sync", { key: this.port.keyForLog(), error: String(error) });
      },
    );
  }
}

// ---- Shared types ----

/** What the links need from their session; callbacks, so they never hold the session object. */
export interface LinkPort {
  /** Offset of the next output byte the edge expects. */
  offset(): number;
  /** Output at `offset` (exactly where the edge stands): fan it out and move the offset on. */
  output(offset: number, data: Uint8Array, stream: OutputStream, frame: ArrayBuffer | undefined): void;
  /** Writes the current offset to storage (made durable by the sync that follows); returns it. */
  storeOffset(): number;
  /** Status and log news from the host, other than input state (handled here). */
  hostSaid(
    message: Exclude<
      RunnerLinkMessage,
      {
        type: "read_gap" | "read_end" | "log_reset" | "ping" | "input_state" | "input_ack" | "screen_result" | "run_result" | "call_failed";
      }
    >,
  ): Promise<void> | void;
  /** The runner wrote writers' numbered input up to these offsets (session-input.ts tells them). */
  inputAcked(acks: { writer: string; offset: number; resend?: true | undefined }[]): void;
  /** The output log may have lost data: drop copies of it. */
  logMaybeLost(): void;
  /** The edge's offset has become exact (a host link resent what it lacked after a restart). */
  offsetExact(): void;
  /** A host link opened (a grace that was running ends). */
  hostLinked(): void;
  /** `pty: false`: a client sent eof (the runner is told again if a dead link lost it). */
  stdinClosed(): boolean;
  /** The host link closed and no other is open. */
  hostGone(code: number): Promise<void>;
  keyForLog(): string | null;
}

/** What a link must present: the session's tokens and the runner it was placed on. */
export interface LinkCredentials {
  linkToken: string;
  readerToken: string;
  runnerId?: string | null;
}
