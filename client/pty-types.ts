// The Pty's contract (pty.ts): its connection states, its events, the options it is connected
// with, and what it needs of its broker (sockets, REST); also the WebSocket shape it dials.
// Types only: what the SDK exports of them, client/index.ts names.
import type { ExitInfo } from "../shared/protocol.js";
import type { AgentCalls, CommandEvent, ScreenRepaint } from "./agent.js";
import type { PtyBrokerError } from "./errors.js";

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
  /** A shell command ended (shell integration, docs/protocol.md §3, "Agents"). */
  command: [command: CommandEvent];
  exit: [info: ExitInfo];
  error: [error: PtyBrokerError];
  /** Bytes typed and not yet written to the process changed (`pty.pendingInputBytes()` has them). */
  pending: [bytes: number];
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
  /**
   * `"deflate"` (the default): output comes compressed once per chunk by the edge, for every
   * viewer alike (0x06 frames, inflated here with DecompressionStream), and the socket itself
   * is not compressed; `"none"`: plain frames, on a socket compressed as the runtime negotiates
   * it (docs/protocol.md §5, "Compressed output").
   */
  compress?: "deflate" | "none" | undefined;
  /**
   * Most bytes typed (`sendInput`) and not yet written to the process that the terminal keeps
   * for sending again; `sendInput` past it rejects with `QUOTA_EXCEEDED`. Default 1 MiB.
   */
  inputQueueBytes?: number | undefined;
  onData?: DataListener | undefined;
  /** `pty: false`: stdout (the same as `onData`). */
  onStdout?: DataListener | undefined;
  /** `pty: false`: stderr (`stderr` events). */
  onStderr?: DataListener | undefined;
  /** Listens to `screen` events from the start (see `PtyEvents.screen`). */
  onScreen?: ((screen: ScreenRepaint) => void) | undefined;
  /**
   * Listens to `state` events from the start: `connecting` first, then `open` (before `create`
   * or `connect` resolves), then `reconnecting`/`open` as the connection drops and comes back,
   * and `closed` last. A listener added with `pty.on("state")` after the await sees only what
   * follows `open`.
   */
  onState?: ((state: ConnectionState) => void) | undefined;
  /** Reconnect backoff: exponential from `baseMs` to `maxMs`, with jitter. */
  reconnect?: { baseMs?: number | undefined; maxMs?: number | undefined } | undefined;
  /** Ping interval; a socket silent for two intervals is given up and redialled. Default 5 s. */
  heartbeatMs?: number | undefined;
  /** Give up connecting (reject) when the first connection is not up after this. Default 30 s. */
  connectTimeoutMs?: number | undefined;
  /**
   * One attempt to open the socket (its token, where one is minted, then its handshake) that
   * is not open within this is given up and redialled after the base delay. Default 5 s.
   */
  openTimeoutMs?: number | undefined;
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

/** What a Pty needs from its broker: sockets, and the REST calls it falls back on. */
export interface PtyTransport {
  /** Opens a socket to the session's connect URL. */
  openSocket(id: string, query: SocketQuery): Promise<SocketLike>;
  /** A REST call; `holds`: the server holds the answer on purpose (no deadline of the SDK's own). */
  rest<T>(method: string, path: string, body?: unknown, options?: { holds?: boolean | undefined }): Promise<T>;
  /** The agent layer's calls for this session. */
  calls: AgentCalls;
  /** `GET .../recording` as text. */
  recording(id: string, range: { from?: number | undefined; to?: number | undefined }): Promise<string>;
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

/** The connect URL's query: `from` (null: everything retained), `onLag`, `compress` and the writer id. */
export interface SocketQuery {
  from: string | null;
  onLag?: "cut" | "screen" | undefined;
  compress?: "deflate" | "none" | undefined;
  /** The terminal's writer id: its input is numbered (docs/protocol.md §5, "Input exactly once"). */
  writer?: string | undefined;
  /** With `writer`: its input below this offset has been acknowledged (where a runner that does not know it starts its count). */
  inputFrom?: number | undefined;
}
