// PtySession: one Durable Object per tenant+session. Wires the parts that own the session's
// state with callbacks and keeps what spans them (create and the start decision, ending and
// purging, the RPCs): SessionRecord (session-record.ts: the record, its forward-only status,
// the offset), RunnerLinks (runner-links.ts: the host and reader links, their
// tokens, acks and input state), ClientHub (client-hub.ts: clients, their replays and bounds),
// SessionTimers (session-timers.ts: the deadlines and the alarm), TenantReports
// (tenant-reports.ts: the tenant's index and events), SessionInput (session-input.ts: input,
// eof, signals and resizes, and who may send them), SessionAgent (session-agent.ts: expect,
// run, commands, screen), OutputReads (output-reads.ts: `GET .../output` and exec's answer),
// LogReads (log-reads.ts: reads of the output log through a runner) and recordings
// (recording.ts).
import { DurableObject } from "cloudflare:workers";
import { ApiError, CloseCode, type Failure, fail, isFailure } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import { type OutputStream, PING_TEXT, PONG_TEXT } from "../../shared/protocol.js";
import {
  type EndReason,
  KILL_GRACE_MS,
  type Session,
  type SessionStatus,
  type SignalName,
  type TenantEventType,
  isTerminal,
} from "../../shared/session.js";
import type { CommandRecord, ExpectResult, RunResult, ScreenSnapshot } from "../../shared/agent.js";
import { type Env, limits, poolStub, tenantStub } from "../env.js";
import { SessionAgent } from "../agent/session-agent.js";
import { refuseSocket } from "../io/sockets.js";
import { LogReads } from "../link/log-reads.js";
import { CLIENT_TAG, ClientHub, type StartFrom } from "../clients/client-hub.js";
import { OutputCapture } from "./output-capture.js";
import { OutputReads } from "../link/output-reads.js";
import { recordingResponse } from "../link/recording.js";
import { type LinkPort, RunnerLinks } from "../link/runner-links.js";
import { type RecordFields, SessionRecord } from "./session-record.js";
import { type DeadlineName, SessionTimers } from "./session-timers.js";
import { SessionInput } from "./session-input.js";
import { SizePolicy } from "./size-policy.js";
import { closeQuietly } from "../io/sockets.js";
import { TenantReports } from "./tenant-reports.js";
import type { CreateRequest, ExpectQuery, InputAnswer, OutputRange, SessionPatch, SessionRpc, StreamsRange } from "../rpc.js";

type StartOutcome = "started" | "failed" | "timeout";

/** A retention purge that could not reach a runner or the tenant tries again this much later, this many times. */
const PURGE_RETRY_MS = 60_000;
const PURGE_TRIES = 10;

/** How long run's answer waits for the output up to its `to` to reach the edge. */
const OUTPUT_CATCH_UP_MS = 5000;

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

export class PtySession extends DurableObject<Env> implements SessionRpc {
  private readonly record: SessionRecord;
  private startWaiter: ((outcome: StartOutcome) => void) | undefined;
  private exitWaiters = new Set<() => void>();
  /** Callers waiting for the output to reach an offset (run's answer). */
  private offsetWaiters = new Set<{ offset: number; resolve: () => void }>();
  private readonly reads: LogReads;
  private readonly clients: ClientHub;
  private readonly links: RunnerLinks;
  private readonly outputReads: OutputReads;
  private readonly timers: SessionTimers;
  private readonly reports: TenantReports;
  /** What goes into the process, and who may send it (session-input.ts). */
  private readonly inputs: SessionInput;
  private readonly agent: SessionAgent;
  /** exec: the first bytes of output, kept while the exec route waits for the exit. */
  private capture: OutputCapture | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.record = new SessionRecord(ctx.storage);
    // Heartbeats from runners and clients are answered without waking the object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING_TEXT, PONG_TEXT));
    this.reads = new LogReads(
      () => this.links.forReads(),
      () => this.record.current !== undefined && !this.record.ended,
      () => this.summonReader(),
    );
    this.outputReads = new OutputReads(this.reads, {
      offset: () => this.record.offset,
      retainedFrom: () => this.record.retainedFrom,
      noteLeadingGap: (from, to) => this.record.noteLeadingGap(from, to),
    });
    this.agent = new SessionAgent(ctx.storage.sql, ctx.storage.kv, {
      host: () => this.links.host(),
      reader: () => this.links.reader(),
      summonReader: () => this.summonReader(),
      keyForLog: () => this.keyForLog(),
      offset: () => this.record.offset,
      retainedFrom: () => this.record.retainedFrom,
      ended: () => this.record.ended,
      size: () => ({ cols: this.record.current?.record.cols ?? 80, rows: this.record.current?.record.rows ?? 24 }),
      watch: (sub, from) => this.clients.watch(sub, from),
      unwatch: (sub) => this.clients.unwatch(sub),
      watchFull: () => this.clients.watchFull,
      broadcast: (message) => this.clients.broadcast(message),
    });
    this.links = new RunnerLinks(ctx, this.reads, this.agent.calls, {
      offset: () => this.record.offset,
      output: (offset, data, stream, frame) => this.onOutput(offset, data, stream, frame),
      storeOffset: () => {
        this.agent.marks.persist();
        return this.record.storeOffset();
      },
      hostSaid: (msg) => this.hostSaid(msg),
      logMaybeLost: () => this.clients.forgetCache(),
      hostLinked: () => this.timers.set("grace", undefined),
      hostGone: (code) => this.onHostLinkGone(code),
      keyForLog: () => this.keyForLog(),
    });
    this.clients = new ClientHub(ctx, this.reads, {
      offset: () => this.record.offset,
      retainedFrom: () => this.record.retainedFrom,
      noteLeadingGap: (from, to) => this.record.noteLeadingGap(from, to),
      ended: () => this.record.ended,
      exitMessage: () => this.record.exitMessage(),
      view: () => this.view(),
      limits: () => limits(this.env),
      keyForLog: () => this.keyForLog(),
      onInput: (sub, bytes) => this.inputs.fromClient(sub, bytes),
      onResize: (sub, cols, rows) => this.inputs.clientResize(sub, cols, rows),
      onSignal: (sub, signal) => this.inputs.clientSignal(sub, signal),
      onEof: (sub) => this.inputs.clientEof(sub),
      clientsChanged: () => this.onClientsChanged(),
      screen: () => this.screen(),
    });
    this.inputs = new SessionInput(
      {
        status: () => this.record.current?.record.status,
        isTty: () => this.record.isTty,
        stdinClosed: () => this.record.stdinClosed,
        closeStdin: () => this.record.closeStdin(),
        size: () => this.record.current?.record,
        offset: () => this.record.offset,
        hasHost: () => this.links.host() !== undefined,
        inputRefused: () => this.links.inputRefused,
        sendBytes: (frame) => this.links.sendBytes(frame),
        send: (message) => this.links.send(message),
        applyResize: (cols, rows) => this.applyResize(cols, rows),
        noteActivity: (now) => this.timers.noteActivity(now),
        maxInputBytes: () => limits(this.env).maxInputBytes,
        keyForLog: () => this.keyForLog(),
      },
      new SizePolicy(ctx.storage, (id) => this.clients.connected(id)),
      this.agent.idempotency,
    );
    this.timers = new SessionTimers(ctx.storage, {
      fire: (name) => this.onDeadline(name),
      clients: () => this.clients.count(),
      keyForLog: () => this.keyForLog(),
    });
    const stored = this.record.current;
    if (stored) this.timers.restore(stored.record);
    // A session that ended before retention existed gets its purge when it is next woken.
    if (stored?.record.exitedAt && this.record.ended && this.timers.get("purge") === undefined) {
      this.timers.set("purge", Date.parse(stored.record.exitedAt) + limits(env).retainSec * 1000);
    }
    // Each construction is a wake-up (first use, or back from hibernation): `npm run bench` counts them.
    log.debug("session.wake", { key: this.keyForLog(), cause: "construct" });
    this.reports = new TenantReports(
      () => tenantStub(this.env, this.record.current?.tenant ?? ""),
      () => this.keyForLog(),
    );
  }

  // ---- RPC, called by the Worker's routes ----

  async create(request: CreateRequest): Promise<Session | Failure> {
    if (this.record.current) return fail("CONFLICT", `session ${request.id} already exists`);
    const now = Date.now();
    const stored = this.record.begin(request, now);
    if (request.captureBytes !== undefined) this.capture = new OutputCapture(request.captureBytes);
    const startTimeoutMs = limits(this.env).startTimeoutMs;
    this.timers.configure(request.timers, stored.record.expiresAt, now);
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
      key: this.record.logKey(),
      tenant: request.tenant,
      sessionId: request.id,
      spec: request.spec,
      linkToken: stored.linkToken,
    });
    if (isFailure(placed)) {
      release(false);
      this.startWaiter?.("failed");
      await this.forgetAll();
      return placed;
    }
    release(true);
    log.info("session.placed", { key: this.keyForLog(), runnerId: placed.runnerId });
    this.record.placed(placed.runnerId);
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
    if (this.record.current?.record.status !== "starting") return;
    if (this.links.host()) {
      log.warn("session.start", { key: this.keyForLog(), outcome: "late" });
      return;
    }
    void this.move("failed", { error: "the runner did not open the session's link in time", reason: "failed" });
  }

  get(): Session | Failure {
    return this.record.current ? this.view() : this.notFound();
  }

  /** Which incarnation of the id this is (session tokens name it), or null when there is none. */
  incarnation(): string | null {
    return this.record.current?.incarnation ?? null;
  }

  /** REST input, with Idempotency-Key and eof (session-input.ts). */
  input(bytes: Uint8Array, idempotency?: { key: string; bodyHash: string }, eof = false): InputAnswer | Failure {
    return this.inputs.rest(bytes, idempotency, eof);
  }

  /** `POST .../expect` (expect-watch.ts): answers when the output from `from` matches, or not. */
  expect(request: ExpectQuery): Promise<ExpectResult | Failure> {
    if (!this.record.current) return Promise.resolve(this.notFound());
    return this.agent.expect(request);
  }

  /** `POST .../run`: the host's shell runs `command` (runner/shell-tracker.ts). */
  async run(command: string, timeoutMs: number): Promise<RunResult | Failure> {
    const refused = this.inputs.refuseUnlessRunning() ?? this.inputs.refuseUnlessTty() ?? this.inputs.refuseWhileFull();
    if (refused) return refused;
    this.timers.noteActivity(Date.now());
    const result = await this.agent.run(command, timeoutMs);
    // The runner answers on the link as soon as the command ends, while its output still waits
    // for the log's append: the answer goes once the edge holds output up to its `to`, so a
    // `GET .../output` of that range right after it has every byte.
    if (!("failure" in result)) await this.outputReached(result.to, OUTPUT_CATCH_UP_MS);
    return result;
  }

  /** Resolves once the edge's offset is at least `offset`, or after `timeoutMs`. */
  private outputReached(offset: number, timeoutMs: number): Promise<void> {
    if (this.record.offset >= offset) return Promise.resolve();
    let waiter: { offset: number; resolve: () => void } | undefined;
    return settleWithin<void>(timeoutMs, undefined, (resolve) => {
      waiter = { offset, resolve };
      this.offsetWaiters.add(waiter);
    }).finally(() => {
      if (waiter) this.offsetWaiters.delete(waiter);
    });
  }

  /** `GET .../commands`: the newest `limit`, oldest first. */
  commandList(limit: number): { commands: CommandRecord[] } | Failure {
    if (!this.record.current) return this.notFound();
    return this.agent.commandList(limit);
  }

  /** `GET .../screen`. */
  screen(): Promise<ScreenSnapshot | Failure> {
    if (!this.record.current) return Promise.resolve(this.notFound());
    const refused = this.inputs.refuseUnlessTty();
    if (refused) return Promise.resolve(refused);
    return this.agent.screen();
  }

  async resize(cols: number, rows: number): Promise<Session | Failure> {
    return this.inputs.resize(cols, rows) ?? this.view();
  }

  signal(signal: SignalName): { signal: string } | Failure {
    return this.inputs.signal(signal) ?? { signal };
  }

  async wait(timeoutMs: number): Promise<Session | Failure> {
    if (!this.record.current) return this.notFound();
    if (!this.record.ended) await this.untilExit(timeoutMs);
    return this.view();
  }

  /**
   * DELETE (and a timer that fires): SIGHUP, SIGKILL after the grace, answered once the process
   * is gone; `reason` says why. With `purge`, the record and the log go too.
   */
  async terminate(purge: boolean, reason: EndReason = "deleted"): Promise<Session | Failure> {
    if (!this.record.current) return this.notFound();
    if (!this.record.ended) {
      const why = this.record.ending(reason);
      if (this.links.host()) {
        // exec's timeout kills at once; everything else gets SIGHUP and a grace.
        const signal = reason === "timeout" ? this.record.current?.timeoutSignal : undefined;
        this.links.send(signal ? { type: "kill", graceMs: 0, signal } : { type: "kill", graceMs: KILL_GRACE_MS });
        await this.untilExit(KILL_GRACE_MS + 5000);
      }
      if (!this.record.ended) {
        await this.move("lost", { error: "the runner did not confirm the process ended", reason: why });
      }
    }
    const session = this.view();
    if (purge) await this.purge();
    return session;
  }

  /** PATCH: timers (from now), label and tags; owner only (the route checks). */
  patch(patch: SessionPatch): Session | Failure {
    const now = Date.now();
    const refused = this.record.patch(patch, now);
    if (refused) return refused;
    const stored = this.record.current;
    if (stored && !this.record.ended) this.timers.configure(stored.record, stored.record.expiresAt, now);
    this.report("session.updated");
    return this.view();
  }

  /**
   * The pool found this session's runner silent (its control socket): if the host link is
   * silent too, it is taken for gone and the grace starts. The object is woken for this only
   * when a runner goes quiet, never on a schedule.
   */
  async runnerSilent(): Promise<void> {
    if (!this.record.current || this.record.ended) return;
    const silent = this.links.silentFor(Date.now(), HEARTBEAT_TIMEOUT_MS);
    if (!silent || silent === "none") return;
    log.warn("link.heartbeat", { key: this.keyForLog(), outcome: "silent", silentMs: silent.silentMs });
    closeQuietly(silent.link, 1001, "heartbeat timeout");
    await this.onHostLinkGone(1001);
  }

  /**
   * Everything the session stored goes: record, object storage, index entry and log. The
   * retention purge is `patient`: while no runner can drop the log or the tenant cannot take
   * the news, it tries again later (PURGE_RETRY_MS, PURGE_TRIES times) rather than leave a log
   * or an index row behind; DELETE ?purge=true goes ahead at once.
   */
  private async purge(patient = false): Promise<void> {
    const stored = this.record.current;
    if (!stored) return;
    const key = this.record.logKey();
    const tries = (this.ctx.storage.kv.get<number>("purgeTries") ?? 0) + 1;
    const later = patient && tries < PURGE_TRIES;
    const sent = await poolStub(this.env).dispatch({ type: "purge", key }, stored.tenant, stored.runnerId ?? null);
    if (isFailure(sent)) {
      log.warn("session.purge", { key, outcome: later ? "retry" : "log_kept", tries, reason: sent.failure.message });
      if (later) return this.purgeLater(tries);
    }
    const session = this.view();
    if (!(await this.reports.deleted(session)) && later) return this.purgeLater(tries);
    this.clients.closeAll();
    for (const ws of this.ctx.getWebSockets()) closeQuietly(ws, CloseCode.SessionEnded, "session purged");
    await this.forgetAll();
    log.info("session.purged", { key });
  }

  private purgeLater(tries: number): void {
    this.ctx.storage.kv.put("purgeTries", tries);
    this.timers.set("purge", Date.now() + PURGE_RETRY_MS);
  }

  /** Memory and storage both forget the session (purged, or never placed). */
  private async forgetAll(): Promise<void> {
    this.record.discard();
    this.agent.forget();
    this.timers.clear();
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
  }

  /** `GET .../output` (output-reads.ts). */
  output(from: number | undefined, to: number | undefined, stream?: OutputStream): Promise<OutputRange | Failure> {
    if (!this.record.current) return Promise.resolve(this.notFound());
    return this.outputReads.read(from, to, limits(this.env).maxOutputReads, stream);
  }

  /** exec's answer: the first `maxBytes` of the output, stdout and stderr apart (captured as it came, else read). */
  outputStreams(maxBytes: number): Promise<StreamsRange | Failure> {
    if (!this.record.current) return Promise.resolve(this.notFound());
    const captured = this.record.ended ? this.capture?.result(maxBytes) : undefined;
    this.capture = undefined;
    if (captured) return Promise.resolve(captured);
    return this.outputReads.readStreams(maxBytes, limits(this.env).maxOutputReads);
  }

  // ---- Sockets and streams ----

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const stored = this.record.current;
    if (url.pathname.endsWith("/link")) {
      if (!stored) return new Response("no such session", { status: 404 });
      return this.links.accept(url.searchParams.get("role") === "reader", request.headers, stored, this.record.ended);
    }
    const from = parseStart(request.headers.get("x-ptyb-from"));
    if (url.pathname.endsWith("/stream")) {
      if (!stored) return Response.json(this.notFound(), { status: 404 });
      return this.clients.openStream(from, request.headers.get("x-ptyb-role") === "owner");
    }
    if (url.pathname.endsWith("/recording")) {
      if (!stored) return Response.json(this.notFound(), { status: 404 });
      const range = this.outputReads.clamp(parseOffset(url.searchParams.get("from")), parseOffset(url.searchParams.get("to")));
      const { createdAt, cols, rows } = stored.record;
      return recordingResponse(this.reads, { from: range.start, to: range.end }, { createdAt: Date.parse(createdAt), cols, rows });
    }
    if (!stored) return refuseSocket(new ApiError("NOT_FOUND", "session not found"), request);
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
    if (!this.record.current) return;
    await this.timers.alarm(Date.now());
  }

  private async onDeadline(name: DeadlineName): Promise<void> {
    const status = this.record.current?.record.status;
    if (!status) return;
    switch (name) {
      case "purge":
        if (isTerminal(status)) await this.purge(true);
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
    const status = this.record.current?.record.status;
    if (!status || isTerminal(status)) return;
    log.warn("link.closed", { key: this.keyForLog(), code });
    if (status === "starting") {
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
        const reason = msg.reason ?? this.record.current?.ending ?? "exit";
        await this.move("exited", { exitCode: msg.exitCode, signal: msg.signal, reason });
        return;
      }
      case "failed":
        await this.move("failed", { error: msg.error, reason: "failed" });
        this.startWaiter?.("failed");
        return;
      case "retained":
        return this.record.noteRetainedFrom(msg.from);
      case "command":
        return this.agent.commandEnded(msg);
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
  private onOutput(offset: number, data: Uint8Array, stream: OutputStream, frame: ArrayBuffer | undefined): void {
    this.clients.fanOut(offset, data, stream, frame);
    this.capture?.take(offset, data, stream);
    if (this.record.isTty) this.agent.marks.output(offset, data);
    this.record.advance(offset + data.byteLength);
    for (const waiter of this.offsetWaiters) if (waiter.offset <= this.record.offset) waiter.resolve();
    this.timers.noteActivity(Date.now());
  }

  /** Clients came or went: the detached timer runs while none is attached; the index shows the count. */
  private onClientsChanged(): void {
    if (!this.record.current || this.record.ended) return;
    this.timers.clientsChanged(this.clients.count(), Date.now());
    this.report(null);
  }

  /** Tells the tenant's index (and, with `event`, its events) how the session is now. */
  private report(event: TenantEventType | null): void {
    if (this.record.current) this.reports.record(this.view(), event);
  }

  private async summonReader(): Promise<boolean> {
    const stored = this.record.current;
    if (!stored) return false;
    const sent = await poolStub(this.env).dispatch(
      {
        type: "serve",
        key: this.record.logKey(),
        tenant: stored.tenant,
        sessionId: stored.record.id,
        linkToken: stored.readerToken,
      },
      stored.tenant,
      stored.runnerId ?? null,
    );
    return !isFailure(sent);
  }

  // ---- State ----

  private applyResize(cols: number, rows: number): void {
    if (!this.record.current) return;
    this.record.resize(cols, rows);
    this.links.send({ type: "resize", cols, rows });
    this.clients.broadcast({ type: "resize", cols, rows });
    this.report("session.updated");
  }

  /** Moves the status forward (never back) and tells whoever waits on it. */
  private async move(status: SessionStatus, patch: Partial<RecordFields>): Promise<void> {
    const now = Date.now();
    if (!this.record.move(status, patch, now)) return;
    log.info("session.status", { key: this.keyForLog(), status, reason: this.record.current?.record.reason });
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

  private view(): Session {
    return this.record.view(this.clients.count());
  }

  private notFound(): Failure {
    return fail("NOT_FOUND", "session not found");
  }

  private keyForLog(): string | null {
    return this.record.keyForLog();
  }
}

/** An offset a route passed (digits), or undefined. */
function parseOffset(value: string | null): number | undefined {
  return value !== null && /^\d{1,15}$/.test(value) ? Number(value) : undefined;
}

/** The start a route passed in `x-ptyb-from`: digits, `live`, or nothing for everything retained. */
function parseStart(value: string | null): StartFrom {
  if (value === "live" || value === "screen") return value;
  if (value !== null && /^\d{1,15}$/.test(value)) return Number(value);
  return "retained";
}

/** What the host link reports about the process and its log (see RunnerLinks). */
type HostNews = Parameters<LinkPort["hostSaid"]>[0];
