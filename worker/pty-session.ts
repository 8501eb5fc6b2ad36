// PtySession: one Durable Object per tenant+session. Holds the session record, its
// forward-only status and the offset of the output it has received; accepts the runner's
// links (host and reader, each with its link token), acknowledges output to the runner, and
// hands output, clients and their replays to the ClientHub (client-hub.ts), which it wires
// with callbacks. Log reads go through LogReads (log-reads.ts).
import { DurableObject } from "cloudflare:workers";
import { ApiError, CloseCode, type Failure, fail, isFailure } from "../shared/errors.js";
import { log } from "../shared/log.js";
import {
  type EdgeLinkMessage,
  PING_TEXT,
  PONG_TEXT,
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
import { runnerFromHeaders } from "./auth.js";
import { refuseSocket } from "./errors.js";
import { LogReads, type ReadHandler } from "./log-reads.js";
import { CLIENT_TAG, ClientHub, READ_PIECE_BYTES, type StartFrom } from "./client-hub.js";
import { closeQuietly, sendQuietly } from "./sockets.js";
import type { SocketSubscriber } from "./subscribers.js";

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
}


export interface OutputRange {
  from: number;
  to: number;
  bytes: Uint8Array<ArrayBuffer>;
}

type StartOutcome = "started" | "failed" | "timeout";



const Tag = {
  Link: "link",
  Reader: "reader",
} as const;

/** Most bytes one `GET .../output` answers with; `X-Offset-To` says where to go on from. */
export const MAX_OUTPUT_RESPONSE_BYTES = 8 << 20;
/** Output acknowledged to the runner at the latest after this many bytes or this delay. */
const ACK_BYTES = 256 << 10;
const ACK_DELAY_MS = 250;
/** A host link silent (no heartbeat, no frame) this long is taken for dead. */
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
  /** A storage sync for the runner's ack is in flight. */
  private syncing = false;
  /** The offset the last sync was started for, and the timer of the next one. */
  private ackRequested = 0;
  private ackTimer: ReturnType<typeof setTimeout> | undefined;
  /** Oldest offset the log still holds, as the runner last reported it. */
  private retainedFrom: number;
  private startWaiter: ((outcome: StartOutcome) => void) | undefined;
  private exitWaiters = new Set<() => void>();
  private readonly reads: LogReads;
  private readonly clients: ClientHub;
  private lastLinkActivity = 0;
  /** `GET .../output` reads in flight. */
  private outputReads = 0;
  /** The runner says input waiting for the process is past its bound. */
  private inputFull = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.stored = ctx.storage.kv.get<Stored>("session");
    this.offset = ctx.storage.kv.get<number>("offset") ?? 0;
    this.retainedFrom = ctx.storage.kv.get<number>("retainedFrom") ?? 0;
    // Heartbeats from runners and clients are answered without waking the object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING_TEXT, PONG_TEXT));
    this.reads = new LogReads(
      () => this.hostLink() ?? this.readerLink(),
      () => this.stored !== undefined && !isTerminal(this.stored.record.status),
      () => this.summonReader(),
    );
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
    });
  }

  // ---- RPC, called by the Worker's routes ----

  async create(request: CreateRequest): Promise<Session | Failure> {
    if (this.stored) return fail("CONFLICT", `session ${request.id} already exists`);
    const { tenant, id, spec } = request;
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
      },
    };
    this.save();
    const started = settleWithin<StartOutcome>(limits(this.env).startTimeoutMs, "timeout", (resolve) => {
      this.startWaiter = resolve;
    });
    const placed = await poolStub(this.env).place({
      type: "spawn",
      key: logKey(this.stored),
      tenant,
      sessionId: id,
      spec,
      linkToken: this.stored.linkToken,
    });
    if (isFailure(placed)) {
      this.startWaiter?.("failed");
      this.stored = undefined;
      await this.ctx.storage.deleteAll();
      return placed;
    }
    log.info("session.placed", { key: sessionKey(tenant, id), runnerId: placed.runnerId });
    this.stored.runnerId = placed.runnerId;
    this.save();
    if ((await started) === "timeout") {
      await this.move("failed", { error: "the runner did not start the process in time" });
    }
    return this.view();
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
    this.sendLinkBytes(encodeInput(bytes));
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
    const stored = this.stored;
    if (!stored) return this.notFound();
    if (!isTerminal(stored.record.status)) {
      if (this.hostLink()) {
        this.sendLink({ type: "kill", graceMs: KILL_GRACE_MS });
        await this.untilExit(KILL_GRACE_MS + 5000);
      }
      if (!isTerminal(stored.record.status)) {
        await this.move("lost", { error: "the runner did not confirm the process ended" });
      }
    }
    const session = this.view();
    if (purge) {
      this.clients.closeAll();
      for (const ws of this.ctx.getWebSockets()) closeQuietly(ws, CloseCode.SessionEnded, "session purged");
      const key = logKey(stored);
      const sent = await poolStub(this.env).dispatch({ type: "purge", key }, stored.tenant, stored.runnerId ?? null);
      if (isFailure(sent)) log.warn("session.purge", { key, outcome: "log_kept", reason: sent.failure.message });
      this.stored = undefined;
      this.offset = 0;
      this.retainedFrom = 0;
      await this.ctx.storage.deleteAlarm();
      await this.ctx.storage.deleteAll();
    }
    return session;
  }

  /**
   * `GET .../output`: logged bytes from `from` (or the oldest retained) up to `to` (or now), at
   * most MAX_OUTPUT_RESPONSE_BYTES, copied once into the answer. At most MAX_OUTPUT_READS run
   * at once per session (429 beyond), so concurrent reads cannot exhaust the object's memory.
   */
  async output(from: number | undefined, to: number | undefined): Promise<OutputRange | Failure> {
    if (!this.stored) return this.notFound();
    const max = limits(this.env).maxOutputReads;
    if (this.outputReads >= max) {
      return fail("QUOTA_EXCEEDED", `at most ${max} output reads at once per session; try again`, 1);
    }
    this.outputReads++;
    try {
      return await this.readOutput(from, to);
    } finally {
      this.outputReads--;
    }
  }

  private async readOutput(from: number | undefined, to: number | undefined): Promise<OutputRange | Failure> {
    const end = Math.min(to ?? this.offset, this.offset);
    let start = Math.min(from ?? this.retainedFrom, end);
    if (start < this.retainedFrom && this.retainedFrom <= end) start = this.retainedFrom;
    const bytes = new Uint8Array(Math.min(end - start, MAX_OUTPUT_RESPONSE_BYTES));
    let size = 0;
    let cursor = start;
    while (cursor < end && size < bytes.byteLength) {
      const before = cursor;
      const pieceEnd = Math.min(end, cursor + Math.min(READ_PIECE_BYTES, bytes.byteLength - size));
      let stopped = false;
      const failed = await this.readPiece(cursor, pieceEnd, {
        onChunk: (offset, data) => {
          if (stopped || offset !== cursor) return;
          const take = data.subarray(0, bytes.byteLength - size);
          bytes.set(take, size);
          size += take.byteLength;
          cursor += take.byteLength;
        },
        onGap: (gapFrom, gapTo) => {
          if (stopped) return;
          // A gap before any byte moves the start on; a gap after bytes ends this answer.
          if (size > 0) {
            stopped = true;
            return;
          }
          this.noteLeadingGap(gapFrom, gapTo);
          start = cursor = gapTo;
        },
      });
      if (failed) return failed;
      if (stopped || cursor === before) break;
    }
    // A view would carry its whole buffer across RPC: copy when the answer came out short.
    return { from: start, to: start + size, bytes: size === bytes.byteLength ? bytes : bytes.slice(0, size) };
  }

  // ---- Sockets and streams ----

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname.endsWith("/link")) {
      return this.acceptLink(url.searchParams.get("role") === "reader", request.headers);
    }
    const from = parseStart(request.headers.get("x-ptyb-from"));
    if (url.pathname.endsWith("/stream")) {
      if (!this.stored) return Response.json(this.notFound(), { status: 404 });
      return this.clients.openStream(from, request.headers.get("x-ptyb-role") === "owner");
    }
    if (!this.stored) return refuseSocket(new ApiError("NOT_FOUND", "session not found"), request);
    return this.clients.acceptSocket(request, from);
  }

  /**
   * A runner's link. The host link needs this session's link token (given only to the runner
   * the session was placed on) and, from a runner with a credential, that runner's id; a
   * reader link needs the reader token. Anything else is refused, and never replaces a link.
   */
  private acceptLink(reader: boolean, headers: Headers): Response {
    const stored = this.stored;
    if (!stored) return new Response("no such session", { status: 404 });
    const runner = runnerFromHeaders(headers);
    const expected = reader ? stored.readerToken : stored.linkToken;
    const presented = headers.get("x-link-token") ?? "";
    const misplaced = !reader && runner.verified && runner.runnerId !== stored.runnerId;
    if (!tokensEqual(presented, expected) || misplaced) {
      log.warn("link.refused", { key: this.keyForLog(), reader, runnerId: runner.runnerId, misplaced });
      return new Response("this link credential is not this session's", { status: 403 });
    }
    if (!reader && isTerminal(stored.record.status)) return new Response("session has ended", { status: 409 });
    const { 0: runnerSide, 1: server } = new WebSocketPair();
    if (reader) {
      this.ctx.acceptWebSocket(server, [Tag.Reader]);
    } else {
      for (const old of this.ctx.getWebSockets(Tag.Link)) closeQuietly(old, 1000, "replaced by a new link");
      this.ctx.acceptWebSocket(server, [Tag.Link]);
      this.lastLinkActivity = Date.now();
      this.ctx.storage.kv.delete("linkLostAt");
      void this.ctx.storage.setAlarm(Date.now() + HEARTBEAT_TIMEOUT_MS);
      sendQuietly(server, JSON.stringify({ type: "resume", offset: this.offset } satisfies EdgeLinkMessage));
    }
    this.reads.linkOpened(server);
    return new Response(null, { status: 101, webSocket: runnerSide });
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    try {
      const tags = this.ctx.getTags(ws);
      if (tags.includes(Tag.Link) || tags.includes(Tag.Reader)) await this.onLinkMessage(ws, message);
      else this.clients.onMessage(ws, message);
    } catch (error) {
      log.error("session.socket", { key: this.keyForLog(), outcome: "handler_error", error });
    }
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    try {
      closeQuietly(ws, 1000, "closed");
      const tags = this.ctx.getTags(ws);
      if (tags.includes(CLIENT_TAG)) return this.clients.onClose(ws);
      this.reads.linkClosed(ws);
      if (tags.includes(Tag.Link)) await this.onHostLinkGone(ws, code);
    } catch (error) {
      log.error("session.socket", { key: this.keyForLog(), outcome: "close_error", error });
    }
  }

  async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    log.warn("session.socket", { key: this.keyForLog(), outcome: "error", tags: this.ctx.getTags(ws), error });
  }

  /**
   * Runs while the session has a host: checks its heartbeat, and once the link has been gone
   * for LINK_GRACE_MS (a runner that died, not one that is redialling) marks the session lost.
   */
  async alarm(): Promise<void> {
    const stored = this.stored;
    if (!stored || isTerminal(stored.record.status)) return;
    const now = Date.now();
    const link = this.hostLink();
    if (link) {
      const heard = Math.max(this.lastLinkActivity, this.ctx.getWebSocketAutoResponseTimestamp(link)?.getTime() ?? 0);
      // After a wake-up `lastLinkActivity` is 0 and a heartbeat may not have come yet: wait one more period.
      if (heard === 0) this.lastLinkActivity = now;
      else if (now - heard > HEARTBEAT_TIMEOUT_MS) {
        log.warn("link.heartbeat", { key: this.keyForLog(), outcome: "silent", silentMs: now - heard });
        closeQuietly(link, 1001, "heartbeat timeout");
        await this.onHostLinkGone(link, 1001);
        return;
      }
      await this.ctx.storage.setAlarm(now + HEARTBEAT_TIMEOUT_MS);
      return;
    }
    const grace = limits(this.env).linkGraceMs;
    const lostAt = this.ctx.storage.kv.get<number>("linkLostAt") ?? now;
    if (now - lostAt >= grace) {
      await this.move("lost", { error: "the runner's link was gone for longer than the grace period" });
      return;
    }
    this.ctx.storage.kv.put("linkLostAt", lostAt);
    await this.ctx.storage.setAlarm(lostAt + grace);
  }

  private async onHostLinkGone(ws: WebSocket, code: number): Promise<void> {
    const stored = this.stored;
    const otherLink = this.ctx.getWebSockets(Tag.Link).some((w) => w !== ws && w.readyState === WebSocket.OPEN);
    if (!stored || isTerminal(stored.record.status) || otherLink) return;
    log.warn("link.closed", { key: this.keyForLog(), code });
    if (stored.record.status === "starting") {
      this.startWaiter?.("failed");
      await this.move("lost", { error: "the runner's link closed before the process started" });
      return;
    }
    const now = Date.now();
    this.ctx.storage.kv.put("linkLostAt", now);
    await this.ctx.storage.setAlarm(now + limits(this.env).linkGraceMs);
  }

  private async onLinkMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    // Only the current host link speaks for the process: a replaced link's late frames are ignored.
    const host = this.ctx.getTags(ws).includes(Tag.Link) && ws === this.hostLink();
    if (this.ctx.getTags(ws).includes(Tag.Link) && !host) {
      return log.warn("link.message", { key: this.keyForLog(), outcome: "stale_link" });
    }
    if (host) this.lastLinkActivity = Date.now();
    if (typeof message !== "string") {
      const frame = decodeFrame(new Uint8Array(message));
      if (frame.op === "readChunk") return this.reads.chunk(ws, frame.readId, frame.offset, frame.data);
      if (frame.op === "output" && host) return this.onOutput(ws, frame.offset, frame.data, message);
      log.warn("link.frame", { key: this.keyForLog(), outcome: frame.op === "invalid" ? frame.reason : "bad_op" });
      return;
    }
    if (message === PING_TEXT) return sendQuietly(ws, PONG_TEXT);
    const parsed = parseMessage(RunnerLinkMessage, message, 1 << 16);
    if (!parsed.ok) {
      log.warn("link.message", { key: this.keyForLog(), outcome: "invalid", reason: parsed.reason });
      return;
    }
    const msg = parsed.value;
    switch (msg.type) {
      case "read_gap":
        return this.reads.gap(ws, msg.id, msg.from, msg.to);
      case "read_end":
        return this.reads.end(ws, msg.id, msg.to, msg.error);
      case "log_reset":
        return this.clients.forgetCache();
      case "ping":
        return;
    }
    if (!host) return log.warn("link.message", { key: this.keyForLog(), outcome: "reader_sent", type: msg.type });
    switch (msg.type) {
      case "started":
        await this.move("running", { pid: msg.pid });
        this.startWaiter?.("started");
        return;
      case "exited":
        await this.move("exited", { exitCode: msg.exitCode, signal: msg.signal });
        return;
      case "failed":
        await this.move("failed", { error: msg.error });
        this.startWaiter?.("failed");
        return;
      case "retained":
        return this.noteRetainedFrom(msg.from);
      case "input_state":
        this.inputFull = msg.full;
        return log.info("session.input", { key: this.keyForLog(), outcome: msg.full ? "full" : "drained" });
      case "input_dropped": {
        log.warn("session.input", { key: this.keyForLog(), outcome: "dropped", bytes: msg.bytes });
        const message = `${msg.bytes} bytes of input were dropped: the process is not reading its input`;
        return this.clients.tellWriters("QUOTA_EXCEEDED", message);
      }
    }
  }

  /** Output from the host: store the new offset, acknowledge it, and fan the bytes out. */
  private onOutput(link: WebSocket, offset: number, data: Uint8Array, frame: ArrayBuffer): void {
    const end = offset + data.byteLength;
    if (end <= this.offset) {
      // Sent again after a reconnect: already stored (acknowledged once that write is durable).
      this.ackWhenDurable();
      return;
    }
    if (offset > this.offset) {
      // A hole: bytes before `offset` never arrived. Never accept it; a new link resumes from
      // the stored offset, and the runner sends again everything from there.
      log.warn("link.frame", { key: this.keyForLog(), outcome: "offset_gap", expected: this.offset, got: offset });
      closeQuietly(link, CloseCode.Resync, "output skipped ahead: reconnect and resume");
      return;
    }
    let whole: ArrayBuffer | undefined = frame;
    if (offset < this.offset) {
      data = data.subarray(this.offset - offset);
      offset = this.offset;
      whole = undefined;
    }
    // The bytes are in the output log already (the runner appends before it sends), so clients
    // need not wait for a write: the offset is stored with the next ack (ackWhenDurable). An
    // edge that restarts before that resumes from the stored offset, and the runner, which
    // drops only acknowledged output, sends the rest again.
    // Fanned out before the offset moves: clients restored from hibernation by this very frame
    // take the offset as where they stand, and this frame starts there.
    this.clients.fanOut(offset, data, whole);
    this.offset = end;
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
    if (this.offset - this.ackRequested >= ACK_BYTES) return this.ackWhenDurable();
    this.ackTimer ??= setTimeout(() => this.ackWhenDurable(), ACK_DELAY_MS);
  }

  /**
   * Acknowledges the stored offset to the runner once it is durable; one sync at a time. The ack
   * goes to the host link open when the sync ends, which may be a newer one than the frame's.
   */
  private ackWhenDurable(): void {
    if (this.ackTimer) clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    if (this.syncing) return;
    this.syncing = true;
    const target = this.offset;
    this.ackRequested = target;
    this.ctx.storage.kv.put("offset", target);
    this.ctx.storage.sync().then(
      () => {
        this.syncing = false;
        const link = this.hostLink();
        if (link) sendQuietly(link, JSON.stringify({ type: "ack", offset: target } satisfies EdgeLinkMessage));
        if (this.offset > target) this.ackSoon();
      },
      (error: unknown) => {
        this.syncing = false;
        log.error("storage.sync", { key: this.keyForLog(), error: String(error) });
      },
    );
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

  /** Reads [from, to) in one go, for `output`; resolves with the failure, if it failed. */
  private readPiece(
    from: number,
    to: number,
    handler: Pick<ReadHandler, "onChunk" | "onGap">,
  ): Promise<Failure | undefined> {
    return new Promise((resolve) => {
      this.reads.read(from, to, {
        ...handler,
        onEnd: (_end, error) => resolve(error ? fail(error.code, error.message) : undefined),
      });
    });
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
    this.sendLinkBytes(encodeInput(bytes));
  }

  private clientResize(sub: SocketSubscriber, cols: number, rows: number): void {
    const refused = this.refuseWrite(sub);
    if (refused) return sub.control({ type: "error", ...refused.failure });
    this.applyResize(cols, rows);
  }

  private clientSignal(sub: SocketSubscriber, signal: SignalName): void {
    const refused = this.refuseWrite(sub);
    if (refused) return sub.control({ type: "error", ...refused.failure });
    this.sendLink({ type: "signal", signal });
  }

  // ---- State ----

  private applyResize(cols: number, rows: number): void {
    const stored = this.stored;
    if (!stored) return;
    stored.record.cols = cols;
    stored.record.rows = rows;
    this.save();
    this.sendLink({ type: "resize", cols, rows });
    this.clients.broadcast({ type: "resize", cols, rows });
  }

  /** Moves the status forward (never back) and tells whoever waits on it. */
  private async move(status: SessionStatus, patch: Partial<SessionRecord>): Promise<void> {
    const stored = this.stored;
    if (!stored || !canMove(stored.record.status, status)) return;
    Object.assign(stored.record, patch, { status });
    if (isTerminal(status)) {
      stored.record.exitedAt = new Date().toISOString();
      // Where output ends is final now: stored with the status, not left to the next ack.
      this.ctx.storage.kv.put("offset", this.offset);
    }
    this.save();
    log.info("session.status", { key: this.keyForLog(), status });
    if (isTerminal(status)) {
      // Subscribers still replaying get `exit` once they catch up.
      this.clients.sessionEnded();
      for (const link of this.ctx.getWebSockets(Tag.Link)) closeQuietly(link, CloseCode.SessionEnded, "session ended");
      for (const resolve of this.exitWaiters) resolve();
      this.exitWaiters.clear();
      this.ctx.storage.kv.delete("linkLostAt");
      await this.ctx.storage.deleteAlarm();
      // Reads that waited for the host now need a reader.
      this.reads.summon();
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

  /** Input, resize and signal from a client: checked per message, not per connection. */
  private refuseWrite(sub: SocketSubscriber): Failure | undefined {
    if (sub.readOnly) return fail("FORBIDDEN", "a viewer may not send input, resize or signal");
    return this.refuseUnlessRunning();
  }

  /** The process has not taken the input it has (the runner's bound): refuse more for now. */
  private refuseWhileInputFull(): Failure | undefined {
    if (!this.inputFull) return undefined;
    return fail("QUOTA_EXCEEDED", "the process is not reading its input; try again when it has taken it", 1);
  }

  private refuseUnlessRunning(): Failure | undefined {
    if (!this.stored) return this.notFound();
    const status = this.stored.record.status;
    if (isTerminal(status)) return fail("SESSION_EXITED", `session has ${status}`);
    if (!this.hostLink()) return fail("CONFLICT", "session is not connected to a runner right now");
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
      // Where output ends: every byte below it went out on this connection before this message.
      offset: this.offset,
    };
  }

  private save(): void {
    if (this.stored) this.ctx.storage.kv.put("session", this.stored);
  }

  private hostLink(): WebSocket | undefined {
    return this.ctx.getWebSockets(Tag.Link).find((ws) => ws.readyState === WebSocket.OPEN);
  }

  private readerLink(): WebSocket | undefined {
    return this.ctx.getWebSockets(Tag.Reader).find((ws) => ws.readyState === WebSocket.OPEN);
  }

  private sendLink(message: EdgeLinkMessage): void {
    const link = this.hostLink();
    if (link) sendQuietly(link, JSON.stringify(message));
  }

  private sendLinkBytes(frame: Uint8Array): void {
    const link = this.hostLink();
    if (link) sendQuietly(link, frame);
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

/** Constant-time comparison of two tokens (lengths may differ: then they are not equal). */
function tokensEqual(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  return x.byteLength === y.byteLength && crypto.subtle.timingSafeEqual(x, y);
}
