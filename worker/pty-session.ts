// PtySession: one Durable Object per tenant+session. Holds the session record, its
// forward-only status and the offset of the output it has received, and wires the parts that
// own the rest with callbacks: RunnerLinks (runner-links.ts: the host and reader links, their
// tokens, acks and input state), ClientHub (client-hub.ts: clients, their replays and bounds),
// SessionTimers (session-timers.ts: the deadlines and the alarm), TenantReports
// (tenant-reports.ts: the tenant's index and events), OutputReads (output-reads.ts:
// `GET .../output`) and LogReads (log-reads.ts: reads of the output log through a runner).
import { DurableObject } from "cloudflare:workers";
import { ApiError, CloseCode, type Failure, fail, isFailure } from "../shared/errors.js";
import { log } from "../shared/log.js";
import { PING_TEXT, PONG_TEXT, type ServerMessage, encodeInput } from "../shared/protocol.js";
import {
  type EndReason,
  KILL_GRACE_MS,
  type Session,
  type SessionStatus,
  type SessionTimers as TimerSettings,
  type SignalName,
  type SpawnSpec,
  type TenantEventType,
  canMove,
  isTerminal,
} from "../shared/session.js";
import { type Env, limits, poolStub, sessionKey, tenantStub } from "./env.js";
import { refuseSocket } from "./errors.js";
import { LogReads } from "./log-reads.js";
import { CLIENT_TAG, ClientHub, type StartFrom } from "./client-hub.js";
import { type OutputRange, OutputReads } from "./output-reads.js";
import { type LinkPort, RunnerLinks } from "./runner-links.js";
import { closeQuietly } from "./sockets.js";
import type { SocketSubscriber } from "./subscribers.js";
import { type DeadlineName, SessionTimers } from "./session-timers.js";
import { TenantReports } from "./tenant-reports.js";

export interface CreateRequest {
  tenant: string;
  id: string;
  createdAt: string;
  tags: string[];
  label: string | null;
  spec: SpawnSpec;
  timers: TimerSettings;
}

/** PATCH: the timers (seconds, 0 = off), label and tags. */
export type SessionPatch = Partial<TimerSettings> & { label?: string | null; tags?: string[] };

type SessionRecord = Omit<Session, "offset" | "retainedFrom" | "clients">;

interface Stored {
  tenant: string;
  spec: SpawnSpec;
  record: SessionRecord;
  /** The runner that hosts (or hosted) the process: its in-process log is only there. */
  runnerId?: string | null;
  /**
   * This incarnation of the id: a purged id created again is a new session. Names the output
   * log (`logKey`) and is in every session token, so nothing of an earlier one reaches it.
   */
  incarnation: string;
  /** The host link's credential, given to the placed runner alone in its spawn order. */
  linkToken: string;
  /** Reader links' credential, given in serve orders. */
  readerToken: string;
  /** Why the session is being ended (DELETE or a timer), until the runner confirms the exit. */
  ending?: EndReason;
}

type StartOutcome = "started" | "failed" | "timeout";

/** A host link silent (no heartbeat, no frame) this long is taken for dead when its runner's control socket is too. */
const HEARTBEAT_TIMEOUT_MS = 30_000;

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
  /** Offset of the next output byte: everything below it is stored in the log and acknowledged. */
  private offset: number;
  /** Oldest offset the log still holds, as the runner last reported it. */
  private retainedFrom: number;
  private startWaiter: ((outcome: StartOutcome) => void) | undefined;
  private exitWaiters = new Set<() => void>();
  private readonly reads: LogReads;
  private readonly clients: ClientHub;
  private readonly links: RunnerLinks;
  private readonly outputReads: OutputReads;
  private readonly timers: SessionTimers;
  private readonly reports: TenantReports;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.stored = ctx.storage.kv.get<Stored>("session");
    this.offset = ctx.storage.kv.get<number>("offset") ?? 0;
    this.retainedFrom = ctx.storage.kv.get<number>("retainedFrom") ?? 0;
    // Heartbeats from runners and clients are answered without waking the object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING_TEXT, PONG_TEXT));
    this.reads = new LogReads(
      () => this.links.forReads(),
      () => this.stored !== undefined && !isTerminal(this.stored.record.status),
      () => this.summonReader(),
    );
    this.outputReads = new OutputReads(this.reads, {
      offset: () => this.offset,
      retainedFrom: () => this.retainedFrom,
      noteLeadingGap: (from, to) => this.noteLeadingGap(from, to),
    });
    this.links = new RunnerLinks(ctx, this.reads, {
      offset: () => this.offset,
      output: (offset, data, frame) => this.onOutput(offset, data, frame),
      storeOffset: () => {
        this.ctx.storage.kv.put("offset", this.offset);
        return this.offset;
      },
      hostSaid: (msg) => this.hostSaid(msg),
      logMaybeLost: () => this.clients.forgetCache(),
      hostLinked: () => this.timers.set("grace", undefined),
      hostGone: (code) => this.onHostLinkGone(code),
      keyForLog: () => this.keyForLog(),
    });
    this.clients = new ClientHub(ctx, this.reads, {
      offset: () => this.offset,
      retainedFrom: () => this.retainedFrom,
      noteLeadingGap: (from, to) => this.noteLeadingGap(from, to),
      ended: () => this.stored !== undefined && isTerminal(this.stored.record.status),
      exitMessage: () => this.exitMessage(),
      view: () => this.view(),
      limits: () => limits(this.env),
      keyForLog: () => this.keyForLog(),
      onInput: (sub, bytes) => this.clientInput(sub, bytes),
      onResize: (sub, cols, rows) => this.clientResize(sub, cols, rows),
      onSignal: (sub, signal) => this.clientSignal(sub, signal),
      clientsChanged: () => this.onClientsChanged(),
    });
    this.timers = new SessionTimers(ctx.storage, {
      fire: (name) => this.onDeadline(name),
      clients: () => this.clients.count(),
      keyForLog: () => this.keyForLog(),
    });
    if (this.stored) this.timers.restore(this.stored.record);
    // Each construction is a wake-up (first use, or back from hibernation): `npm run bench` counts them.
    log.debug("session.wake", { key: this.keyForLog(), cause: "construct" });
    this.reports = new TenantReports(
      () => tenantStub(this.env, this.stored?.tenant ?? ""),
      () => this.keyForLog(),
    );
  }

  // ---- RPC, called by the Worker's routes ----

  async create(request: CreateRequest): Promise<Session | Failure> {
    if (this.stored) return fail("CONFLICT", `session ${request.id} already exists`);
    const { tenant, id, spec, timers } = request;
    const now = Date.now();
    this.stored = {
      tenant,
      spec,
      runnerId: null,
      incarnation: crypto.randomUUID(),
      linkToken: randomToken(),
      readerToken: randomToken(),
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
        reason: null,
        ...timers,
        expiresAt: timers.timeoutSec > 0 ? new Date(now + timers.timeoutSec * 1000).toISOString() : null,
      },
    };
    this.save();
    const startTimeoutMs = limits(this.env).startTimeoutMs;
    this.timers.configure(timers, this.stored.record.expiresAt, now);
    // Should this object restart before the runner's link comes, the session fails then.
    this.timers.set("start", now + startTimeoutMs);
    const started = settleWithin<StartOutcome>(startTimeoutMs, "timeout", (resolve) => {
      this.startWaiter = resolve;
    });
    // `created` goes out only once placed; a create that fails leaves no event behind.
    const release = this.reports.hold();
    this.report("session.created");
    const placed = await poolStub(this.env).place({
      type: "spawn",
      key: logKey(this.stored),
      tenant,
      sessionId: id,
      spec,
      linkToken: this.stored.linkToken,
    });
    if (isFailure(placed)) {
      release(false);
      this.startWaiter?.("failed");
      this.stored = undefined;
      this.timers.clear();
      await this.ctx.storage.deleteAlarm();
      await this.ctx.storage.deleteAll();
      return placed;
    }
    release(true);
    log.info("session.placed", { key: sessionKey(tenant, id), runnerId: placed.runnerId });
    this.stored.runnerId = placed.runnerId;
    this.save();
    if ((await started) === "timeout") this.startLate();
    return this.view();
  }

  /**
   * The process has not said it started in time. One decision: if the runner's link has
   * opened, the runner has been told to start it and the session stays `starting` until it
   * says so (late); if not, the session fails now and the link, should it come, is refused,
   * so the runner never starts the process.
   */
  private startLate(): void {
    const stored = this.stored;
    if (!stored || stored.record.status !== "starting") return;
    if (this.links.host()) {
      log.warn("session.start", { key: this.keyForLog(), outcome: "late" });
      return;
    }
    void this.move("failed", { error: "the runner did not open the session's link in time", reason: "failed" });
  }

  get(): Session | Failure {
    return this.stored ? this.view() : this.notFound();
  }

  /** Which incarnation of the id this is (session tokens name it), or null when there is none. */
  incarnation(): string | null {
    return this.stored?.incarnation ?? null;
  }

  input(bytes: Uint8Array): { bytes: number } | Failure {
    const refused = this.refuseUnlessRunning() ?? this.refuseWhileInputFull();
    if (refused) return refused;
    this.links.sendBytes(encodeInput(bytes));
    this.timers.noteActivity(Date.now());
    return { bytes: bytes.byteLength };
  }

  async resize(cols: number, rows: number): Promise<Session | Failure> {
    const refused = this.refuseUnlessRunning();
    if (refused) return refused;
    this.applyResize(cols, rows);
    return this.view();
  }

  signal(signal: SignalName): { signal: string } | Failure {
    const refused = this.refuseUnlessRunning();
    if (refused) return refused;
    this.links.send({ type: "signal", signal });
    return { signal };
  }

  async wait(timeoutMs: number): Promise<Session | Failure> {
    if (!this.stored) return this.notFound();
    if (!isTerminal(this.stored.record.status)) await this.untilExit(timeoutMs);
    return this.view();
  }

  /**
   * DELETE (and a timer that fires): SIGHUP, SIGKILL after the grace, answered once the process
   * is gone; `reason` says why. With `purge`, the record and the log go too.
   */
  async terminate(purge: boolean, reason: EndReason = "deleted"): Promise<Session | Failure> {
    const stored = this.stored;
    if (!stored) return this.notFound();
    if (!isTerminal(stored.record.status)) {
      stored.ending ??= reason;
      this.save();
      if (this.links.host()) {
        this.links.send({ type: "kill", graceMs: KILL_GRACE_MS });
        await this.untilExit(KILL_GRACE_MS + 5000);
      }
      if (!isTerminal(stored.record.status)) {
        await this.move("lost", { error: "the runner did not confirm the process ended", reason: stored.ending });
      }
    }
    const session = this.view();
    if (purge) await this.purge();
    return session;
  }

  /** PATCH: timers (from now), label and tags; owner only (the route checks). */
  patch(patch: SessionPatch): Session | Failure {
    const stored = this.stored;
    if (!stored) return this.notFound();
    const record = stored.record;
    const timerFields = ["timeoutSec", "idleTimeoutSec", "detachedTimeoutSec"] as const;
    if (isTerminal(record.status) && timerFields.some((f) => patch[f] !== undefined)) {
      return fail("SESSION_EXITED", `session has ${record.status}: its timers are over`);
    }
    const now = Date.now();
    if (patch.timeoutSec !== undefined) {
      record.timeoutSec = patch.timeoutSec;
      record.expiresAt = patch.timeoutSec > 0 ? new Date(now + patch.timeoutSec * 1000).toISOString() : null;
    }
    if (patch.idleTimeoutSec !== undefined) record.idleTimeoutSec = patch.idleTimeoutSec;
    if (patch.detachedTimeoutSec !== undefined) record.detachedTimeoutSec = patch.detachedTimeoutSec;
    if (patch.label !== undefined) record.label = patch.label;
    if (patch.tags !== undefined) record.tags = patch.tags;
    this.save();
    if (!isTerminal(record.status)) this.timers.configure(record, record.expiresAt, now);
    this.report("session.updated");
    return this.view();
  }

  /**
   * The pool found this session's runner silent (its control socket): if the host link is
   * silent too, it is taken for gone and the grace starts. The object is woken for this only
   * when a runner goes quiet, never on a schedule.
   */
  async runnerSilent(): Promise<void> {
    const stored = this.stored;
    if (!stored || isTerminal(stored.record.status)) return;
    const silent = this.links.silentFor(Date.now(), HEARTBEAT_TIMEOUT_MS);
    if (!silent || silent === "none") return;
    log.warn("link.heartbeat", { key: this.keyForLog(), outcome: "silent", silentMs: silent.silentMs });
    closeQuietly(silent.link, 1001, "heartbeat timeout");
    await this.onHostLinkGone(1001);
  }

  /** Everything the session stored goes: record, object storage, index entry and log. */
  private async purge(): Promise<void> {
    const stored = this.stored;
    if (!stored) return;
    const session = this.view();
    this.clients.closeAll();
    for (const ws of this.ctx.getWebSockets()) closeQuietly(ws, CloseCode.SessionEnded, "session purged");
    const key = logKey(stored);
    const sent = await poolStub(this.env).dispatch({ type: "purge", key }, stored.tenant, stored.runnerId ?? null);
    if (isFailure(sent)) log.warn("session.purge", { key, outcome: "log_kept", reason: sent.failure.message });
    this.reports.deleted(session);
    await this.reports.settled();
    this.stored = undefined;
    this.offset = 0;
    this.retainedFrom = 0;
    this.timers.clear();
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    log.info("session.purged", { key });
  }

  /** `GET .../output` (output-reads.ts). */
  output(from: number | undefined, to: number | undefined): Promise<OutputRange | Failure> {
    if (!this.stored) return Promise.resolve(this.notFound());
    return this.outputReads.read(from, to, limits(this.env).maxOutputReads);
  }

  // ---- Sockets and streams ----

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname.endsWith("/link")) {
      const stored = this.stored;
      if (!stored) return new Response("no such session", { status: 404 });
      const ended = isTerminal(stored.record.status);
      return this.links.accept(url.searchParams.get("role") === "reader", request.headers, stored, ended);
    }
    const from = parseStart(request.headers.get("x-ptyb-from"));
    if (url.pathname.endsWith("/stream")) {
      if (!this.stored) return Response.json(this.notFound(), { status: 404 });
      return this.clients.openStream(from, request.headers.get("x-ptyb-role") === "owner");
    }
    if (!this.stored) return refuseSocket(new ApiError("NOT_FOUND", "session not found"), request);
    return this.clients.acceptSocket(request, from);
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    try {
      if (this.links.owns(ws)) await this.links.onMessage(ws, message);
      else this.clients.onMessage(ws, message);
    } catch (error) {
      log.error("session.socket", { key: this.keyForLog(), outcome: "handler_error", error });
    }
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    try {
      closeQuietly(ws, 1000, "closed");
      if (this.ctx.getTags(ws).includes(CLIENT_TAG)) return this.clients.onClose(ws);
      await this.links.onClose(ws, code);
    } catch (error) {
      log.error("session.socket", { key: this.keyForLog(), outcome: "close_error", error });
    }
  }

  async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    log.warn("session.socket", { key: this.keyForLog(), outcome: "error", tags: this.ctx.getTags(ws), error });
  }

  /** The session's deadlines (session-timers.ts); set only while one exists. */
  async alarm(): Promise<void> {
    log.debug("session.wake", { key: this.keyForLog(), cause: "alarm" });
    if (!this.stored) return;
    await this.timers.alarm(Date.now());
  }

  private async onDeadline(name: DeadlineName): Promise<void> {
    const stored = this.stored;
    if (!stored) return;
    const status = stored.record.status;
    switch (name) {
      case "purge":
        if (isTerminal(status)) await this.purge();
        return;
      case "start":
        if (status === "starting" && !this.links.host()) {
          await this.move("failed", { error: "the runner did not open the session's link in time", reason: "failed" });
        }
        return;
      case "grace":
        if (!isTerminal(status) && !this.links.host()) {
          await this.move("lost", {
            error: "the runner's link was gone for longer than the grace period",
            reason: "runner_lost",
          });
        }
        return;
      case "timeout":
      case "idle":
      case "detached":
        if (!isTerminal(status)) await this.terminate(false, name === "timeout" ? "timeout" : name);
        return;
    }
  }

  /** The host link is gone (and no other is open): the session waits LINK_GRACE_MS for it. */
  private async onHostLinkGone(code: number): Promise<void> {
    const stored = this.stored;
    if (!stored || isTerminal(stored.record.status)) return;
    log.warn("link.closed", { key: this.keyForLog(), code });
    if (stored.record.status === "starting") {
      this.startWaiter?.("failed");
      await this.move("lost", { error: "the runner's link closed before the process started", reason: "runner_lost" });
      return;
    }
    if (this.timers.get("grace") === undefined) this.timers.set("grace", Date.now() + limits(this.env).linkGraceMs);
  }

  /** Status and log news from the host link (RunnerLinks has checked it is the current one). */
  private async hostSaid(msg: HostNews): Promise<void> {
    switch (msg.type) {
      case "started":
        this.timers.set("start", undefined);
        await this.move("running", { pid: msg.pid });
        this.startWaiter?.("started");
        return;
      case "exited": {
        const reason = msg.reason ?? this.stored?.ending ?? "exit";
        await this.move("exited", { exitCode: msg.exitCode, signal: msg.signal, reason });
        return;
      }
      case "failed":
        await this.move("failed", { error: msg.error, reason: "failed" });
        this.startWaiter?.("failed");
        return;
      case "retained":
        return this.noteRetainedFrom(msg.from);
      case "input_dropped": {
        log.warn("session.input", { key: this.keyForLog(), outcome: "dropped", bytes: msg.bytes });
        const message = `${msg.bytes} bytes of input were dropped: the process is not reading its input`;
        return this.clients.tellWriters("QUOTA_EXCEEDED", message);
      }
    }
  }

  /**
   * Output at the edge's offset: fanned out before the offset moves, since clients restored
   * from hibernation by this very frame take the offset as where they stand. The bytes are in
   * the log already (the runner appends before it sends), so clients need not wait for a
   * write: the offset is stored with the next ack, and an edge that restarts before that
   * resumes from the stored offset while the runner, which drops only acknowledged output,
   * sends the rest again.
   */
  private onOutput(offset: number, data: Uint8Array, frame: ArrayBuffer | undefined): void {
    this.clients.fanOut(offset, data, frame);
    this.offset = offset + data.byteLength;
    this.timers.noteActivity(Date.now());
  }

  /** Clients came or went: the detached timer runs while none is attached; the index shows the count. */
  private onClientsChanged(): void {
    const stored = this.stored;
    if (!stored || isTerminal(stored.record.status)) return;
    this.timers.clientsChanged(this.clients.count(), Date.now());
  }

  /** Tells the tenant's index (and, with `event`, its events) how the session is now. */
  private report(event: TenantEventType | null): void {
    if (this.stored) this.reports.record(this.view(), event);
  }

  /** A read found nothing in [from, to): if that reaches back to the log's start, the start moved. */
  private noteLeadingGap(from: number, to: number): void {
    if (from <= this.retainedFrom) this.noteRetainedFrom(to);
  }

  /** The log starts at `from` or later (a trim, an expiry or a lost Redis moved it on). */
  private noteRetainedFrom(from: number): void {
    const next = Math.min(from, this.offset);
    if (next <= this.retainedFrom) return;
    this.retainedFrom = next;
    this.ctx.storage.kv.put("retainedFrom", next);
  }

  private async summonReader(): Promise<boolean> {
    const stored = this.stored;
    if (!stored) return false;
    const sent = await poolStub(this.env).dispatch(
      {
        type: "serve",
        key: logKey(stored),
        tenant: stored.tenant,
        sessionId: stored.record.id,
        linkToken: stored.readerToken,
      },
      stored.tenant,
      stored.runnerId ?? null,
    );
    return !isFailure(sent);
  }

  // ---- Client requests (from the hub) ----

  /** Input from a client socket: checked per frame against its role, the size and the runner's input bound. */
  private clientInput(sub: SocketSubscriber, bytes: Uint8Array): void {
    const max = limits(this.env).maxInputBytes;
    const refused =
      bytes.byteLength > max
        ? fail("PAYLOAD_TOO_LARGE", `input frame is ${bytes.byteLength} bytes; at most ${max}`)
        : (this.refuseWrite(sub) ?? this.refuseWhileInputFull());
    // A raw client hears no error message: input it cannot deliver ends its socket instead.
    if (refused && sub.kind === "raw" && refused.failure.code === "QUOTA_EXCEEDED") {
      return sub.close(1013, "input refused: the process is not reading its input");
    }
    if (refused) return sub.control({ type: "error", ...refused.failure });
    this.links.sendBytes(encodeInput(bytes));
    this.timers.noteActivity(Date.now());
  }

  private clientResize(sub: SocketSubscriber, cols: number, rows: number): void {
    const refused = this.refuseWrite(sub);
    if (refused) return sub.control({ type: "error", ...refused.failure });
    this.applyResize(cols, rows);
  }

  private clientSignal(sub: SocketSubscriber, signal: SignalName): void {
    const refused = this.refuseWrite(sub);
    if (refused) return sub.control({ type: "error", ...refused.failure });
    this.links.send({ type: "signal", signal });
  }

  // ---- State ----

  private applyResize(cols: number, rows: number): void {
    const stored = this.stored;
    if (!stored) return;
    stored.record.cols = cols;
    stored.record.rows = rows;
    this.save();
    this.links.send({ type: "resize", cols, rows });
    this.clients.broadcast({ type: "resize", cols, rows });
    this.report("session.updated");
  }

  /** Moves the status forward (never back) and tells whoever waits on it. */
  private async move(status: SessionStatus, patch: Partial<SessionRecord>): Promise<void> {
    const stored = this.stored;
    if (!stored || !canMove(stored.record.status, status)) return;
    Object.assign(stored.record, patch, { status });
    const now = Date.now();
    if (isTerminal(status)) {
      stored.record.exitedAt = new Date(now).toISOString();
      stored.record.expiresAt = null;
      stored.ending = undefined;
      // Where output ends is final now: stored with the status, not left to the next ack.
      this.ctx.storage.kv.put("offset", this.offset);
    }
    this.save();
    log.info("session.status", { key: this.keyForLog(), status, reason: stored.record.reason });
    if (isTerminal(status)) {
      // Subscribers still replaying get `exit` once they catch up.
      this.clients.sessionEnded();
      this.links.closeHost();
      for (const resolve of this.exitWaiters) resolve();
      this.exitWaiters.clear();
      // Only the purge is left to wait for, SESSION_RETAIN_SEC from now.
      this.timers.ended(now + limits(this.env).retainSec * 1000);
      // Reads that waited for the host now need a reader.
      this.reads.summon();
    }
    this.report(isTerminal(status) ? "session.exited" : "session.updated");
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

  /** Input, resize and signal from a client: checked per message, not per connection. */
  private refuseWrite(sub: SocketSubscriber): Failure | undefined {
    if (sub.readOnly) return fail("FORBIDDEN", "a viewer may not send input, resize or signal");
    return this.refuseUnlessRunning();
  }

  /** The process has not taken the input it has (the runner's bound): refuse more for now. */
  private refuseWhileInputFull(): Failure | undefined {
    if (!this.links.inputRefused) return undefined;
    return fail("QUOTA_EXCEEDED", "the process is not reading its input; try again when it has taken it", 1);
  }

  private refuseUnlessRunning(): Failure | undefined {
    if (!this.stored) return this.notFound();
    const status = this.stored.record.status;
    if (isTerminal(status)) return fail("SESSION_EXITED", `session has ${status}`);
    if (!this.links.host()) return fail("CONFLICT", "session is not connected to a runner right now");
    return undefined;
  }

  private view(): Session {
    const stored = this.stored;
    if (!stored) throw new Error("no session");
    return {
      ...stored.record,
      offset: this.offset,
      retainedFrom: this.retainedFrom,
      clients: this.clients.count(),
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
      reason: record?.reason ?? null,
      // Where output ends: every byte below it went out on this connection before this message.
      offset: this.offset,
    };
  }

  private save(): void {
    if (this.stored) this.ctx.storage.kv.put("session", this.stored);
  }

  private notFound(): Failure {
    return fail("NOT_FOUND", "session not found");
  }

  private keyForLog(): string | null {
    return this.stored ? sessionKey(this.stored.tenant, this.stored.record.id) : null;
  }
}

/** The start a route passed in `x-ptyb-from`: digits, `live`, or nothing for everything retained. */
function parseStart(value: string | null): StartFrom {
  if (value === "live") return "live";
  if (value !== null && /^\d{1,15}$/.test(value)) return Number(value);
  return "retained";
}

/** The output log's key of one incarnation: `tenant/sessionId/incarnation`. */
function logKey(stored: Stored): string {
  return `${sessionKey(stored.tenant, stored.record.id)}/${stored.incarnation}`;
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** What the host link reports about the process and its log (see RunnerLinks). */
type HostNews = Parameters<LinkPort["hostSaid"]>[0];
