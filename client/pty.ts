// One attached terminal: a framed WebSocket to `/v1/sessions/:id/connect` that reconnects by
// itself and resumes by offset, so every output byte reaches the caller exactly once, in order,
// and every typed byte reaches the process exactly once, in order. The Pty wires its parts, each
// owning its own state and hearing from the Pty only through callbacks: the socket and its
// redials (pty-socket.ts), where the output stands and what was acknowledged (pty-offsets.ts),
// what is typed and not yet written (pty-input.ts), and the iterators over the output
// (pty-chunks.ts); its REST-only calls are pty-calls.ts, its types pty-types.ts. Here: the
// socket's side of the public API, the control messages, and what a dropped socket means.
import { CloseCode, ErrorStatus } from "../shared/errors.js";
import type { ExitInfo, ServerMessage } from "../shared/protocol.js";
import { SIGNALS, type Session, type SignalName } from "../shared/session.js";
import { closeRefusal, isFatal, PtyBrokerError, statusOf } from "./errors.js";
import { PtyCalls } from "./pty-calls.js";
import { OutputChunks } from "./pty-chunks.js";
import { InputQueue } from "./pty-input.js";
import { OutputOffsets } from "./pty-offsets.js";
import { InflatingInbox, asArrayBuffer } from "./pty-inflate.js";
import { PtySocket } from "./pty-socket.js";
import type { ConnectionState, ConnectOptions, PtyTransport, SocketLike, SocketQuery } from "./pty-types.js";

export class Pty extends PtyCalls implements AsyncIterable<Uint8Array> {
  state: ConnectionState = "connecting";
  /** The exit, once the session has ended. */
  exitInfo: ExitInfo | undefined;

  private readonly socket: PtySocket;
  private readonly offsets: OutputOffsets;
  /** The socket's messages in order, 0x06 frames inflated (pty-inflate.ts). */
  private readonly inbox: InflatingInbox;
  private readonly chunks = new OutputChunks();
  /** What is typed, numbered, until the process has it (pty-input.ts). */
  private readonly typed: InputQueue;
  private userClosed = false;
  private started = false;
  private readonly ready: Promise<void>;
  private settleReady: ((error?: PtyBrokerError) => void) | undefined;
  /**
   * Messages that arrived after the first `hello`, held for one macrotask: `connect()` resolves
   * on `hello`, and the caller attaches its listeners in the continuation. Without this, frames
   * that came in the same read as `hello` (ws handles them in one synchronous loop) would be
   * emitted before anyone listens.
   */
  private held: unknown[] | null = null;
  /**
   * The edge refused the offset this terminal asked for (`INVALID_OFFSET`, docs/protocol.md §5,
   * "An offset past the end"): the close that follows ends the terminal with it, since asking
   * again from the same offset would only be refused again.
   */
  private refused: PtyBrokerError | undefined;

  constructor(
    id: string,
    transport: PtyTransport,
    /** A viewer token's terminal: input, resize and signal are refused. */
    readOnly: boolean,
    private readonly options: ConnectOptions = {},
  ) {
    super(id, transport, readOnly);
    if (options.onData) this.on("data", options.onData);
    if (options.onStdout) this.on("data", options.onStdout);
    if (options.onStderr) this.on("stderr", options.onStderr);
    if (options.onScreen) this.on("screen", options.onScreen);
    if (options.onState) this.on("state", options.onState);
    this.on("data", (bytes) => this.chunks.push(bytes));
    this.typed = new InputQueue(
      {
        send: (frame) => {
          if (!this.isOpen()) return false;
          this.socket.send(frame);
          return true;
        },
        changed: (pending) => this.emit("pending", pending),
      },
      options.inputQueueBytes,
    );
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => this.settleReady?.(new PtyBrokerError("NETWORK", `could not connect to session ${id}`)),
        options.connectTimeoutMs ?? 30_000,
      );
      this.settleReady = (error) => {
        clearTimeout(timer);
        this.settleReady = undefined;
        if (error) reject(error);
        else resolve();
      };
    });
    // A caller that only awaits `connected()` later must not see an unhandled rejection now.
    this.ready.catch(() => undefined);
    this.socket = new PtySocket(
      {
        isClosed: () => this.state === "closed",
        open: () => this.openSocket(),
        openFailed: (error) => this.failedAttempt(error),
        opened: (socket) => socket.send(JSON.stringify({ type: "ack", offset: this.offsets.opened() })),
        // Through the inbox: a 0x06 frame is inflated before what came after it is handed on.
        message: (data) => this.inbox.push(typeof data === "string" ? data : asArrayBuffer(data)),
        // What came before the close is handed on first (a frame may still be inflating).
        dropped: (code, reason, opened) => this.inbox.whenDrained(() => void this.dropped(code, reason, opened)),
      },
      options,
    );
    this.inbox = new InflatingInbox(
      (data) => {
        if (this.held) this.held.push(data);
        else this.receive(data);
      },
      // Dropped: the next frame's offset shows the hole as a gap.
      (error) => this.emit("error", new PtyBrokerError("INTERNAL", error.message)),
    );
    this.offsets = new OutputOffsets({
      output: (stream, bytes, offset) => this.emit(stream, bytes, offset),
      gap: (gap) => this.emit("gap", gap),
      screen: (screen) => {
        if (this.session) this.session = { ...this.session, cols: screen.cols, rows: screen.rows };
        this.emit("screen", screen);
      },
      ack: (offset) => {
        if (!this.isOpen()) return false;
        this.socket.send(JSON.stringify({ type: "ack", offset }));
        return true;
      },
      size: () => this.session,
    });
  }

  /** Offset of the next byte this terminal expects: where a later `connect({ from })` resumes. */
  get offset(): number {
    return this.offsets.next ?? 0;
  }

  /** Starts connecting; resolves once the first `hello` arrives, rejects if that cannot happen. */
  connected(): Promise<void> {
    if (!this.started) {
      this.started = true;
      this.emit("state", this.state); // `connecting`: an `onState` listener hears every state
      void this.socket.dial();
    }
    return this.ready;
  }

  /**
   * The network or the page is back (`online`, `visibilitychange`, `pageshow`): reconnecting, it
   * redials now, not after the backoff; open, it pings and redials unless answered within 2 s.
   */
  reconnectNow(): void {
    if (this.started) this.socket.nudge();
  }

  /**
   * Types keystrokes, in order after everything typed before, over the socket: kept while it is
   * down and sent again after a reconnect, written to the process exactly once (docs/protocol.md
   * §5, "Input exactly once"). Resolves once the process has them; rejects when they cannot get
   * there (the session ended, the terminal was closed) or, at once, when they would pass
   * `inputQueueBytes` not yet acknowledged (`QUOTA_EXCEEDED`, naming the bound). An agent that
   * needs the output offset its input landed at (an `expect`'s `from`) uses `input`.
   */
  sendInput(data: string | Uint8Array): Promise<void> {
    if (this.readOnly) return Promise.reject(this.viewerRefusal());
    return this.typed.push(typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  /** Bytes typed and not yet written to the process (a `pending` event says when it changes). */
  get pendingInput(): number {
    return this.typed.pending;
  }

  /** The most bytes typed and not yet written that this terminal keeps (`inputQueueBytes`). */
  get inputQueueBytes(): number {
    return this.typed.maxBytes;
  }

  /** The bytes typed and not yet written to the process, in order (to show them, as mosh does). */
  pendingInputBytes(): Uint8Array {
    return this.typed.pendingBytes();
  }

  /**
   * End of input: closes the process's stdin (`pty: false`) after what was typed before; on a
   * terminal it types Ctrl+D, as a person would. It waits until the typed input is written, then
   * goes as `{"type":"eof"}` on the socket (a refusal comes back as an `error` event), or as
   * `POST .../input {eof: true}`, whose refusal throws, while the socket is down. Input after it
   * is refused (`CONFLICT`) on a `pty: false` session.
   */
  async closeStdin(): Promise<void> {
    this.assertWritable();
    // Closed, the terminal keeps nothing typed: the eof goes by REST on its own.
    if (this.state !== "closed") await this.typed.delivered();
    if (this.isOpen()) this.socket.send(JSON.stringify({ type: "eof" }));
    else await this.transport.rest("POST", this.path("input"), { data: "", eof: true });
  }

  async resize(size: { cols: number; rows: number }): Promise<void> {
    this.assertWritable();
    const { cols, rows } = size;
    if (![cols, rows].every((n) => Number.isInteger(n) && n >= 1 && n <= 1000)) {
      throw new PtyBrokerError("INVALID_REQUEST", `cols and rows are integers 1..1000, got ${cols}×${rows}`);
    }
    if (this.isOpen()) this.socket.send(JSON.stringify({ type: "resize", cols, rows }));
    else await this.transport.rest("POST", this.path("resize"), { cols, rows });
  }

  async signal(signal: SignalName): Promise<void> {
    this.assertWritable();
    if (!(SIGNALS as readonly string[]).includes(signal)) {
      throw new PtyBrokerError("INVALID_REQUEST", `unknown signal ${signal}; one of ${SIGNALS.join(", ")}`);
    }
    if (this.isOpen()) this.socket.send(JSON.stringify({ type: "signal", signal }));
    else await this.transport.rest("POST", this.path("signal"), { signal });
  }

  /**
   * Resolves with the exit once the session has ended. Heard on the socket while attached;
   * after `close()`, asked of the API (`GET .../wait`) until the session ends.
   */
  async wait(): Promise<ExitInfo> {
    if (this.exitInfo) return this.exitInfo;
    if (this.state !== "closed") {
      const heard = await new Promise<ExitInfo | undefined>((resolve) => {
        const offExit = this.on("exit", (info) => done(info));
        const offState = this.on("state", (state) => state === "closed" && done(this.exitInfo));
        const done = (info: ExitInfo | undefined) => {
          offExit();
          offState();
          resolve(info);
        };
      });
      if (heard) return heard;
    }
    for (;;) {
      const session = await this.transport.rest<Session>("GET", `${this.path("wait")}?timeoutSec=60`, undefined, { holds: true });
      if (session.status === "exited" || session.status === "lost" || session.status === "failed") {
        const { status, exitCode, signal, reason, offset } = session;
        return { status, exitCode, signal, reason: reason ?? null, offset };
      }
    }
  }

  /** Detaches: the socket closes, the session keeps running. Final. */
  close(): void {
    if (this.state === "closed") return;
    this.userClosed = true;
    this.finish(new PtyBrokerError("CLOSED", "the terminal was closed"));
  }

  /**
   * Output chunks until the session ends or the terminal is closed. Output that arrived before
   * the first iterator started is kept for it (up to 4 MiB), so `for await` right after
   * `create` misses nothing.
   */
  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return this.chunks.iterate(() => this.state === "closed");
  }

  // ---- connection ----

  /** A socket to the session, asking for output from where it stands (the first time: `from`). */
  private openSocket(): Promise<SocketLike> {
    const first = this.options.from;
    const next = this.offsets.next;
    // "auto" is settled by PtyBroker.connect; one left here replays everything, which is never wrong.
    const from = next !== undefined ? String(next) : first === undefined || first === "auto" ? null : String(first);
    this.offsets.dialling();
    const query: SocketQuery = {
      from,
      onLag: this.options.onLag,
      compress: this.options.compress ?? "deflate",
      writer: this.readOnly ? undefined : this.typed.writer,
      inputFrom: this.readOnly ? undefined : this.typed.acknowledged,
    };
    return this.transport.openSocket(this.id, query);
  }

  private receive(data: unknown): void {
    if (typeof data === "string") {
      let message: ServerMessage;
      try {
        message = JSON.parse(data) as ServerMessage;
      } catch {
        return;
      }
      this.control(message);
      return;
    }
    this.offsets.frame(data as ArrayBuffer);
  }

  private control(message: ServerMessage): void {
    switch (message.type) {
      case "hello":
        this.session = message.session;
        this.socket.resetBackoff();
        if (this.settleReady) {
          this.held = [];
          setTimeout(() => this.releaseHeld(), 0);
        }
        this.setState("open");
        // What the edge knows the process has; the rest of what was typed goes (again) now.
        this.typed.opened(message.input?.acked ?? null);
        this.settleReady?.();
        break;
      case "input_ack":
        this.typed.ack(message.offset, message.resend === true);
        break;
      case "input_refused":
        this.typed.refused(message.offset, message.code, message.message, message.final === true);
        break;
      case "replay":
        this.offsets.replay(message.from);
        break;
      case "live":
        this.offsets.live(message.offset);
        this.emit("live", message.offset);
        break;
      case "gap":
        this.offsets.gap(message.from, message.to);
        break;
      case "resize":
        if (this.session) this.session = { ...this.session, cols: message.cols, rows: message.rows };
        this.emit("resize", { cols: message.cols, rows: message.rows });
        break;
      case "screen":
        this.offsets.screenComing({ offset: message.offset, cols: message.cols, rows: message.rows });
        break;
      case "command": {
        const { seq, command, exitCode, from, to } = message;
        this.emit("command", { seq, command, exitCode, from, to });
        break;
      }
      case "exit": {
        const info: ExitInfo = {
          status: message.status,
          exitCode: message.exitCode,
          signal: message.signal,
          reason: message.reason ?? null,
          offset: message.offset,
        };
        if (this.session) this.session = { ...this.session, ...info };
        if (!this.exitInfo) {
          this.exitInfo = info;
          this.typed.fail(new PtyBrokerError("SESSION_EXITED", `input not delivered: the session has ${info.status}`, statusOf("SESSION_EXITED")));
          this.emit("exit", info);
        }
        break;
      }
      case "error":
        if (message.code === "INVALID_OFFSET") {
          this.refused = new PtyBrokerError("INVALID_OFFSET", message.message, ErrorStatus.INVALID_OFFSET);
          break;
        }
        this.emit("error", new PtyBrokerError(message.code as PtyBrokerError["code"], message.message, statusOf(message.code)));
        break;
      case "pong":
        break;
    }
  }

  private releaseHeld(): void {
    const held = this.held;
    this.held = null;
    if (this.userClosed) return;
    for (const data of held ?? []) this.receive(data);
  }

  private async dropped(code: number, reason: string, opened: boolean): Promise<void> {
    this.releaseHeld(); // what came before the close, in order
    this.socket.forget();
    this.typed.disconnected();
    if (this.state === "closed") return;
    if (this.exitInfo || code === CloseCode.SessionEnded) return this.finish();
    if (this.refused) return this.finish(this.refused);
    const fatal = closeRefusal(code, reason);
    if (fatal) return this.finish(fatal);
    if (!opened) {
      // A refused upgrade looks like any dropped socket in a browser: ask the API why.
      try {
        await this.transport.rest("GET", `/v1/sessions/${encodeURIComponent(this.id)}`);
      } catch (error) {
        if (isFatal(error)) return this.finish(error);
      }
    }
    this.retry();
  }

  private failedAttempt(error: unknown): void {
    if (isFatal(error)) this.finish(error);
    else this.retry();
  }

  private retry(): void {
    if (this.state === "closed") return;
    this.setState(this.session ? "reconnecting" : "connecting");
    this.socket.redialLater();
  }

  private finish(error?: PtyBrokerError): void {
    if (this.state === "closed") return;
    this.socket.close();
    this.typed.fail(error ?? new PtyBrokerError("CLOSED", "input not delivered: the terminal was closed"));
    this.setState("closed");
    if (error && !this.userClosed) this.emit("error", error);
    this.settleReady?.(error ?? new PtyBrokerError("CLOSED", "the session ended before it could be attached"));
    this.chunks.push(null);
  }

  private setState(state: ConnectionState): void {
    if (state === this.state) return;
    this.state = state;
    this.emit("state", state);
  }

  private isOpen(): boolean {
    return this.state === "open" && this.socket.isOpen();
  }

}

