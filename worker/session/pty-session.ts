// PtySession: one Durable Object per tenant+session. It wires the parts that own the session's
// state with callbacks, forwards the Durable Object's entry points (RPC, fetch, sockets, alarm)
// to them, and keeps only what spans them (the status moves, the host link's news, the tenant's
// reports): SessionRecord (session-record.ts: the record, its forward-only status, the offset),
// SessionStart (session-start.ts: create, placement and the start decision), SessionEnd
// (session-end.ts: every way a session ends, waiting for the end, purging), SessionTimers
// (session-timers.ts: the deadlines and the alarm), SessionInput (session-input.ts: input, eof,
// signals and resizes, and who may send them), SessionOutput (session-output.ts: output as it
// arrives, `GET .../output`, exec's answer, recordings), TenantReports (tenant-reports.ts: the
// tenant's index and events), RunnerLinks (link/runner-links.ts: the host and reader links,
// their tokens, acks and input state), LogReads (link/log-reads.ts: reads of the output log
// through a runner), ClientHub (clients/client-hub.ts: clients, their replays and bounds) and
// SessionAgent (agent/session-agent.ts: expect, run, commands, screen).
import { DurableObject } from "cloudflare:workers";
import type { CommandRecord, ExpectResult, RunResult, ScreenSnapshot } from "../../shared/agent.js";
import { ApiError, type Failure, fail, isFailure } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import { type OutputStream, PING_TEXT, PONG_TEXT } from "../../shared/protocol.js";
import { type EndReason, type Session, type SessionStatus, type SignalName, type TenantEventType, isTerminal } from "../../shared/session.js";
import { SessionAgent } from "../agent/session-agent.js";
import { CLIENT_TAG, ClientHub, type StartFrom } from "../clients/client-hub.js";
import { clientCredential } from "../clients/hub-port.js";
import { offsetRefusal } from "../clients/replays.js";
import { type Env, limits, poolStub, tenantStub } from "../env.js";
import { closeQuietly, refuseSocket } from "../io/sockets.js";
import { LogReads } from "../link/log-reads.js";
import { type LinkPort, RunnerLinks } from "../link/runner-links.js";
import type { CreateRequest, ExpectQuery, InputAnswer, OutputRange, SessionAsked, SessionPatch, SessionRpc, StreamsRange } from "../rpc.js";
import { SessionEnd } from "./session-end.js";
import { SessionInput } from "./session-input.js";
import { SessionOutput } from "./session-output.js";
import { type RecordFields, SessionRecord } from "./session-record.js";
import { SessionStart } from "./session-start.js";
import { SessionTimers } from "./session-timers.js";
import { SizePolicy } from "./size-policy.js";
import { TenantReports } from "./tenant-reports.js";

/** How long run's answer waits for the output up to its `to` to reach the edge. */
const OUTPUT_CATCH_UP_MS = 5000;

export class PtySession extends DurableObject<Env> implements SessionRpc {
  private readonly record: SessionRecord;
  private readonly reads: LogReads;
  private readonly outputs: SessionOutput;
  private readonly clients: ClientHub;
  private readonly links: RunnerLinks;
  private readonly timers: SessionTimers;
  private readonly start: SessionStart;
  private readonly end: SessionEnd;
  private readonly reports: TenantReports;
  /** What goes into the process, and who may send it (session-input.ts). */
  private readonly inputs: SessionInput;
  private readonly agent: SessionAgent;

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
    this.outputs = new SessionOutput(this.record, this.reads, {
      fanOut: (offset, data, stream, frame) => this.clients.fanOut(offset, data, stream, frame),
      marks: (offset, data) => this.agent.marks.output(offset, data),
      noteActivity: (now) => this.timers.noteActivity(now),
      maxOutputReads: () => limits(this.env).maxOutputReads,
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
      output: (offset, data, stream, frame) => this.outputs.arrived(offset, data, stream, frame),
      storeOffset: () => {
        this.agent.marks.persist();
        return this.record.storeOffset();
      },
      hostSaid: (msg) => this.hostSaid(msg),
      inputAcked: (acks) => this.inputs.acked(acks),
      logMaybeLost: () => this.clients.forgetCache(),
      offsetExact: () => this.clients.refuseAhead(),
      hostLinked: () => this.timers.set("grace", undefined),
      stdinClosed: () => this.record.stdinClosed,
      hostGone: (code) => this.end.hostGone(code),
      keyForLog: () => this.keyForLog(),
    });
    this.clients = new ClientHub(ctx, this.reads, {
      offset: () => this.record.offset,
      retainedFrom: () => this.record.retainedFrom,
      noteLeadingGap: (from, to) => this.record.noteLeadingGap(from, to),
      ended: () => this.record.ended,
      offsetExact: () => this.offsetExact(),
      exitMessage: () => this.record.exitMessage(),
      view: () => this.view(),
      limits: () => limits(this.env),
      keyForLog: () => this.keyForLog(),
      onInput: (sub, bytes) => this.inputs.fromClient(sub, bytes),
      onNumberedInput: (sub, offset, bytes) => this.inputs.fromWriter(sub, offset, bytes),
      writerAcked: (key) => this.inputs.writerAcked(key),
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
        sendInput: (piece) => this.links.sendInput(piece),
        tellWriter: (key, message) => this.clients.tellWriter(key, message),
        sendEof: () => this.links.sendEof(),
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
      fire: async (name) => {
        if (name === "start") return this.start.due();
        // A held session's timer ends it as DELETE does: no process to wait for.
        if (name === "timeout" || name === "idle" || name === "detached") await this.start.endHeld(name);
        return this.end.due(name);
      },
      clients: () => this.clients.count(),
      keyForLog: () => this.keyForLog(),
    });
    const stored = this.record.current;
    if (stored) this.timers.restore(stored.record);
    this.start = new SessionStart(this.record, this.timers, {
      hasHost: () => this.links.host() !== undefined,
      move: (status, patch) => this.move(status, patch),
      view: () => this.view(),
      pool: () => poolStub(this.env),
      capture: (bytes) => this.outputs.startCapture(bytes),
      startTimeoutMs: () => limits(this.env).startTimeoutMs,
      holdReports: () => this.reports.hold(),
      report: (event) => this.report(event),
      forget: () => this.end.forget(),
    });
    this.end = new SessionEnd(ctx, this.record, this.timers, {
      limits: () => limits(this.env),
      hasHost: () => this.links.host() !== undefined,
      hostSilentFor: (now, limitMs) => this.links.silentFor(now, limitMs),
      send: (message) => this.links.send(message),
      closeHost: () => this.links.closeHost(),
      tellClients: () => this.clients.sessionEnded(),
      readsNeedReader: () => this.reads.summon(),
      lostWhileStarting: () => this.start.linkLost(),
      move: (status, patch) => this.move(status, patch),
      view: () => this.view(),
      pool: () => poolStub(this.env),
      reportDeleted: (session) => this.reports.deleted(session),
      closeClients: () => this.clients.closeAll(),
      forgetMemory: () => this.agent.forget(),
    });
    // Each construction is a wake-up (first use, or back from hibernation): `npm run bench` counts them.
    log.debug("session.wake", { key: this.keyForLog(), cause: "construct" });
    this.reports = new TenantReports(
      () => tenantStub(this.env, this.record.current?.tenant ?? ""),
      () => this.keyForLog(),
    );
  }

  // ---- RPC, called by the Worker's routes ----

  /** `POST /v1/sessions` (session-start.ts). */
  create(request: CreateRequest): Promise<Session | Failure> {
    return this.start.create(request);
  }

  get(): Session | Failure {
    return this.record.current ? this.view() : this.notFound();
  }

  /** Which incarnation of the id this is (session tokens name it), or null when there is none. */
  incarnation(): string | null {
    return this.record.current?.incarnation ?? null;
  }

  /** What the session was created with (the compatibility routes show its env); owner only (the route checks). */
  asked(): SessionAsked | Failure {
    const stored = this.record.current;
    return stored ? { spec: stored.spec, lazy: stored.lazy === true } : this.notFound();
  }

  /** REST input, with Idempotency-Key and eof (session-input.ts). */
  input(bytes: Uint8Array, idempotency?: { key: string; bodyHash: string }, eof = false): InputAnswer | Failure {
    return this.inputs.rest(bytes, idempotency, eof);
  }

  /** `POST .../expect` (agent/expect-watch.ts): answers when the output from `from` matches, or not. */
  expect(request: ExpectQuery): Promise<ExpectResult | Failure> {
    if (!this.record.current) return Promise.resolve(this.notFound());
    return this.agent.expect(request);
  }

  /** `POST .../run`: the host's shell runs `command` (runner/agent/shell-tracker.ts). */
  async run(command: string, timeoutMs: number): Promise<RunResult | Failure> {
    const refused = this.inputs.refuseUnlessRunning() ?? this.inputs.refuseUnlessTty() ?? this.inputs.refuseWhileFull();
    if (refused) return refused;
    this.timers.noteActivity(Date.now());
    const result = await this.agent.run(command, timeoutMs);
    // The runner answers on the link as soon as the command ends, while its output still waits
    // for the log's append: the answer goes once the edge holds output up to its `to`, so a
    // `GET .../output` of that range right after it has every byte.
    if (!("failure" in result)) await this.outputs.reached(result.to, OUTPUT_CATCH_UP_MS);
    return result;
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

  /** `GET .../wait` (session-end.ts). */
  wait(timeoutMs: number): Promise<Session | Failure> {
    return this.end.wait(timeoutMs);
  }

  /** DELETE, and `?purge=true` (session-end.ts). */
  async terminate(purge: boolean, reason: EndReason = "deleted"): Promise<Session | Failure> {
    // A held session has no process yet: it ends at once (session-start.ts).
    await this.start.endHeld(reason);
    return this.end.terminate(purge, reason);
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

  /** The pool found this session's runner silent (session-end.ts). */
  runnerSilent(): Promise<void> {
    return this.end.runnerSilent();
  }

  /** A runner trimmed this incarnation's log (the tenant bound); another incarnation's trim changes nothing. */
  logTrimmed(incarnation: string, from: number): void {
    if (this.record.current?.incarnation === incarnation) this.record.noteRetainedFrom(from);
  }

  /** `GET .../output` (session-output.ts). */
  output(from: number | undefined, to: number | undefined, stream?: OutputStream): Promise<OutputRange | Failure> {
    if (!this.record.current) return Promise.resolve(this.notFound());
    const refused = offsetRefusal(from, this.record.offset, this.offsetExact());
    if (refused) return Promise.resolve(fail(refused.code, refused.message));
    return this.outputs.read(from, to, stream);
  }

  /** exec's answer: the first `maxBytes` of the output, stdout and stderr apart (session-output.ts). */
  outputStreams(maxBytes: number): Promise<StreamsRange | Failure> {
    if (!this.record.current) return Promise.resolve(this.notFound());
    return this.outputs.streams(maxBytes);
  }

  // ---- Sockets and streams ----

  closeKey(keyId: string): number {
    return this.clients.closeKey(keyId);
  }

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
      return this.clients.openStream(from, clientCredential(request.headers));
    }
    if (url.pathname.endsWith("/recording")) {
      if (!stored) return Response.json(this.notFound(), { status: 404 });
      const recordFrom = parseOffset(url.searchParams.get("from"));
      // The same rule as `GET .../output` (docs/protocol.md §5, "An offset past the end").
      const refused = offsetRefusal(recordFrom, this.record.offset, this.offsetExact());
      if (refused) return Response.json(refused.toBody(), { status: refused.status });
      return this.outputs.recording(recordFrom, parseOffset(url.searchParams.get("to")), stored.record);
    }
    if (!stored) return refuseSocket(new ApiError("NOT_FOUND", "session not found"), request);
    // A held session starts when its first client connects, which is let in once it has (session-start.ts).
    if (this.start.launches) await this.start.launch();
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

  // ---- What spans the parts ----

  /** Status and log news from the host link (RunnerLinks has checked it is the current one). */
  private async hostSaid(msg: HostNews): Promise<void> {
    switch (msg.type) {
      case "started":
        return this.start.started(msg);
      case "exited":
        return this.end.processExited(msg);
      case "failed":
        return this.start.failed(msg.error);
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

  /** Moves the status forward (never back) and tells whoever waits on it. */
  private async move(status: SessionStatus, patch: Partial<RecordFields>): Promise<void> {
    const now = Date.now();
    if (!this.record.move(status, patch, now)) return;
    log.info("session.status", { key: this.keyForLog(), status, reason: this.record.current?.record.reason });
    if (isTerminal(status)) this.end.ended(now);
    this.report(isTerminal(status) ? "session.exited" : "session.updated");
  }

  private applyResize(cols: number, rows: number): void {
    if (!this.record.current) return;
    this.record.resize(cols, rows);
    this.links.send({ type: "resize", cols, rows });
    this.clients.broadcast({ type: "resize", cols, rows });
    this.report("session.updated");
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

  /** Asks the pool for a runner to open a reader link (log reads and screens with no host). */
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

  /** Whether no client can hold an offset past the edge's (clients/replays.ts, offsetRefusal). */
  private offsetExact(): boolean {
    return this.record.ended || this.links.offsetExact;
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
