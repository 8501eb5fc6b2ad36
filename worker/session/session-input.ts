// What goes into a session's process, and who may send it: REST input (with Idempotency-Key),
// clients' input frames, eof, signals and resizes. Each is checked against the caller's role,
// the session's state (running, linked, a terminal or pipes, stdin still open) and the runner's
// input bound, then sent on the host link. Owns nothing but the size policy; the rest it asks of
// its session through the port.
import { type Failure, fail } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { EdgeLinkMessage, ServerMessage } from "../../shared/protocol.js";
import { type SessionStatus, type SignalName, isTerminal } from "../../shared/session.js";
import type { IdempotencyKeys } from "../agent/idempotency.js";
import type { SizePolicy } from "./size-policy.js";
import type { SocketSubscriber, TermSize } from "../clients/subscribers.js";
import type { InputPiece } from "../link/input-ledger.js";
import type { InputAnswer } from "../rpc.js";

/**
 * The largest raw input frame (a paste) the edge takes, written to the process in pieces of
 * MAX_INPUT_BYTES. workerd's own WebSocket message limit is larger; a frame beyond this closes
 * the raw client's socket with 1009 ("message too big") and says so in the reason.
 */
export const MAX_RAW_INPUT_FRAME_BYTES = 1 << 20;

/** Writers whose acknowledged offset the edge remembers for their `hello`; the runner keeps the truth. */
const MAX_WRITERS_KNOWN = 1024;

export class SessionInput {
  /**
   * Each writer's acknowledged offset as the runner last said it: for a reconnecting writer's
   * `hello`, and to drop a resend of what is written already. In memory only (gone when the
   * object sleeps or restarts): the runner's count decides what is written (docs/protocol.md §5).
   */
  private readonly writersAcked = new Map<string, number>();

  constructor(
    private readonly port: InputPort,
    private readonly sizes: SizePolicy,
    private readonly idempotency: IdempotencyKeys<InputAnswer>,
  ) {}

  /**
   * REST input. `offset` is where the output stood when the input was taken: whatever it causes
   * comes at or after it. With an Idempotency-Key seen in the last 10 minutes, the input is not
   * sent again and the first answer is given (agent/idempotency.ts). `eof` closes stdin after it.
   */
  rest(bytes: Uint8Array, idempotency: { key: string; bodyHash: string } | undefined, eof: boolean): InputAnswer | Failure {
    const now = Date.now();
    if (idempotency) {
      const seen = this.idempotency.recall(idempotency.key, idempotency.bodyHash, now);
      if (seen) return "failure" in seen ? seen : seen.answer;
    }
    const refused = this.refuseUnlessRunning() ?? this.refuseStdinClosed() ?? this.refuseWhileFull();
    if (refused) return refused;
    const answer: InputAnswer = { bytes: bytes.byteLength, offset: this.port.offset() };
    this.write({ bytes });
    if (eof) this.eof();
    this.port.noteActivity(now);
    if (idempotency) this.idempotency.remember(idempotency.key, idempotency.bodyHash, answer, now);
    return answer;
  }

  /** REST resize (owner or writer): always applies, on a terminal. */
  resize(cols: number, rows: number): Failure | undefined {
    const refused = this.refuseUnlessRunning() ?? this.refuseUnlessTty();
    if (refused) return refused;
    this.port.applyResize(cols, rows);
    return undefined;
  }

  signal(signal: SignalName): Failure | undefined {
    const refused = this.refuseUnlessRunning();
    if (refused) return refused;
    this.port.send({ type: "signal", signal });
    return undefined;
  }

  /**
   * Input from a client socket: checked per frame against its role, the size and the runner's
   * input bound. A framed client's frame is at most MAX_INPUT_BYTES (else PAYLOAD_TOO_LARGE); a
   * raw client's (a paste, which it cannot split or hear refused) is written in pieces of at
   * most MAX_INPUT_BYTES, up to MAX_RAW_INPUT_FRAME_BYTES; beyond, the socket is closed with 1009.
   */
  fromClient(sub: SocketSubscriber, bytes: Uint8Array): void {
    this.clientInput(sub, { bytes });
  }

  /**
   * A writer's numbered input (0x07): its bytes from `offset` of its own input. Refused, it is
   * answered `input_refused` and stays the client's to send again; taken, it goes to the runner
   * with the writer's key, which writes each byte once and acknowledges it (docs/protocol.md §5,
   * "Input exactly once"). What the runner has acknowledged already is dropped here.
   */
  fromWriter(sub: SocketSubscriber, offset: number, bytes: Uint8Array): void {
    const writer = sub.writer;
    // Not a writer (a viewer has none): refused as any frame it may not send.
    if (!writer) {
      const refused = sub.readOnly
        ? fail("FORBIDDEN", "a viewer may not send input, resize, signal or eof")
        : fail("INVALID_REQUEST", "numbered input (0x07) needs a writer: connect with ?writer=");
      return sub.control({ type: "error", ...refused.failure });
    }
    const acked = this.writersAcked.get(writer.key);
    const end = offset + bytes.byteLength;
    if (acked !== undefined && end <= acked) return sub.control({ type: "input_ack", offset: acked });
    if (offset < writer.base) {
      const message = `input at ${offset} is below ${writer.base}, which this socket said was acknowledged`;
      return sub.control({ type: "input_refused", offset, code: "INVALID_REQUEST", message });
    }
    const skip = acked !== undefined && offset < acked ? acked - offset : 0;
    this.clientInput(sub, { bytes: bytes.subarray(skip), writer: { key: writer.key, offset: offset + skip, base: writer.base } });
  }

  /** The runner wrote writers' input (runner/flow/writer-input.ts): each writer's sockets hear it. */
  acked(acks: { writer: string; offset: number; resend?: true | undefined }[]): void {
    for (const { writer, offset, resend } of acks) {
      // A resend ask is no acknowledgement (the runner may not have written up to there yet).
      if (!resend) {
        const known = this.writersAcked.get(writer);
        this.writersAcked.delete(writer); // re-inserted last: the most recently heard of
        this.writersAcked.set(writer, Math.max(known ?? 0, offset));
      }
      this.port.tellWriter(writer, { type: "input_ack", offset, ...(resend ? { resend } : {}) });
    }
    while (this.writersAcked.size > MAX_WRITERS_KNOWN) {
      const oldest = this.writersAcked.keys().next().value;
      if (oldest === undefined) break;
      this.writersAcked.delete(oldest);
    }
  }

  /** A writer's acknowledged offset as far as the edge knows now (null: not known here). */
  writerAcked(key: string): number | null {
    return this.writersAcked.get(key) ?? null;
  }

  private clientInput(sub: SocketSubscriber, piece: InputPiece): void {
    const { bytes } = piece;
    const max = this.port.maxInputBytes();
    if (sub.kind === "raw" && bytes.byteLength > MAX_RAW_INPUT_FRAME_BYTES) {
      log.warn("client.input", { key: this.port.keyForLog(), outcome: "raw_frame_too_large", bytes: bytes.byteLength });
      return sub.close(1009, `input frame is ${bytes.byteLength} bytes; at most ${MAX_RAW_INPUT_FRAME_BYTES}`);
    }
    const stdinClosed = this.refuseStdinClosed();
    const refused =
      sub.kind !== "raw" && bytes.byteLength > max
        ? fail("PAYLOAD_TOO_LARGE", `input frame is ${bytes.byteLength} bytes; at most ${max}`)
        : (this.refuseClient(sub) ?? stdinClosed ?? this.refuseWhileFull());
    // A raw client hears no error message: input it cannot deliver ends its socket instead.
    if (refused && sub.kind === "raw" && refused.failure.code === "QUOTA_EXCEEDED") {
      return sub.close(1013, "input refused: the process is not reading its input");
    }
    if (refused && piece.writer) {
      const { code, message } = refused.failure;
      const final = refused === stdinClosed ? { final: true as const } : {};
      return sub.control({ type: "input_refused", offset: piece.writer.offset, code, message, ...final });
    }
    if (refused) return sub.control({ type: "error", ...refused.failure });
    // The size follows whoever typed last: this client's window, if it differs, applies first.
    const wanted = this.sizes.typed(sub);
    const size = this.port.size();
    if (wanted && size && this.port.isTty() && (wanted.cols !== size.cols || wanted.rows !== size.rows)) {
      this.port.applyResize(wanted.cols, wanted.rows);
    }
    this.write(piece);
    this.port.noteActivity(Date.now());
  }

  /**
   * A client's `resize` (size-policy.ts): applied when it comes from the client that typed last
   * (or nobody connected has typed), else remembered for when that client types, and answered,
   * to it alone, with the size the session keeps. A viewer's is refused, and so is any on pipes.
   */
  clientResize(sub: SocketSubscriber, cols: number, rows: number): void {
    const refused = this.refuseClient(sub) ?? this.refuseUnlessTty();
    if (refused) return sub.control({ type: "error", ...refused.failure });
    if (this.sizes.requested(sub, { cols, rows })) return this.port.applyResize(cols, rows);
    const size = this.port.size();
    if (size) sub.control({ type: "resize", cols: size.cols, rows: size.rows });
  }

  clientSignal(sub: SocketSubscriber, signal: SignalName): void {
    const refused = this.refuseClient(sub);
    if (refused) return sub.control({ type: "error", ...refused.failure });
    this.port.send({ type: "signal", signal });
  }

  clientEof(sub: SocketSubscriber): void {
    const refused = this.refuseClient(sub) ?? this.refuseStdinClosed();
    if (refused) return sub.control({ type: "error", ...refused.failure });
    this.eof();
  }

  /** Sizes, screens and shells belong to a terminal; a `pty: false` session has none. */
  refuseUnlessTty(): Failure | undefined {
    return this.port.isTty() ? undefined : fail("NOT_A_TTY", "this session has no terminal (pty: false)");
  }

  /** Input can reach the process: it runs, and its runner's link is open. */
  refuseUnlessRunning(): Failure | undefined {
    const status = this.port.status();
    if (!status) return fail("NOT_FOUND", "session not found");
    if (isTerminal(status)) return fail("SESSION_EXITED", `session has ${status}`);
    if (!this.port.hasHost()) return fail("CONFLICT", "session is not connected to a runner right now");
    return undefined;
  }

  /** The process has not taken the input it has (the runner's bound): refuse more for now. */
  refuseWhileFull(): Failure | undefined {
    if (!this.port.inputRefused()) return undefined;
    return fail("QUOTA_EXCEEDED", "the process is not reading its input; try again when it has taken it", 1);
  }

  /** Input, resize, signal and eof from a client: checked per message, not per connection. */
  private refuseClient(sub: SocketSubscriber): Failure | undefined {
    if (sub.readOnly) return fail("FORBIDDEN", "a viewer may not send input, resize, signal or eof");
    return this.refuseUnlessRunning();
  }

  /** `pty: false`: after eof there is no stdin to write to. */
  private refuseStdinClosed(): Failure | undefined {
    if (this.port.isTty() || !this.port.stdinClosed()) return undefined;
    return fail("CONFLICT", "stdin is closed: eof was sent");
  }

  /** Input frames of at most MAX_INPUT_BYTES each, in order on the host link (a writer's with their offsets). */
  private write({ bytes, writer }: InputPiece): void {
    const max = this.port.maxInputBytes();
    for (let at = 0; at < bytes.byteLength; at += max) {
      const piece = bytes.slice(at, at + max);
      this.port.sendInput(writer ? { bytes: piece, writer: { ...writer, offset: writer.offset + at } } : { bytes: piece });
    }
  }

  /** Closes the process's stdin after the input sent before it (a terminal gets Ctrl+D instead). */
  private eof(): void {
    this.port.sendEof();
    if (!this.port.isTty()) this.port.closeStdin();
  }
}

// ---- Shared types ----

/** What the input side needs from its session; callbacks, so it never holds the session object. */
export interface InputPort {
  status(): SessionStatus | undefined;
  /** The process has a terminal (not `pty: false`). */
  isTty(): boolean;
  stdinClosed(): boolean;
  closeStdin(): void;
  size(): TermSize | undefined;
  /** The output offset now. */
  offset(): number;
  hasHost(): boolean;
  /** The runner said the process is not taking its input. */
  inputRefused(): boolean;
  /** Input on the host link (runner-links.ts keeps it until the runner has it). */
  sendInput(piece: InputPiece): void;
  /** A message for every open socket of one writer. */
  tellWriter(key: string, message: ServerMessage): void;
  /** The end of stdin, after the input sent before it (runner-links.ts). */
  sendEof(): void;
  send(message: EdgeLinkMessage): void;
  applyResize(cols: number, rows: number): void;
  noteActivity(now: number): void;
  maxInputBytes(): number;
  keyForLog(): string | null;
}
