// One attached terminal: a framed WebSocket to `/v1/sessions/:id/connect` that reconnects by
// itself and resumes by offset, so every output byte reaches the caller exactly once, in order.
import type { CommandRecord, ExpectResult, RunResult, ScreenState } from "../shared/agent.js";
import { backoffDelay } from "../shared/backoff.js";
import { bytesToBase64 } from "../shared/base64.js";
import { CloseCode } from "../shared/errors.js";
import { decodeFrame, encodeInput, type ExitInfo, PING_TEXT, type ServerMessage } from "../shared/protocol.js";
import { SIGNALS, type Session, type SignalName } from "../shared/session.js";
import type {
  AgentCalls,
  CommandEvent,
  ExpectOptions,
  InputOptions,
  InputResult,
  RunOptions,
  ScreenRepaint,
} from "./agent.js";
import { Emitter } from "./emitter.js";
import { PtyBrokerError } from "./errors.js";

/** `connecting` (first attempt) → `open` ⇄ `reconnecting` → `closed` (final). */
export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

export interface PtyEvents extends Record<string, unknown[]> {
  /** Output bytes (the terminal's, or stdout with `pty: false`), each exactly once and in order; `offset` is the first byte's offset. */
  data: [bytes: Uint8Array, offset: number];
  /** stderr bytes of a `pty: false` session, in the same offset space as `data`. */
  stderr: [bytes: Uint8Array, offset: number];
  state: [state: ConnectionState];
  /** Output in [from, to) is gone from the log (trimmed by retention) and will never arrive. */
  gap: [gap: { from: number; to: number }];
  /** Replay has caught up: bytes from `offset` on are live. */
  live: [offset: number];
  resize: [size: { cols: number; rows: number }];
  /**
   * The screen as it is at `offset` (`from: "screen"`, or a skip with `onLag: "screen"`): reset
   * the terminal and write `data` into it; output (`data` events) continues at `offset`. The
   * repaint takes no offsets and is not output: it never comes as a `data` event.
   */
  screen: [screen: ScreenRepaint];
  /** A shell command ended (shell integration, DESIGN §10). */
  command: [command: CommandEvent];
  exit: [info: ExitInfo];
  error: [error: PtyBrokerError];
}

export type DataListener = (bytes: Uint8Array, offset: number) => void;

export interface ConnectOptions {
  /**
   * Where output starts on the first connection: an offset, `"live"` for no replay,
   * `"screen"` for the current screen (a `screen` event) and output from its offset on,
   * `"auto"` for the screen when the retained history is over 256 KiB and everything otherwise
   * (`PtyBroker.connect` asks the session first), or omitted for everything retained.
   * Reconnects always resume by offset.
   */
  from?: number | "live" | "screen" | "auto" | undefined;
  /**
   * Falling more than the edge's `MAX_CLIENT_LAG_BYTES` behind: `"cut"` (the default) closes the
   * socket, and the SDK resumes by offset, missing nothing; `"screen"` skips ahead instead: a
   * `gap` event for what is skipped, then a `screen` event, then live output.
   */
  onLag?: "cut" | "screen" | undefined;
  onData?: DataListener | undefined;
  /** `pty: false`: stdout (the same as `onData`). */
  onStdout?: DataListener | undefined;
  /** `pty: false`: stderr (`stderr` events). */
  onStderr?: DataListener | undefined;
  /** Listens to `screen` events from the start (see `PtyEvents.screen`). */
  onScreen?: ((screen: ScreenRepaint) => void) | undefined;
  /** Reconnect backoff: exponential from `baseMs` to `maxMs`, with jitter. */
  reconnect?: { baseMs?: number | undefined; maxMs?: number | undefined } | undefined;
  /** Ping interval; a socket silent for two intervals is given up and redialled. Default 5 s. */
  heartbeatMs?: number | undefined;
  /** Give up connecting (reject) when the first connection is not up after this. Default 30 s. */
  connectTimeoutMs?: number | undefined;
}

/** What `update()` may change (`PATCH /v1/sessions/:id`); at least one field. */
export interface SessionPatch {
  /** The most the session may live from now, in seconds (0: no limit); sets `expiresAt`. */
  timeoutSec?: number | undefined;
  /** End it after this many seconds without input or output (0: never). */
  idleTimeoutSec?: number | undefined;
  /** End it after this many seconds with no client attached (0: never). */
  detachedTimeoutSec?: number | undefined;
  label?: string | null | undefined;
  tags?: string[] | undefined;
}

/** What a WebSocket must offer: the browser's API, which `ws` implements too. */
export interface SocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** The connect URL's query: `from` (null: everything retained) and `onLag`. */
export interface SocketQuery {
  from: string | null;
  onLag?: "cut" | "screen" | undefined;
}

/** What a Pty needs from its broker: sockets, and the REST calls it falls back on. */
export interface PtyTransport {
  /** Opens a socket to the session's connect URL. */
  openSocket(id: string, query: SocketQuery): Promise<SocketLike>;
  rest<T>(method: string, path: string, body?: unknown): Promise<T>;
  /** The agent layer's calls for this session. */
  calls: AgentCalls;
  /** `GET .../recording` as text. */
  recording(id: string, range: { from?: number | undefined; to?: number | undefined }): Promise<string>;
}

/** How often the client acknowledges output (the edge cuts clients too far behind, 4008). */
const ACK_EVERY_BYTES = 256 * 1024;
/** Input is sent in pieces well under the edge's default limit (MAX_INPUT_BYTES, 64 KiB). */
const INPUT_PIECE_BYTES = 32 * 1024;
/** Output kept for an iterator that has not started yet (see `[Symbol.asyncIterator]`). */
const PRELUDE_BYTES = 4 * 1024 * 1024;
const OPEN_TIMEOUT_MS = 10_000;
const OPEN = 1;

const FATAL_CLOSES: Record<number, "UNAUTHORIZED" | "FORBIDDEN" | "NOT_FOUND"> = {
  [CloseCode.Unauthorized]: "UNAUTHORIZED",
  [CloseCode.Forbidden]: "FORBIDDEN",
  [CloseCode.NotFound]: "NOT_FOUND",
};

export class Pty extends Emitter<PtyEvents> implements AsyncIterable<Uint8Array> {
  /** The session as last heard: from `hello`, then kept up to date by resize and exit. */
  session: Session | undefined;
  state: ConnectionState = "connecting";
  /** The exit, once the session has ended. */
  exitInfo: ExitInfo | undefined;

  private socket: SocketLike | undefined;
  /** Offset of the next byte expected; unknown until the server says where replay starts. */
  private next: number | undefined;
  private acked = 0;
  private attempt = 0;
  private lastHeard = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private userClosed = false;
  private started = false;
  private readonly ready: Promise<void>;
  private settleReady: ((error?: PtyBrokerError) => void) | undefined;
  private readonly consumers = new Set<(chunk: Uint8Array | null) => void>();
  private prelude: Uint8Array[] | null = [];
  /**
   * Messages that arrived after the first `hello`, held for one macrotask: `connect()` resolves
   * on `hello`, and the caller attaches its listeners in the continuation. Without this, frames
   * that came in the same read as `hello` (ws handles them in one synchronous loop) would be
   * emitted before anyone listens.
   */
  private held: unknown[] | null = null;
  private preludeBytes = 0;
  /** The `screen` message whose 0x04 frame comes next. */
  private screenHeader: { offset: number; cols: number; rows: number } | undefined;

  constructor(
    readonly id: string,
    private readonly transport: PtyTransport,
    /** A viewer token's terminal: input, resize and signal are refused. */
    readonly readOnly: boolean,
    private readonly options: ConnectOptions = {},
  ) {
    super();
    if (options.onData) this.on("data", options.onData);
    if (options.onStdout) this.on("data", options.onStdout);
    if (options.onStderr) this.on("stderr", options.onStderr);
    if (options.onScreen) this.on("screen", options.onScreen);
    this.on("data", (bytes) => this.feedConsumers(bytes));
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
  }

  /** Offset of the next byte this terminal expects: where a later `connect({ from })` resumes. */
  get offset(): number {
    return this.next ?? 0;
  }

  /** Starts connecting; resolves once the first `hello` arrives, rejects if that cannot happen. */
  connected(): Promise<void> {
    if (!this.started) {
      this.started = true;
      void this.dial();
    }
    return this.ready;
  }

  async sendInput(data: string | Uint8Array): Promise<void> {
    this.assertWritable();
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    for (let at = 0; at < bytes.byteLength; at += INPUT_PIECE_BYTES) {
      const piece = bytes.subarray(at, at + INPUT_PIECE_BYTES);
      if (this.isOpen()) this.socket?.send(encodeInput(piece));
      else {
        await this.transport.rest("POST", this.path("input"), { data: bytesToBase64(piece), encoding: "base64" });
      }
    }
  }

  /**
   * End of input: closes the process's stdin (`pty: false`) after what was sent before; on a
   * terminal it types Ctrl+D, as a person would. Attached, it is `{"type":"eof"}` on the socket
   * (a refusal comes back as an `error` event); otherwise `POST .../input {eof: true}`, whose
   * refusal throws. Input after it is refused (`CONFLICT`) on a `pty: false` session.
   */
  async closeStdin(): Promise<void> {
    this.assertWritable();
    if (this.isOpen()) this.socket?.send(JSON.stringify({ type: "eof" }));
    else await this.transport.rest("POST", this.path("input"), { data: "", eof: true });
  }

  /** The session's output as an asciicast v2 recording (`asciinema play` plays it), from `from` to `to`. */
  recording(range: { from?: number | undefined; to?: number | undefined } = {}): Promise<string> {
    return this.transport.recording(this.id, range);
  }

  async resize(size: { cols: number; rows: number }): Promise<void> {
    this.assertWritable();
    const { cols, rows } = size;
    if (![cols, rows].every((n) => Number.isInteger(n) && n >= 1 && n <= 1000)) {
      throw new PtyBrokerError("INVALID_REQUEST", `cols and rows are integers 1..1000, got ${cols}×${rows}`);
    }
    if (this.isOpen()) this.socket?.send(JSON.stringify({ type: "resize", cols, rows }));
    else await this.transport.rest("POST", this.path("resize"), { cols, rows });
  }

  async signal(signal: SignalName): Promise<void> {
    this.assertWritable();
    if (!(SIGNALS as readonly string[]).includes(signal)) {
      throw new PtyBrokerError("INVALID_REQUEST", `unknown signal ${signal}; one of ${SIGNALS.join(", ")}`);
    }
    if (this.isOpen()) this.socket?.send(JSON.stringify({ type: "signal", signal }));
    else await this.transport.rest("POST", this.path("signal"), { signal });
  }

  /** Ends the process (SIGHUP, then SIGKILL after a grace) and answers once it is gone. */
  kill(): Promise<Session> {
    return this.transport.rest<Session>("DELETE", `/v1/sessions/${encodeURIComponent(this.id)}`);
  }

  /**
   * Changes the session's timers, label or tags (API key only) and answers the session as it is
   * now, which `pty.session` then holds.
   */
  async update(patch: SessionPatch): Promise<Session> {
    const session = await this.transport.rest<Session>("PATCH", `/v1/sessions/${encodeURIComponent(this.id)}`, patch);
    this.session = session;
    return session;
  }

  /** A session token for this session (`viewer` reads, `writer` also types). API key only. */
  async token(role: "viewer" | "writer", options: { ttlSec?: number | undefined } = {}): Promise<string> {
    const { token } = await this.transport.rest<{ token: string }>("POST", this.path("tokens"), {
      role,
      ttlSec: options.ttlSec,
    });
    return token;
  }

  // ---- the agent layer (REST; DESIGN §10) ----

  /**
   * Types `data` through `POST .../input` and answers `{bytes, offset}`: `offset` is the output
   * offset when the server took the input, the `from` for an `expect` that must match only what
   * the input caused. (`sendInput` is faster for keystrokes, over the socket, and answers nothing.)
   */
  async input(data: string | Uint8Array, options: InputOptions = {}): Promise<InputResult> {
    this.assertWritable();
    return this.transport.calls.input(data, options);
  }

  /**
   * Waits on the server until the output matches `pattern`: a string is matched literally
   * (unless `literal: false`), a RegExp as a regular expression (its flags from `imsu`).
   */
  expect(pattern: string | RegExp, options: ExpectOptions = {}): Promise<ExpectResult> {
    return this.transport.calls.expect(pattern, options);
  }

  /** Runs one command line in the session's shell and answers its exit code and output. */
  async run(command: string, options: RunOptions = {}): Promise<RunResult> {
    this.assertWritable();
    return this.transport.calls.run(command, options);
  }

  /** The commands the shell ran, oldest first (the last `limit`, at most 1000). */
  commands(options: { limit?: number | undefined } = {}): Promise<CommandRecord[]> {
    return this.transport.calls.commands(options);
  }

  /** The terminal as it looks now (from the server's emulator): lines, cursor, size. */
  screen(): Promise<ScreenState> {
    return this.transport.calls.screen();
  }

  /** The screen's lines as text, joined with `\n`. */
  screenText(): Promise<string> {
    return this.transport.calls.screenText();
  }

  /** Bytes that repaint the screen on an empty terminal of its size. */
  screenAnsi(): Promise<ScreenRepaint> {
    return this.transport.calls.screenAnsi();
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
      const session = await this.transport.rest<Session>("GET", `${this.path("wait")}?timeoutSec=60`);
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
  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    const queue: (Uint8Array | null)[] = this.prelude ?? [];
    this.preludeBytes = 0;
    this.prelude = null;
    if (this.state === "closed") queue.push(null);
    let wake: (() => void) | undefined;
    const consumer = (chunk: Uint8Array | null) => {
      queue.push(chunk);
      wake?.();
    };
    this.consumers.add(consumer);
    try {
      for (;;) {
        const chunk = queue.shift();
        if (chunk === null) return;
        if (chunk) yield chunk;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      this.consumers.delete(consumer);
    }
  }

  // ---- connection ----

  private async dial(): Promise<void> {
    this.retryTimer = undefined;
    if (this.state === "closed") return;
    const first = this.options.from;
    // "auto" is settled by PtyBroker.connect; one left here replays everything, which is never wrong.
    const from = this.next !== undefined ? String(this.next) : first === undefined || first === "auto" ? null : String(first);
    this.screenHeader = undefined;
    let socket: SocketLike;
    try {
      socket = await this.transport.openSocket(this.id, { from, onLag: this.options.onLag });
    } catch (error) {
      this.failedAttempt(error);
      return;
    }
    if (this.isClosed()) {
      socket.close(1000);
      return;
    }
    this.socket = socket;
    socket.binaryType = "arraybuffer";
    let opened = false;
    const openTimer = setTimeout(() => this.abandon(socket, "open timed out"), OPEN_TIMEOUT_MS);
    socket.onopen = () => {
      opened = true;
      clearTimeout(openTimer);
      this.lastHeard = Date.now();
      // Also the first frame: wrangler dev delays the close of a socket that never sent one.
      this.acked = this.next ?? 0;
      socket.send(JSON.stringify({ type: "ack", offset: this.acked }));
      this.startHeartbeat(socket);
    };
    socket.onmessage = (event) => {
      this.lastHeard = Date.now();
      if (this.held) this.held.push(event.data);
      else this.receive(event.data);
    };
    socket.onclose = (event) => {
      clearTimeout(openTimer);
      if (socket === this.socket) void this.dropped(event.code, event.reason, opened);
    };
    socket.onerror = () => undefined; // a close event follows
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
    const frame = decodeFrame(new Uint8Array(data as ArrayBuffer));
    if (frame.op === "screen") return this.screenFrame(frame.offset, frame.data);
    if (frame.op !== "output" && frame.op !== "stderr") return;
    let { offset, data: bytes } = frame;
    const end = offset + bytes.byteLength;
    if (this.next !== undefined) {
      if (end <= this.next) return; // already delivered before a reconnect
      if (offset < this.next) {
        bytes = bytes.subarray(this.next - offset);
        offset = this.next;
      } else if (offset > this.next) {
        this.emit("gap", { from: this.next, to: offset });
      }
    }
    this.next = end;
    if (bytes.byteLength > 0) this.emit(frame.op === "stderr" ? "stderr" : "data", bytes, offset);
    if (end - this.acked >= ACK_EVERY_BYTES && this.isOpen()) {
      this.acked = end;
      this.socket?.send(JSON.stringify({ type: "ack", offset: end }));
    }
  }

  /**
   * A repaint of the screen at `offset` (after its `screen` message): output continues there.
   * Bytes between what was delivered and `offset` are skipped, and said so unless a `gap` did.
   */
  private screenFrame(offset: number, data: Uint8Array): void {
    const header = this.screenHeader;
    this.screenHeader = undefined;
    if (this.next !== undefined && offset < this.next) return; // older than what was delivered
    if (this.next !== undefined && offset > this.next) this.emit("gap", { from: this.next, to: offset });
    this.next = offset;
    const cols = header?.offset === offset ? header.cols : (this.session?.cols ?? 80);
    const rows = header?.offset === offset ? header.rows : (this.session?.rows ?? 24);
    if (this.session) this.session = { ...this.session, cols, rows };
    this.emit("screen", { offset, cols, rows, data });
    // Everything below `offset` is as good as received: the edge counts this client's lag from here.
    if (this.isOpen() && offset > this.acked) {
      this.acked = offset;
      this.socket?.send(JSON.stringify({ type: "ack", offset }));
    }
  }

  private control(message: ServerMessage): void {
    switch (message.type) {
      case "hello":
        this.session = message.session;
        this.attempt = 0;
        if (this.settleReady) {
          this.held = [];
          setTimeout(() => this.releaseHeld(), 0);
        }
        this.setState("open");
        this.settleReady?.();
        break;
      case "replay":
        this.next ??= message.from;
        break;
      case "live":
        this.next ??= message.offset;
        this.emit("live", message.offset);
        break;
      case "gap":
        if (this.next === undefined || this.next < message.to) {
          this.emit("gap", { from: message.from, to: message.to });
          this.next = message.to;
        }
        break;
      case "resize":
        if (this.session) this.session = { ...this.session, cols: message.cols, rows: message.rows };
        this.emit("resize", { cols: message.cols, rows: message.rows });
        break;
      case "screen":
        this.screenHeader = { offset: message.offset, cols: message.cols, rows: message.rows };
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
          this.emit("exit", info);
        }
        break;
      }
      case "error":
        this.emit("error", new PtyBrokerError(message.code as PtyBrokerError["code"], message.message));
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
    this.socket = undefined;
    this.stopHeartbeat();
    if (this.state === "closed") return;
    if (this.exitInfo || code === CloseCode.SessionEnded) return this.finish();
    const fatal = FATAL_CLOSES[code];
    if (fatal) return this.finish(new PtyBrokerError(fatal, reason || `closed with ${code}`));
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
    const delay = backoffDelay(this.attempt++, {
      baseMs: this.options.reconnect?.baseMs ?? 250,
      maxMs: this.options.reconnect?.maxMs ?? 5000,
    });
    this.retryTimer = setTimeout(() => void this.dial(), delay);
  }

  /** Gives up on a socket that is silent or never opened, and redials at once. */
  private abandon(socket: SocketLike, why: string): void {
    if (socket !== this.socket) return;
    socket.onclose = socket.onmessage = socket.onopen = null;
    const terminate = (socket as { terminate?: () => void }).terminate;
    if (terminate) terminate.call(socket);
    else socket.close(4000, why);
    void this.dropped(1006, why, true);
  }

  private startHeartbeat(socket: SocketLike): void {
    const every = this.options.heartbeatMs ?? 5000;
    this.stopHeartbeat();
    this.heartbeat = setInterval(() => {
      if (Date.now() - this.lastHeard >= 2 * every) this.abandon(socket, "heartbeat lost");
      else if (socket.readyState === OPEN) socket.send(PING_TEXT);
    }, every);
  }

  private stopHeartbeat(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  private finish(error?: PtyBrokerError): void {
    if (this.state === "closed") return;
    clearTimeout(this.retryTimer);
    this.stopHeartbeat();
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.onclose = socket.onmessage = socket.onopen = null;
      socket.close(1000);
    }
    this.setState("closed");
    if (error && !this.userClosed) this.emit("error", error);
    this.settleReady?.(error ?? new PtyBrokerError("CLOSED", "the session ended before it could be attached"));
    this.feedConsumers(null);
  }

  private setState(state: ConnectionState): void {
    if (state === this.state) return;
    this.state = state;
    this.emit("state", state);
  }

  private feedConsumers(chunk: Uint8Array | null): void {
    if (this.prelude) {
      if (chunk && this.preludeBytes + chunk.byteLength <= PRELUDE_BYTES) {
        this.prelude.push(chunk);
        this.preludeBytes += chunk.byteLength;
      }
    }
    for (const consumer of this.consumers) consumer(chunk);
  }

  private isClosed(): boolean {
    return this.state === "closed";
  }

  private isOpen(): boolean {
    return this.state === "open" && this.socket?.readyState === OPEN;
  }

  private assertWritable(): void {
    if (this.readOnly) throw new PtyBrokerError("FORBIDDEN", "a viewer token may not send input, eof, resize or signal");
  }

  private path(action: string): string {
    return `/v1/sessions/${encodeURIComponent(this.id)}/${action}`;
  }
}

function isFatal(error: unknown): error is PtyBrokerError {
  return (
    error instanceof PtyBrokerError &&
    (error.code === "UNAUTHORIZED" || error.code === "FORBIDDEN" || error.code === "NOT_FOUND")
  );
}

