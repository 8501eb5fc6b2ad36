// The SDK's entry point: REST calls for sessions, and `Pty`s for attached terminals.
import type { CommandRecord, ExpectResult, RunResult, ScreenState } from "../shared/agent.js";
import { base64ToBytes } from "../shared/base64.js";
import type { ExecResult, Session, SessionPage, SignalName } from "../shared/session.js";
import type { CreateOptions, ExecOptions, ListFilter, ListPageOptions, OutputRange, PtyBrokerOptions, RecordingRange } from "./broker-options.js";
import { KeyCalls } from "./keys.js";
import { AuditCalls, WebhookCalls } from "./webhooks.js";
import { AgentCalls, type ExpectOptions, type InputOptions, type InputResult, type RunOptions, type ScreenRepaint } from "./agent.js";
import { PATIENCE_NEEDED_SEC } from "./patience.js";
import { isFatal, PtyBrokerError } from "./errors.js";
import { EventStream, type EventsOptions } from "./events.js";
import { Http } from "./http.js";
import { Pty } from "./pty.js";
import type { ConnectOptions, SessionPatch, SocketLike, SocketQuery } from "./pty-types.js";

type SocketFactory = (url: string, authorization: string | null) => SocketLike;

/**
 * `from: "auto"`: a session whose retained history is larger than this starts from its screen
 * (a few KiB) rather than replaying it all.
 */
export const SCREEN_START_BYTES = 256 * 1024;

/** Where `from: "auto"` starts for a session: its screen when its history is large, else all of it. */
export function autoStart(session: Pick<Session, "offset" | "retainedFrom">): "screen" | undefined {
  return session.offset - session.retainedFrom > SCREEN_START_BYTES ? "screen" : undefined;
}

/** Lifetime of the token minted for each socket when a browser holds an API key. */
const SOCKET_TOKEN_TTL_SEC = 120;

export class PtyBroker {
  private readonly http: Http;
  private factory: Promise<{ open: SocketFactory; headers: boolean }> | undefined;

  constructor(private readonly options: PtyBrokerOptions) {
    this.http = new Http(options.url, { apiKey: options.apiKey, token: options.token }, options.fetch, options.timeoutMs);
  }

  /** The edge's base URL, without a trailing slash. */
  get url(): string {
    return this.http.base;
  }

  /** The tenant's API keys (`/v1/keys`): list, create, revoke; needs a key with every scope. */
  get keys(): KeyCalls {
    return new KeyCalls(this.http);
  }

  /** The tenant's signed webhooks (`/v1/webhooks`): create, list, get, delete, deliveries; needs `webhooks:write`. */
  get webhooks(): WebhookCalls {
    return new WebhookCalls(this.http);
  }

  /** The tenant's audit log (`/v1/audit`), a page at a time; needs a key with every scope. */
  get audit(): AuditCalls {
    return new AuditCalls(this.http);
  }

  /**
   * Creates a session and attaches to it from its first byte: answers a `Pty` (a socket that
   * streams output and takes keystrokes). For a session driven by REST alone (`run`, `input`,
   * `expect`, `screen`, by id) or attached later, elsewhere or by someone else, use
   * `createSession`, which opens no socket.
   */
  async create(options: CreateOptions & ConnectOptions = {}): Promise<Pty> {
    const {
      from: _from,
      onData,
      onStdout,
      onStderr,
      onScreen,
      onState,
      onLag,
      compress,
      reconnect,
      heartbeatMs,
      connectTimeoutMs,
      openTimeoutMs,
      inputQueueBytes,
      ...body
    } = options;
    const session = await this.createSession(body);
    return this.connect(session.id, {
      from: 0,
      ...{ onData, onStdout, onStderr, onScreen, onState, onLag, compress, reconnect, heartbeatMs, connectTimeoutMs, openTimeoutMs, inputQueueBytes },
    });
  }

  /**
   * Creates a session without attaching to it: answers the Session record. Its output is kept
   * all the same; `connect(id)` replays it later. See `create` for a session attached at once.
   */
  createSession(body: CreateOptions = {}): Promise<Session> {
    return this.http.json<Session>("POST", "/v1/sessions", body);
  }

  /**
   * Attaches to a session: replays from `from` (default: everything retained; `"screen"`: the
   * current screen, then output from its offset; `"auto"`: the screen when the retained history
   * is over 256 KiB, else everything), then live. A `from` past the session's offset rejects
   * with a PtyBrokerError `INVALID_OFFSET` (status 416) that names the session's offset.
   */
  async connect(id: string, options: ConnectOptions = {}): Promise<Pty> {
    if (options.from === "auto") options = { ...options, from: await this.autoFrom(id) };
    const pty = new Pty(
      id,
      {
        openSocket: (sessionId, query) => this.openSocket(sessionId, query),
        rest: (method, path, body, options) => this.http.json(method, path, body, options),
        calls: new AgentCalls(this.http, id),
        recording: (sessionId, range) => this.recording(sessionId, range),
      },
      this.tokenRole() === "viewer",
      options,
    );
    await pty.connected();
    return pty;
  }

  get(id: string): Promise<Session> {
    return this.http.json("GET", this.path(id));
  }

  /**
   * Every session (matching the filter), oldest first: follows `nextCursor` page by page, so
   * it may take several requests. `pageSize` is the `limit` of each (default 1000, the most).
   */
  async list(options: ListFilter & { pageSize?: number | undefined } = {}): Promise<Session[]> {
    const { pageSize = 1000, ...filter } = options;
    const all: Session[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listPage({ ...filter, limit: pageSize, cursor });
      all.push(...page.sessions);
      if (page.nextCursor === null) return all;
      if (page.nextCursor === cursor) {
        throw new PtyBrokerError("INTERNAL", `GET /v1/sessions: the server gave the same cursor twice (${cursor})`);
      }
      cursor = page.nextCursor;
    }
  }

  /** One page of sessions, oldest first; pass `nextCursor` back as `cursor` until it is null. */
  async listPage(options: ListPageOptions = {}): Promise<SessionPage> {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(options)) if (value !== undefined) query.set(key, String(value));
    const page = await this.http.json<Partial<SessionPage>>("GET", `/v1/sessions${query.size ? `?${query}` : ""}`);
    // A server from before paging answers `{sessions}` alone: everything, in one page.
    return { sessions: page.sessions ?? [], nextCursor: page.nextCursor ?? null };
  }

  /**
   * Changes a session's timers, label or tags (API key only). Timers are whole seconds, 0 = off;
   * `timeoutSec: n` ends the session n seconds from now. Answers the session as it is now.
   */
  update(id: string, patch: SessionPatch): Promise<Session> {
    return this.http.json("PATCH", this.path(id), patch);
  }

  /**
   * The tenant's session lifecycle as it happens (`GET /v1/events`, API key only): an async
   * iterator of `{id, type, session, at}` and `{type: "gap", from, to}` notices. It reconnects
   * by itself (backoff with jitter) and resumes after the last id it yielded, so no id comes
   * twice and none is missed while the server still keeps it. A `break`, `return()` or
   * `options.signal` ends it and closes the request; errors a retry would repeat (a bad key, a
   * session token) end it by throwing a `PtyBrokerError`.
   */
  events(options: EventsOptions = {}): EventStream {
    return new EventStream(this.http, options);
  }

  /** SIGHUP, then SIGKILL after a grace; answers once the process is gone. */
  kill(id: string, options: { purge?: boolean | undefined } = {}): Promise<Session> {
    return this.http.json("DELETE", `${this.path(id)}${options.purge ? "?purge=true" : ""}`);
  }

  /** The session once it has ended, or as it is after `timeoutSec` (default 30, at most 300). */
  wait(id: string, options: { timeoutSec?: number | undefined } = {}): Promise<Session> {
    const query = options.timeoutSec ? `?timeoutSec=${options.timeoutSec}` : "";
    return this.http.json("GET", `${this.path(id)}/wait${query}`, undefined, { holds: true });
  }

  /**
   * Types `data` into the session (`POST .../input`) and answers `{bytes, offset}`: `offset` is
   * where whatever the input causes starts in the output (`expect`'s `from`). With an
   * `idempotencyKey` the input is applied once however often the request is repeated. Needs no
   * attached terminal; an attached `Pty`'s `sendInput` types over its socket instead (faster,
   * answers nothing): keystrokes go there, an agent's commands here.
   */
  input(id: string, data: string | Uint8Array, options: InputOptions = {}): Promise<InputResult> {
    return new AgentCalls(this.http, id).input(data, options);
  }

  /**
   * Waits on the server until the session's output matches `pattern` (a string literally, unless
   * `literal: false`; a RegExp as such), from `options.from` (default: from now) on.
   */
  expect(id: string, pattern: string | RegExp, options: ExpectOptions = {}): Promise<ExpectResult> {
    return new AgentCalls(this.http, id).expect(pattern, options);
  }

  /**
   * Runs one command line in the session's shell (the default login shell) and answers once it
   * has finished: `{exitCode, output, ...}`. `BUSY`, `NO_SHELL_INTEGRATION`, `SESSION_EXITED`
   * are thrown as `PtyBrokerError`s.
   */
  run(id: string, command: string, options: RunOptions = {}): Promise<RunResult> {
    return new AgentCalls(this.http, id).run(command, options);
  }

  /** The commands the session's shell ran, oldest first. */
  commands(id: string, options: { limit?: number | undefined } = {}): Promise<CommandRecord[]> {
    return new AgentCalls(this.http, id).commands(options);
  }

  /** The session's screen as it looks now: lines of text, cursor, size. */
  screen(id: string): Promise<ScreenState> {
    return new AgentCalls(this.http, id).screen();
  }

  /** The session's screen as text, lines joined with `\n`. */
  screenText(id: string): Promise<string> {
    return new AgentCalls(this.http, id).screenText();
  }

  /** Bytes that repaint the session's screen on an empty terminal of its size. */
  screenAnsi(id: string): Promise<ScreenRepaint> {
    return new AgentCalls(this.http, id).screenAnsi();
  }

  resize(id: string, size: { cols: number; rows: number }): Promise<Session> {
    return this.http.json("POST", `${this.path(id)}/resize`, size);
  }

  async signal(id: string, signal: SignalName): Promise<void> {
    await this.http.json("POST", `${this.path(id)}/signal`, { signal });
  }

  /**
   * Runs one command to completion without a terminal (`POST /v1/exec`) and answers its exit
   * and output: `{id, exitCode, signal, stdout, stderr, truncated, durationMs, timedOut, reason}`. The
   * `id` is a `pty: false` session, readable and replayable afterwards.
   */
  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const { signal, ...body } = options;
    // The answer comes when the command ends, up to an hour later: outlast Node's 300 s limit.
    const patient = (body.timeoutSec ?? 60) > PATIENCE_NEEDED_SEC;
    return this.http.json("POST", "/v1/exec", { command, ...body }, { patient, signal, holds: true });
  }

  /**
   * Logged output from `from` (default: the oldest retained byte), at most 8 MiB per call;
   * `stream` keeps only stdout's or stderr's bytes of the range (`pty: false`).
   */
  async output(
    id: string,
    range: { from?: number | undefined; to?: number | undefined; stream?: "stdout" | "stderr" | undefined } = {},
  ): Promise<OutputRange> {
    const query = new URLSearchParams();
    if (range.from !== undefined) query.set("from", String(range.from));
    if (range.to !== undefined) query.set("to", String(range.to));
    if (range.stream !== undefined) query.set("stream", range.stream);
    const res = await this.http.send("GET", `${this.path(id)}/output${query.size ? `?${query}` : ""}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    return { from: Number(res.headers.get("x-offset-from")), to: Number(res.headers.get("x-offset-to")), bytes };
  }

  /**
   * The session's output from `from` to `to` as an asciicast v2 recording (`asciinema play`
   * plays it): a JSON header line, then one JSON event line each. Held whole in memory; for a
   * long session use `recordingResponse` and read its body as it comes.
   */
  async recording(id: string, range: RecordingRange = {}): Promise<string> {
    return (await this.recordingResponse(id, range)).text();
  }

  /**
   * The recording's HTTP response (`application/x-asciicast`, status 2xx; errors throw as
   * `PtyBrokerError`s): read `body` as a stream (the CLI's `record` writes it out as it comes).
   */
  recordingResponse(id: string, range: RecordingRange = {}): Promise<Response> {
    const query = new URLSearchParams();
    if (range.from !== undefined) query.set("from", String(range.from));
    if (range.to !== undefined) query.set("to", String(range.to));
    return this.http.send("GET", `${this.path(id)}/recording${query.size ? `?${query}` : ""}`);
  }

  /**
   * Mints a session token (API key only): `viewer` reads, `writer` also types; answers it and
   * its `expiresAt`. Give it to a browser or another process (`new PtyBroker({ url, token })`)
   * so it can attach to this one session without the API key. `pty.token(role)` is the same
   * call for an attached terminal's session, answering the token alone.
   */
  createToken(id: string, role: "viewer" | "writer", options: { ttlSec?: number | undefined } = {}): Promise<{ token: string; expiresAt: string }> {
    return this.http.json("POST", `${this.path(id)}/tokens`, { role, ttlSec: options.ttlSec });
  }

  /** The role of the token this broker holds (read from its claims, unverified), if any. */
  tokenRole(): "viewer" | "writer" | undefined {
    if (!this.options.token) return undefined;
    try {
      const { role } = jwtClaims(this.options.token) as { role?: unknown };
      return role === "viewer" || role === "writer" ? role : undefined;
    } catch {
      return undefined;
    }
  }

  /** `from: "auto"` for this session (one GET); everything retained when the session cannot be read now. */
  private async autoFrom(id: string): Promise<"screen" | undefined> {
    try {
      return autoStart(await this.get(id));
    } catch (error) {
      if (isFatal(error)) throw error;
      return undefined; // the socket will retry as usual; a replay of everything is never wrong
    }
  }

  private path(id: string): string {
    return `/v1/sessions/${encodeURIComponent(id)}`;
  }

  private async openSocket(id: string, socketQuery: SocketQuery): Promise<SocketLike> {
    const { open, headers } = await (this.factory ??= this.socketFactory());
    const query = new URLSearchParams();
    if (socketQuery.from !== null) query.set("from", socketQuery.from);
    if (socketQuery.onLag !== undefined) query.set("onLag", socketQuery.onLag);
    if (socketQuery.compress === "deflate") query.set("compress", "deflate");
    if (socketQuery.writer !== undefined) query.set("writer", socketQuery.writer);
    if (socketQuery.writer !== undefined && socketQuery.inputFrom !== undefined) query.set("inputFrom", String(socketQuery.inputFrom));
    if (!headers) {
      // Browsers cannot set headers on a WebSocket, and API keys never go in URLs: a socket
      // opened with an API key carries a short-lived writer token minted for it.
      const token =
        this.options.token ??
        (await this.createToken(id, "writer", { ttlSec: SOCKET_TOKEN_TTL_SEC })).token;
      query.set("token", token);
    }
    const url = `${this.http.base.replace(/^http/, "ws")}${this.path(id)}/connect${query.size ? `?${query}` : ""}`;
    return open(url, headers ? this.http.bearer : null);
  }

  private async socketFactory(): Promise<{ open: SocketFactory; headers: boolean }> {
    const Given = this.options.WebSocket;
    if (Given) return { open: (url) => new Given(url), headers: false };
    const isNode = typeof process !== "undefined" && typeof process.versions?.node === "string";
    if (isNode) {
      const { default: WebSocket } = await import("ws");
      return {
        open: (url, authorization) =>
          new WebSocket(url, { headers: authorization ? { authorization } : {} }) as unknown as SocketLike,
        headers: true,
      };
    }
    if (typeof WebSocket === "undefined") throw new PtyBrokerError("INTERNAL", "no WebSocket here: pass options.WebSocket");
    return { open: (url) => new WebSocket(url) as unknown as SocketLike, headers: false };
  }
}

/**
 * A JWT's claims, read without verifying it (the edge verifies; the SDK only needs the role):
 * the second dot-separated part, base64url-encoded JSON. Throws when `token` is not one.
 */
function jwtClaims(token: string): unknown {
  const part = token.split(".")[1] ?? "";
  const base64 = part.replace(/-/g, "+").replace(/_/g, "/");
  const bytes = base64ToBytes(base64.padEnd(base64.length + ((4 - (base64.length % 4)) % 4), "="));
  if (!bytes) throw new TypeError("not a JWT");
  return JSON.parse(new TextDecoder().decode(bytes)) as unknown;
}
