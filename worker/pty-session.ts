// PtySession: one Durable Object per tenant+session. Holds the session record and its
// forward-only status, accepts the runner's link socket and every client socket (with the
// hibernation API), and fans the runner's output frames out to the clients.
import { DurableObject } from "cloudflare:workers";
import { ApiError, CloseCode, type Failure, fail, isFailure } from "../shared/errors.js";
import { log } from "../shared/log.js";
import {
  ClientMessage,
  type EdgeLinkMessage,
  OUTPUT_HEADER_BYTES,
  RunnerLinkMessage,
  type ServerMessage,
  decodeFrame,
  encodeInput,
  parseMessage,
} from "../shared/protocol.js";
import {
  KILL_GRACE_MS,
  type Session,
  type SessionStatus,
  type SignalName,
  type SpawnSpec,
  canMove,
  isTerminal,
} from "../shared/session.js";
import { type Env, limits, poolStub, sessionKey, tenantStub } from "./env.js";
import { refuseSocket, wantsRaw } from "./errors.js";
import { closeQuietly, sendQuietly } from "./sockets.js";

export interface CreateRequest {
  tenant: string;
  id: string;
  createdAt: string;
  tags: string[];
  label: string | null;
  spec: SpawnSpec;
}

type SessionRecord = Omit<Session, "offset" | "retainedFrom" | "clients">;

interface Stored {
  tenant: string;
  spec: SpawnSpec;
  record: SessionRecord;
}

type StartOutcome = "started" | "failed" | "timeout";

const Tag = {
  Link: "link",
  Client: "client",
  Framed: "mode:framed",
  Raw: "mode:raw",
} as const;

/** Waits at most `ms` for `register` to be called with a resolver; clears its timer either way. */
function settleWithin<T>(ms: number, onTimeout: T, register: (resolve: (value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve) => {
    const timer = setTimeout(() => resolve(onTimeout), ms);
    register((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

export class PtySession extends DurableObject<Env> {
  private stored: Stored | undefined;
  /** Offset of the next output byte: the number of bytes produced so far. */
  private offset: number;
  private startWaiter: ((outcome: StartOutcome) => void) | undefined;
  private exitWaiters = new Set<() => void>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.stored = ctx.storage.kv.get<Stored>("session");
    this.offset = ctx.storage.kv.get<number>("offset") ?? 0;
  }

  // ---- RPC, called by the Worker's routes ----

  async create(request: CreateRequest): Promise<Session | Failure> {
    if (this.stored) return fail("CONFLICT", `session ${request.id} already exists`);
    const { tenant, id, spec } = request;
    this.stored = {
      tenant,
      spec,
      record: {
        id,
        status: "starting",
        command: spec.command,
        args: spec.args,
        cwd: spec.cwd,
        cols: spec.cols,
        rows: spec.rows,
        pid: null,
        tags: request.tags,
        label: request.label,
        createdAt: request.createdAt,
        exitedAt: null,
        exitCode: null,
        signal: null,
        error: null,
      },
    };
    this.save();
    const started = settleWithin<StartOutcome>(limits(this.env).startTimeoutMs, "timeout", (resolve) => {
      this.startWaiter = resolve;
    });
    const placed = await poolStub(this.env).place({
      type: "spawn",
      key: sessionKey(tenant, id),
      tenant,
      sessionId: id,
      spec,
    });
    if (isFailure(placed)) {
      this.startWaiter?.("failed");
      this.stored = undefined;
      await this.ctx.storage.deleteAll();
      return placed;
    }
    log.info("session.placed", { key: sessionKey(tenant, id), runnerId: placed.runnerId });
    if ((await started) === "timeout") {
      await this.move("failed", { error: "the runner did not start the process in time" });
    }
    return this.view();
  }

  get(): Session | Failure {
    return this.stored ? this.view() : this.notFound();
  }

  input(bytes: Uint8Array): { bytes: number } | Failure {
    const refused = this.refuseUnlessRunning();
    if (refused) return refused;
    this.sendLinkBytes(encodeInput(bytes));
    return { bytes: bytes.byteLength };
  }

  async resize(cols: number, rows: number): Promise<Session | Failure> {
    const refused = this.refuseUnlessRunning();
    if (refused) return refused;
    await this.applyResize(cols, rows);
    return this.view();
  }

  signal(signal: SignalName): { signal: string } | Failure {
    const refused = this.refuseUnlessRunning();
    if (refused) return refused;
    this.sendLink({ type: "signal", signal });
    return { signal };
  }

  async wait(timeoutMs: number): Promise<Session | Failure> {
    if (!this.stored) return this.notFound();
    if (!isTerminal(this.stored.record.status)) await this.untilExit(timeoutMs);
    return this.view();
  }

  /** DELETE: SIGHUP, SIGKILL after the grace, answered once the process is gone. */
  async terminate(purge: boolean): Promise<Session | Failure> {
    if (!this.stored) return this.notFound();
    if (!isTerminal(this.stored.record.status)) {
      if (this.link()) {
        this.sendLink({ type: "kill", graceMs: KILL_GRACE_MS });
        await this.untilExit(KILL_GRACE_MS + 5000);
      }
      if (!isTerminal(this.stored.record.status)) {
        await this.move("lost", { error: "the runner did not confirm the process ended" });
      }
    }
    const session = this.view();
    if (purge) {
      for (const ws of this.ctx.getWebSockets()) closeQuietly(ws, CloseCode.SessionEnded, "session purged");
      this.stored = undefined;
      this.offset = 0;
      await this.ctx.storage.deleteAll();
    }
    return session;
  }

  // ---- Sockets ----

  async fetch(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path.endsWith("/link")) return this.acceptLink();
    return this.acceptClient(request);
  }

  private acceptLink(): Response {
    const stored = this.stored;
    if (!stored) return new Response("no such session", { status: 404 });
    if (isTerminal(stored.record.status)) return new Response("session has ended", { status: 409 });
    const { 0: runnerSide, 1: server } = new WebSocketPair();
    for (const old of this.ctx.getWebSockets(Tag.Link)) closeQuietly(old, 1000, "replaced by a new link");
    this.ctx.acceptWebSocket(server, [Tag.Link]);
    return new Response(null, { status: 101, webSocket: runnerSide });
  }

  private acceptClient(request: Request): Response {
    const framed = request.headers.get("x-ptyb-mode") !== "raw";
    const stored = this.stored;
    if (!stored) return refuseSocket(new ApiError("NOT_FOUND", "session not found"), request);
    const max = limits(this.env).maxClientsPerSession;
    if (this.ctx.getWebSockets(Tag.Client).length >= max) {
      return refuseSocket(new ApiError("QUOTA_EXCEEDED", `at most ${max} clients per session`), request);
    }
    const { 0: client, 1: server } = new WebSocketPair();
    this.ctx.acceptWebSocket(server, [Tag.Client, framed ? Tag.Framed : Tag.Raw]);
    if (framed) {
      sendJson(server, { type: "hello", session: this.view() });
      sendJson(server, { type: "live", offset: this.offset });
    }
    if (isTerminal(stored.record.status)) {
      if (framed) sendJson(server, this.exitMessage());
      closeQuietly(server, CloseCode.SessionEnded, "session ended");
    }
    const headers = new Headers();
    if (wantsRaw(request).subprotocol) headers.set("sec-websocket-protocol", "raw");
    return new Response(null, { status: 101, webSocket: client, headers });
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    try {
      if (this.ctx.getTags(ws).includes(Tag.Link)) await this.onLinkMessage(message);
      else await this.onClientMessage(ws, message);
    } catch (error) {
      log.error("session.socket", { key: this.keyForLog(), outcome: "handler_error", error });
    }
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    try {
      closeQuietly(ws, 1000, "closed");
      if (!this.ctx.getTags(ws).includes(Tag.Link)) return;
      const otherLink = this.ctx.getWebSockets(Tag.Link).some((w) => w !== ws && w.readyState === WebSocket.OPEN);
      if (this.stored && !isTerminal(this.stored.record.status) && !otherLink) {
        log.warn("link.closed", { key: this.keyForLog(), code });
        await this.move("lost", { error: "the runner's link closed before the process exited" });
      }
    } catch (error) {
      log.error("session.socket", { key: this.keyForLog(), outcome: "close_error", error });
    }
  }

  async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    log.warn("session.socket", {
      key: this.keyForLog(),
      outcome: "error",
      link: this.ctx.getTags(ws).includes(Tag.Link),
      error,
    });
  }

  private async onLinkMessage(message: string | ArrayBuffer): Promise<void> {
    if (typeof message !== "string") {
      const frame = decodeFrame(new Uint8Array(message));
      if (frame.op !== "output") {
        log.warn("link.frame", { key: this.keyForLog(), outcome: frame.op === "invalid" ? frame.reason : "bad_op" });
        return;
      }
      if (frame.offset !== this.offset) {
        log.warn("link.frame", {
          key: this.keyForLog(),
          outcome: "offset_mismatch",
          expected: this.offset,
          got: frame.offset,
        });
      }
      this.offset = frame.offset + frame.data.byteLength;
      this.ctx.storage.kv.put("offset", this.offset);
      this.fanOut(message);
      return;
    }
    const parsed = parseMessage(RunnerLinkMessage, message, 1 << 16);
    if (!parsed.ok) {
      log.warn("link.message", { key: this.keyForLog(), outcome: "invalid", reason: parsed.reason });
      return;
    }
    const msg = parsed.value;
    if (msg.type === "started") {
      await this.move("running", { pid: msg.pid });
      this.startWaiter?.("started");
    } else if (msg.type === "exited") {
      await this.move("exited", { exitCode: msg.exitCode, signal: msg.signal });
    } else {
      await this.move("failed", { error: msg.error });
      this.startWaiter?.("failed");
    }
  }

  /** Sends one output frame to every client: as it came for framed clients, bytes only for raw. */
  private fanOut(frame: ArrayBuffer): void {
    for (const ws of this.ctx.getWebSockets(Tag.Framed)) sendQuietly(ws, frame);
    const raw = this.ctx.getWebSockets(Tag.Raw);
    if (raw.length > 0) {
      const bytes = new Uint8Array(frame, OUTPUT_HEADER_BYTES);
      for (const ws of raw) sendQuietly(ws, bytes);
    }
  }

  private async onClientMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    const raw = this.ctx.getTags(ws).includes(Tag.Raw);
    if (raw) {
      const bytes = typeof message === "string" ? new TextEncoder().encode(message) : new Uint8Array(message);
      return this.clientInput(ws, bytes, false);
    }
    if (typeof message !== "string") {
      const frame = decodeFrame(new Uint8Array(message));
      if (frame.op === "input") return this.clientInput(ws, frame.data, true);
      const reason = frame.op === "invalid" ? frame.reason : "clients may only send input frames (0x02)";
      return sendJson(ws, { type: "error", code: "INVALID_REQUEST", message: reason });
    }
    const parsed = parseMessage(ClientMessage, message);
    if (!parsed.ok) return sendJson(ws, { type: "error", code: "INVALID_REQUEST", message: parsed.reason });
    const msg = parsed.value;
    if (msg.type === "ping") return sendJson(ws, { type: "pong" });
    const refused = this.refuseUnlessRunning();
    if (refused) return sendJson(ws, { type: "error", ...refused.failure });
    if (msg.type === "resize") await this.applyResize(msg.cols, msg.rows);
    else this.sendLink({ type: "signal", signal: msg.signal });
  }

  private clientInput(ws: WebSocket, bytes: Uint8Array, framed: boolean): void {
    const max = limits(this.env).maxInputBytes;
    const refused =
      bytes.byteLength > max
        ? fail("PAYLOAD_TOO_LARGE", `input frame is ${bytes.byteLength} bytes; at most ${max}`)
        : this.refuseUnlessRunning();
    if (refused) {
      if (framed) sendJson(ws, { type: "error", ...refused.failure });
      return;
    }
    this.sendLinkBytes(encodeInput(bytes));
  }

  // ---- State ----

  private async applyResize(cols: number, rows: number): Promise<void> {
    const stored = this.stored;
    if (!stored) return;
    stored.record.cols = cols;
    stored.record.rows = rows;
    this.save();
    this.sendLink({ type: "resize", cols, rows });
    this.broadcast({ type: "resize", cols, rows });
  }

  /** Moves the status forward (never back) and tells whoever waits on it. */
  private async move(status: SessionStatus, patch: Partial<SessionRecord>): Promise<void> {
    const stored = this.stored;
    if (!stored || !canMove(stored.record.status, status)) return;
    Object.assign(stored.record, patch, { status });
    if (isTerminal(status)) stored.record.exitedAt = new Date().toISOString();
    this.save();
    log.info("session.status", { key: this.keyForLog(), status });
    if (isTerminal(status)) {
      this.broadcast(this.exitMessage());
      for (const ws of this.ctx.getWebSockets(Tag.Client)) closeQuietly(ws, CloseCode.SessionEnded, "session ended");
      for (const resolve of this.exitWaiters) resolve();
      this.exitWaiters.clear();
    }
    try {
      await tenantStub(this.env, stored.tenant).setStatus(stored.record.id, status);
    } catch (error) {
      log.warn("session.tenant_update", { key: this.keyForLog(), status, error });
    }
  }

  private untilExit(timeoutMs: number): Promise<void> {
    let waiter: (() => void) | undefined;
    return settleWithin<void>(timeoutMs, undefined, (resolve) => {
      waiter = resolve;
      this.exitWaiters.add(resolve);
    }).finally(() => {
      if (waiter) this.exitWaiters.delete(waiter);
    });
  }

  private refuseUnlessRunning(): Failure | undefined {
    if (!this.stored) return this.notFound();
    const status = this.stored.record.status;
    if (isTerminal(status)) return fail("SESSION_EXITED", `session has ${status}`);
    if (!this.link()) return fail("CONFLICT", "session is not connected to a runner yet");
    return undefined;
  }

  private view(): Session {
    const stored = this.stored;
    if (!stored) throw new Error("no session");
    return {
      ...stored.record,
      offset: this.offset,
      retainedFrom: 0,
      clients: this.ctx.getWebSockets(Tag.Client).length,
    };
  }

  private exitMessage(): ServerMessage {
    const record = this.stored?.record;
    const status = record?.status;
    return {
      type: "exit",
      status: status === "lost" || status === "failed" ? status : "exited",
      exitCode: record?.exitCode ?? null,
      signal: record?.signal ?? null,
    };
  }

  private save(): void {
    if (this.stored) this.ctx.storage.kv.put("session", this.stored);
  }

  private link(): WebSocket | undefined {
    return this.ctx.getWebSockets(Tag.Link).find((ws) => ws.readyState === WebSocket.OPEN);
  }

  private sendLink(message: EdgeLinkMessage): void {
    const link = this.link();
    if (link) sendQuietly(link, JSON.stringify(message));
  }

  private sendLinkBytes(frame: Uint8Array): void {
    const link = this.link();
    if (link) sendQuietly(link, frame);
  }

  private broadcast(message: ServerMessage): void {
    for (const ws of this.ctx.getWebSockets(Tag.Framed)) sendJson(ws, message);
  }

  private notFound(): Failure {
    return fail("NOT_FOUND", "session not found");
  }

  private keyForLog(): string | null {
    return this.stored ? sessionKey(this.stored.tenant, this.stored.record.id) : null;
  }
}

function sendJson(ws: WebSocket, message: ServerMessage): void {
  sendQuietly(ws, JSON.stringify(message));
}
