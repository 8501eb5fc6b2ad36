// A session's clients: WebSocket clients (framed or raw, restored from their attachments after
// hibernation) and Server-Sent Events streams, and the `expect` waits that ride along. Owns who
// is attached, the live fan-out, and their bounds: lag, stalls, raw budgets, slots. It wires two
// parts of its own with callbacks: Replays (replays.ts: each subscriber replays from its offset
// out of the log, then follows live output) and ScreenSkip (screen-skip.ts: `from=screen` and
// `onLag=screen`). The session object wires it with a HubPort and never reaches into its state.
import { ApiError, CloseCode, type ErrorCode, type Failure } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import { ClientMessage, type OutputStream, type ServerMessage, decodeFrame, isWriterKey, parseMessage } from "../../shared/protocol.js";
import { NO_SOCKET_COMPRESSION, refuseSocket, wantsRaw } from "../io/sockets.js";
import type { LogReads } from "../link/log-reads.js";
import { KeepAlive } from "../io/sse-body.js";
import { Replays, offsetRefusal, pastTheEnd, replayStart } from "./replays.js";
import { ScreenSkip } from "./screen-skip.js";
import { type ClientAttachment, type OnLag, SocketSubscriber, StreamSubscriber, type Subscriber } from "./subscribers.js";
import { type ClientCredential, type HubPort, type StartFrom, clientCredential, keyTag } from "./hub-port.js";

export type { StartFrom } from "./hub-port.js";

/** The hibernation tag of client sockets. */
export const CLIENT_TAG = "client";

/** `expect` waits at once per session (429 beyond). */
export const MAX_WATCHES = 16;

export class ClientHub {
  /** Client sockets' state; rebuilt from attachments after hibernation. */
  private readonly sockets = new Map<WebSocket, SocketSubscriber>();
  /** Open SSE streams, each with the key it was opened with (null: none known). */
  private readonly streams = new Map<StreamSubscriber, string | null>();
  /** Waits on the output that are not clients (`expect`): no slot, not counted as attached. */
  private readonly watches = new Set<Subscriber>();
  /** Each subscriber's replay from the log, up to the switch to live. */
  private readonly replays: Replays;
  /** from=screen and onLag=screen. */
  private readonly screens: ScreenSkip;
  /** A comment on every SSE stream each SSE_KEEPALIVE_MS while one is open. */
  private readonly keepAlive = new KeepAlive(
    () => this.port.limits().sseKeepAliveMs,
    () => {
      for (const stream of this.streams.keys()) stream.comment("keep-alive");
    },
  );

  constructor(
    private readonly ctx: DurableObjectState,
    reads: LogReads,
    private readonly port: HubPort,
  ) {
    this.replays = new Replays(reads, {
      offset: () => port.offset(),
      retainedFrom: () => port.retainedFrom(),
      noteLeadingGap: (from, to) => port.noteLeadingGap(from, to),
      checkLag: (sub) => this.checkLag(sub),
      wentLive: (sub) => {
        if (port.ended()) this.end(sub);
      },
      failed: (sub, error) => this.failReplay(sub, error),
    });
    this.screens = new ScreenSkip({
      screen: () => port.screen(),
      replay: (sub, from) => this.replays.start(sub, from),
      giveUpReplay: (sub) => this.replays.giveUp(sub),
      cut: (sub) => this.cutSlow(sub),
      keyForLog: () => port.keyForLog(),
    });
  }

  // ---- Joining ----

  /** A client socket, once the Worker has checked its credential (role and mode in headers). */
  acceptSocket(request: Request, from: StartFrom): Response {
    const framed = request.headers.get("x-ptyb-mode") !== "raw";
    // Set by the Worker from the caller's credential; anything but a viewer may write.
    const role = request.headers.get("x-ptyb-role");
    const who = clientCredential(request.headers);
    const refused = this.refuseOffset(from) ?? this.refuseOverLimit(who);
    if (refused) return refuseSocket(refused, request);
    const { 0: client, 1: server } = new WebSocketPair();
    this.ctx.acceptWebSocket(server, who.keyId ? [CLIENT_TAG, keyTag(who.keyId)] : [CLIENT_TAG]);
    const offset = this.port.offset();
    const onLag: OnLag = framed && request.headers.get("x-ptyb-onlag") === "screen" ? "screen" : "cut";
    // Set by the route with `compress=deflate`, which also kept permessage-deflate off this socket.
    const compress = framed && request.headers.get("x-ptyb-compress") === "deflate";
    const sub = new SocketSubscriber(
      server,
      framed ? "framed" : "raw",
      offset,
      false,
      role === "viewer",
      role === "owner",
      undefined,
      null,
      onLag,
      compress,
    );
    // Set by the route from `writer=` and the caller's credential (sessions-routes.ts): framed writers only.
    const writerId = request.headers.get("x-ptyb-writer");
    const actor = request.headers.get("x-ptyb-actor");
    const writerKey = `${actor}|${writerId}`;
    const base = Number(request.headers.get("x-ptyb-writer-from") ?? "0");
    if (framed && role !== "viewer" && writerId && actor && isWriterKey(writerKey) && Number.isSafeInteger(base) && base >= 0) {
      sub.writer = { id: writerId, key: writerKey, base };
    }
    this.sockets.set(server, sub);
    sub.persist();
    const input = sub.writer ? { writer: sub.writer.id, acked: this.port.writerAcked(sub.writer.key) } : undefined;
    sub.control({ type: "hello", session: this.port.view(), ...(input ? { input } : {}) });
    this.port.clientsChanged();
    this.startReplay(sub, from);
    const headers = new Headers();
    if (wantsRaw(request).subprotocol) headers.set("sec-websocket-protocol", "raw");
    // The object's own answer declines it too (in production it may be a hop of its own).
    if (compress) headers.set("sec-websocket-extensions", NO_SOCKET_COMPRESSION);
    return new Response(null, { status: 101, webSocket: client, headers });
  }

  /** A Server-Sent Events stream. */
  openStream(from: StartFrom, who: ClientCredential): Response {
    const refused = this.refuseOffset(from) ?? this.refuseOverLimit(who);
    if (refused) return Response.json(refused.toBody(), { status: refused.status });
    const gone = () => {
      this.dropStream(sub);
      this.replays.cancel(sub);
    };
    const sub: StreamSubscriber = new StreamSubscriber(this.port.offset(), this.port.limits().maxClientLagBytes, {
      // Past MAX_CLIENT_LAG_BYTES the stream cut itself (io/sse-body.ts): it holds no slot from now.
      onCut: () => {
        log.info("client.slow", { key: this.port.keyForLog(), kind: sub.kind, cursor: sub.cursor, outcome: "cut" });
        gone();
      },
      onCancel: gone,
    });
    this.streams.set(sub, who.keyId);
    this.keepAlive.update(this.streams.size);
    this.port.clientsChanged();
    // A cut before the client took an event with an id names where the replay starts (a `from`
    // older than what is retained: there, so the gap is told again); from=screen has no such
    // point until the screen is taken.
    if (from !== "screen") sub.startAt(replayStart(from, this.port.offset(), this.port.retainedFrom()));
    this.startReplay(sub, from);
    return sub.response();
  }

  /**
   * An `expect` (agent/expect-watch.ts): replayed from `from`, then live, like a client; refused when
   * MAX_WATCHES are waiting already.
   */
  watch(sub: Subscriber, from: number): Failure | undefined {
    if (this.watches.size >= MAX_WATCHES) {
      return { failure: { code: "QUOTA_EXCEEDED", message: `at most ${MAX_WATCHES} expects at once per session`, retryAfterSec: 1 } };
    }
    this.watches.add(sub);
    this.startReplay(sub, from);
    return undefined;
  }

  /** Whether another watch may start (MAX_WATCHES). */
  get watchFull(): boolean {
    return this.watches.size >= MAX_WATCHES;
  }

  /** A watch is over: its replay's read stops. */
  unwatch(sub: Subscriber): void {
    if (!this.watches.delete(sub)) return;
    this.replays.cancel(sub);
  }

  // ---- Messages from clients ----

  onMessage(ws: WebSocket, message: string | ArrayBuffer): void {
    const sub = this.socket(ws);
    if (sub.closed) return;
    sub.heard();
    if (sub.kind === "raw") {
      const bytes = typeof message === "string" ? new TextEncoder().encode(message) : new Uint8Array(message);
      return this.port.onInput(sub, bytes);
    }
    if (typeof message !== "string") {
      const frame = decodeFrame(new Uint8Array(message));
      if (frame.op === "input") return this.port.onInput(sub, frame.data);
      if (frame.op === "numberedInput") return this.port.onNumberedInput(sub, frame.offset, frame.data);
      const reason = frame.op === "invalid" ? frame.reason : "clients may only send input frames (0x02, 0x07)";
      return sub.control({ type: "error", code: "INVALID_REQUEST", message: reason });
    }
    const parsed = parseMessage(ClientMessage, message);
    if (!parsed.ok) return sub.control({ type: "error", code: "INVALID_REQUEST", message: parsed.reason });
    const msg = parsed.value;
    if (msg.type === "ping") return sub.control({ type: "pong" });
    if (msg.type === "ack") {
      if (sub.ack(msg.offset)) return;
      // An ack for bytes never sent would hide the client's lag: a protocol error.
      log.warn("client.ack", { key: this.port.keyForLog(), outcome: "beyond_sent", ack: msg.offset, sent: sub.cursor });
      sub.control({ type: "error", code: "INVALID_REQUEST", message: `ack ${msg.offset} is beyond what was sent (${sub.cursor})` });
      return sub.close(1008, "ack beyond what was sent");
    }
    if (msg.type === "resize") this.port.onResize(sub, msg.cols, msg.rows);
    else if (msg.type === "eof") this.port.onEof(sub);
    else this.port.onSignal(sub, msg.signal);
  }

  onClose(ws: WebSocket): void {
    const sub = this.sockets.get(ws);
    if (sub) {
      sub.closed = true;
      this.replays.cancel(sub);
    }
    this.sockets.delete(ws);
    this.port.clientsChanged();
  }

  // ---- Output to clients ----

  /** Live output at `offset`: to every live subscriber, cutting those too far behind. */
  fanOut(offset: number, data: Uint8Array, stream: OutputStream, frame: ArrayBuffer | undefined): void {
    const now = Date.now();
    const stallMs = this.port.limits().clientStallMs;
    const end = offset + data.byteLength;
    for (const sub of this.subscribers()) {
      if (!sub.live || sub.closed || end <= sub.cursor) continue;
      // A client may hold more than the edge does (it resumed from an offset the edge had not
      // stored before it restarted): it gets only what lies past what it has.
      if (offset < sub.cursor) sub.deliver(sub.cursor, data.subarray(sub.cursor - offset), stream);
      else sub.deliver(offset, data, stream, frame);
      if (sub.lag() > this.maxLag(sub)) this.onLagging(sub);
      // A client that skips ahead when it lags is not cut for a pause (only for a slot, cutStalled).
      else if (sub instanceof SocketSubscriber && sub.onLag === "cut" && sub.stalled(now, stallMs)) this.cutSlow(sub);
    }
  }

  /**
   * A control message to every subscriber (e.g. `resize`), also those still replaying: a size
   * is not bound to an offset, and a client that learns it only after its replay draws the old
   * one until then.
   */
  broadcast(message: ServerMessage): void {
    for (const sub of this.subscribers()) if (!sub.closed) sub.control(message);
  }

  /** A message for every open socket of one writer (its input's acknowledgements). */
  tellWriter(key: string, message: ServerMessage): void {
    for (const sub of this.subscribers()) {
      if (sub instanceof SocketSubscriber && !sub.closed && sub.writer?.key === key) sub.control(message);
    }
  }

  /** An error for every client that may write (input they sent was dropped). */
  tellWriters(code: ErrorCode, message: string): void {
    for (const sub of this.subscribers()) {
      if (sub instanceof SocketSubscriber && !sub.closed && !sub.readOnly) sub.control({ type: "error", code, message });
    }
  }

  /** The session ended: live subscribers get `exit` now, replaying ones once they catch up. */
  sessionEnded(): void {
    this.refuseAhead();
    for (const sub of this.subscribers()) if (sub.live && !sub.closed) this.end(sub);
  }

  /**
   * The edge's offset has become exact (the session ended, or a host link resent what the edge
   * lacked): a client that was let wait past it (offsetRefusal) holds an offset no output ever
   * had, and is refused as it would be now (docs/protocol.md §5, "An offset past the end").
   */
  refuseAhead(): void {
    const end = this.port.offset();
    for (const sub of this.subscribers()) {
      if (!sub.live || sub.closed || sub.cursor <= end || this.watches.has(sub)) continue;
      log.info("client.offset", { key: this.port.keyForLog(), kind: sub.kind, cursor: sub.cursor, offset: end, outcome: "past_the_end" });
      const message = pastTheEnd(sub.cursor, end);
      sub.control({ type: "error", code: "INVALID_OFFSET", message });
      sub.close(1008, message);
      if (sub instanceof StreamSubscriber) this.dropStream(sub);
    }
  }

  /** The session was purged: every client goes. */
  closeAll(): void {
    for (const watch of [...this.watches]) watch.close(CloseCode.SessionEnded, "session purged");
    for (const ws of this.ctx.getWebSockets(CLIENT_TAG)) this.socket(ws).close(CloseCode.SessionEnded, "session purged");
    for (const stream of this.streams.keys()) stream.close(CloseCode.SessionEnded);
    this.streams.clear();
    this.keepAlive.update(this.streams.size);
    this.replays.clearCache();
  }

  /** The key was revoked: its sockets and streams close with 4011 (docs/protocol.md §5). Answers how many. */
  closeKey(keyId: string): number {
    let closed = 0;
    for (const ws of this.ctx.getWebSockets(keyTag(keyId))) {
      const sub = this.socket(ws);
      if (sub.closed) continue;
      sub.close(CloseCode.KeyRevoked, "API key revoked");
      closed++;
    }
    for (const [stream, key] of this.streams) {
      if (key !== keyId) continue;
      stream.close(CloseCode.KeyRevoked, "API key revoked");
      this.replays.cancel(stream);
      this.dropStream(stream);
      closed++;
    }
    return closed;
  }

  /** The log may have lost what the cache holds (a Redis outage): replays read it again. */
  forgetCache(): void {
    this.replays.clearCache();
  }

  /** Whether the client socket named `id` is still connected (not cut or closed). */
  connected(id: string): boolean {
    for (const ws of this.ctx.getWebSockets(CLIENT_TAG)) {
      const sub = this.socket(ws);
      if (sub.id === id && !sub.closed) return true;
    }
    return false;
  }

  /** Clients holding a slot: cut and closed ones do not, even while their close completes. */
  count(): number {
    let count = 0;
    for (const ws of this.ctx.getWebSockets(CLIENT_TAG)) if (!this.socket(ws).closed) count++;
    for (const stream of this.streams.keys()) if (!stream.closed) count++;
    return count;
  }

  // ---- Replay and screens (replays.ts, screen-skip.ts) ----

  private startReplay(sub: Subscriber, from: StartFrom): void {
    if (from === "screen") this.screens.join(sub);
    else this.replays.start(sub, from);
  }

  private failReplay(sub: Subscriber, error: { code: ErrorCode; message: string }): void {
    sub.control({ type: "error", code: error.code, message: error.message });
    sub.close(1013, "replay failed: reconnect with from");
    if (sub instanceof StreamSubscriber) this.dropStream(sub);
  }

  private end(sub: Subscriber): void {
    sub.control(this.port.exitMessage());
    sub.close(CloseCode.SessionEnded, "session ended");
    if (sub instanceof StreamSubscriber) this.dropStream(sub);
  }

  // ---- Bounds ----

  /** A start past the session's offset that no client can hold (replays.ts, offsetRefusal). */
  private refuseOffset(from: StartFrom): ApiError | undefined {
    return offsetRefusal(from, this.port.offset(), this.port.offsetExact());
  }

  /** A subscriber too far behind is cut, or skips ahead to the screen if it asked for that. */
  private checkLag(sub: Subscriber): void {
    if (sub.lag() > this.maxLag(sub)) this.onLagging(sub);
  }

  /** A framed client that asked for onLag=screen skips ahead (screen-skip.ts); any other is cut. */
  private onLagging(sub: Subscriber): void {
    if (!(sub instanceof SocketSubscriber) || sub.onLag !== "screen") return this.cutSlow(sub);
    this.screens.skip(sub);
  }

  /**
   * How far a subscriber may fall behind. A raw client cannot acknowledge: its "lag" is what
   * was sent since its own last frame, allowed twice MAX_CLIENT_LAG_BYTES so that a full
   * replay of the retained log fits (docs/protocol.md, "Slow consumers").
   */
  private maxLag(sub: Subscriber): number {
    const max = this.port.limits().maxClientLagBytes;
    return sub.kind === "raw" ? 2 * max : max;
  }

  private cutSlow(sub: Subscriber): void {
    // A stream's cut comes back as its onCut (openStream), which lets it go.
    if (sub instanceof StreamSubscriber) return sub.close(CloseCode.SlowConsumer);
    log.info("client.slow", { key: this.port.keyForLog(), kind: sub.kind, cursor: sub.cursor, lag: sub.lag() });
    sub.close(CloseCode.SlowConsumer, "slow consumer: reconnect with from");
    this.replays.cancel(sub);
  }

  /**
   * Whether one more client fits: MAX_CLIENTS_PER_SESSION, of which one slot is kept for the
   * owner's key. When full, framed clients that stopped reading (behind and silent for
   * CLIENT_STALL_MS) are cut first, so idle or never-acking clients cannot hold the slots.
   */
  private refuseOverLimit({ owner, maxClients }: ClientCredential): ApiError | undefined {
    const max = maxClients ?? this.port.limits().maxClientsPerSession;
    const room = owner ? max : max - 1;
    if (this.count() >= room) this.cutStalled();
    if (this.count() < room) return undefined;
    const kept = owner ? "" : " (one more is kept for the owner's API key)";
    return new ApiError("QUOTA_EXCEEDED", `at most ${room} clients per session${kept}`, 1);
  }

  /** Cuts framed clients that are behind and have sent nothing (no ack) for CLIENT_STALL_MS. */
  private cutStalled(now = Date.now()): void {
    const stallMs = this.port.limits().clientStallMs;
    for (const ws of this.ctx.getWebSockets(CLIENT_TAG)) {
      const sub = this.socket(ws);
      if (!sub.stalled(now, stallMs)) continue;
      log.info("client.stalled", { key: this.port.keyForLog(), kind: sub.kind, lag: sub.lag(), silentMs: now - sub.lastHeard });
      sub.close(CloseCode.SlowConsumer, "no ack while behind: reconnect with from");
      this.replays.cancel(sub);
    }
  }

  // ---- Subscribers ----

  /** The state of a client socket, from memory or, after hibernation, from its attachment. */
  private socket(ws: WebSocket): SocketSubscriber {
    let sub = this.sockets.get(ws);
    if (!sub) {
      const att = ws.deserializeAttachment() as ClientAttachment | null;
      const offset = this.port.offset();
      // A live client continues from the current offset; one caught mid-replay restarts from its start.
      const live = att?.live ?? true;
      const cursor = live ? offset : (att?.cursor ?? offset);
      sub = new SocketSubscriber(
        ws,
        att?.kind ?? "framed",
        cursor,
        live,
        att?.readOnly ?? true,
        att?.owner ?? false,
        att?.id,
        att?.size ?? null,
        att?.onLag ?? "cut",
        att?.compress ?? false,
      );
      sub.closed = att?.cut ?? false;
      sub.writer = att?.writer;
      // A socket whose close is under way (its close handler is running) is not restored.
      if (ws.readyState !== WebSocket.OPEN) {
        sub.closed = true;
        return sub;
      }
      this.sockets.set(ws, sub);
      if (att && att.id === undefined) sub.persist(); // an attachment from before ids: keep the one just given
      log.warn("client.restored", { key: this.port.keyForLog(), live, cursor, offset });
      if (!live && !sub.closed) this.replays.resume(sub);
    }
    return sub;
  }

  private dropStream(sub: StreamSubscriber): void {
    if (!this.streams.delete(sub)) return;
    this.keepAlive.update(this.streams.size);
    this.port.clientsChanged();
  }

  private *subscribers(): Iterable<Subscriber> {
    for (const ws of this.ctx.getWebSockets(CLIENT_TAG)) yield this.socket(ws);
    yield* this.streams.keys();
    yield* [...this.watches];
  }
}
