// RunnerPool: the registry of live runners. Runners dial in over a control socket
// (hibernatable), register their capacity, and receive spawn orders; placement picks the
// connected runner with the most room and never waits for one. A runner that is draining
// (shutting down) or whose control socket went silent gets no new sessions; the pool's one
// alarm, set while runners are connected, finds silent ones and tells their sessions.
import { DurableObject } from "cloudflare:workers";
import { type Failure, fail } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import { PING_TEXT, PONG_TEXT, type PoolMessage, RunnerControlMessage, parseMessage } from "../../shared/protocol.js";
import type { SessionSandbox } from "../../shared/session.js";
import { runnerFromHeaders } from "../auth/auth.js";
import { type Env, sessionStub } from "../env.js";
import type { PoolRpc, RunnerInfo } from "../rpc.js";
import { closeQuietly } from "../io/sockets.js";

interface RunnerAttachment {
  runnerId: string | null;
  capacity: number;
  /** tenants this runner serves; null = any */
  tenants?: string[] | null;
  /** id and tenants come from a per-runner credential, not from the runner's word */
  verified?: boolean;
  /** when the socket was accepted (ms since epoch): its liveness before its first heartbeat */
  openedAt?: number;
  /** the runner is shutting down: no new sessions */
  draining?: boolean;
  /** how the runner said it contains sessions (register); absent: it did not say */
  sandbox?: SessionSandbox;
}

/** A control socket silent this long (heartbeats every 10 s) is taken for gone: no placements, no runner id. */
const SILENT_MS = 30_000;
/** How often the pool looks for silent runners while any is connected. */
const CHECK_MS = 10_000;
/** Close code for a runner whose id another live runner holds (it redials with back-off). */
export const RUNNER_ID_IN_USE = 4009;

export class RunnerPool extends DurableObject<Env> implements PoolRpc {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS placements (key TEXT PRIMARY KEY, runner_id TEXT NOT NULL)");
    // Runners' heartbeats are answered without waking the object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING_TEXT, PONG_TEXT));
  }

  /** A runner's control socket; the Worker put its verified identity (if any) in the headers. */
  async fetch(request: Request): Promise<Response> {
    const identity = runnerFromHeaders(request.headers);
    const { 0: runnerSide, 1: server } = new WebSocketPair();
    this.ctx.acceptWebSocket(server, ["runner"]);
    server.serializeAttachment({
      runnerId: null,
      capacity: 0,
      tenants: identity.verified ? identity.tenants : null,
      verified: identity.verified,
      // Until it registers, a verified runner's id is kept aside: it holds no slot yet.
      ...(identity.verified ? { claimedId: identity.runnerId } : {}),
      openedAt: Date.now(),
    });
    return new Response(null, { status: 101, webSocket: runnerSide });
  }

  /** Picks a runner for a session and hands it the spawn order. */
  place(order: Extract<PoolMessage, { type: "spawn" }>): { runnerId: string } | Failure {
    const candidates = this.live()
      .filter(
        ({ info, tenants }) =>
          !info.draining && info.sessions < info.capacity && (!tenants || tenants.includes(order.tenant)),
      )
      .sort(
        (a, b) =>
          a.info.sessions / a.info.capacity - b.info.sessions / b.info.capacity || a.info.sessions - b.info.sessions,
      );
    for (const { ws, info } of candidates) {
      try {
        ws.send(JSON.stringify(order));
      } catch (error) {
        log.warn("pool.send", { runnerId: info.runnerId, error });
        continue;
      }
      this.sql.exec("INSERT OR REPLACE INTO placements (key, runner_id) VALUES (?, ?)", order.key, info.runnerId);
      return { runnerId: info.runnerId };
    }
    return fail("NO_RUNNER", "no runner with free capacity is connected; try again later");
  }

  /**
   * Hands a `serve` or `purge` order to `preferred` if it is connected (an in-process log lives
   * only there), otherwise to the least-loaded connected runner.
   */
  dispatch(
    order: Extract<PoolMessage, { type: "serve" | "purge" }>,
    tenant: string,
    preferred: string | null,
  ): { runnerId: string } | Failure {
    const live = this.live()
      .filter(({ tenants }) => !tenants || tenants.includes(tenant))
      .sort((a, b) => a.info.sessions - b.info.sessions);
    const first = live.findIndex(({ info }) => info.runnerId === preferred);
    if (first > 0) live.unshift(...live.splice(first, 1));
    for (const { ws, info } of live) {
      try {
        ws.send(JSON.stringify(order));
        return { runnerId: info.runnerId };
      } catch (error) {
        log.warn("pool.send", { runnerId: info.runnerId, error });
      }
    }
    return fail("NO_RUNNER", "no runner is connected to read the session's output log");
  }

  runners(): RunnerInfo[] {
    return this.live().map(({ info }) => info);
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    try {
      if (typeof message !== "string") return log.warn("pool.frame", { outcome: "unexpected_binary" });
      const parsed = parseMessage(RunnerControlMessage, message, 1 << 20);
      if (!parsed.ok) return log.warn("pool.message", { outcome: "invalid", reason: parsed.reason });
      const msg = parsed.value;
      if (msg.type === "register") {
        const att = ws.deserializeAttachment() as RunnerAttachment & { claimedId?: string };
        // A credential names the runner: what the message says about its id and tenants is ignored.
        const runnerId = att.verified ? (att.claimedId as string) : msg.runnerId;
        if (att.verified && msg.runnerId !== runnerId) {
          log.warn("pool.register", { runnerId, claimed: msg.runnerId, outcome: "id_mismatch" });
        }
        const holder = this.ctx
          .getWebSockets("runner")
          .find((other) => other !== ws && (other.deserializeAttachment() as RunnerAttachment).runnerId === runnerId);
        if (holder && this.heardRecently(holder)) {
          log.warn("pool.register", { runnerId, outcome: "id_in_use" });
          closeQuietly(ws, RUNNER_ID_IN_USE, "another runner with this id is connected");
          return;
        }
        if (holder) closeQuietly(holder, 1001, "silent: replaced by a new connection");
        ws.serializeAttachment({
          runnerId,
          capacity: msg.capacity,
          tenants: att.verified ? (att.tenants ?? null) : (msg.tenants ?? null),
          verified: att.verified ?? false,
          openedAt: att.openedAt,
          draining: msg.draining ?? false,
          ...(msg.sandbox ? { sandbox: msg.sandbox } : {}),
        } satisfies RunnerAttachment);
        await this.watch();
        this.ctx.storage.transactionSync(() => {
          this.sql.exec("DELETE FROM placements WHERE runner_id = ?", runnerId);
          for (const key of msg.sessions) {
            this.sql.exec("INSERT OR REPLACE INTO placements (key, runner_id) VALUES (?, ?)", key, runnerId);
          }
        });
        log.info("pool.registered", {
          runnerId,
          capacity: msg.capacity,
          sessions: msg.sessions.length,
          verified: att.verified ?? false,
          sandbox: msg.sandbox ?? null,
        });
      } else if (msg.type === "draining") {
        const att = ws.deserializeAttachment() as RunnerAttachment;
        ws.serializeAttachment({ ...att, draining: true } satisfies RunnerAttachment);
        log.info("pool.draining", { runnerId: att.runnerId });
      } else {
        const att = ws.deserializeAttachment() as RunnerAttachment;
        this.sql.exec("DELETE FROM placements WHERE key = ? AND runner_id = ?", msg.key, att.runnerId);
      }
    } catch (error) {
      log.error("pool.socket", { outcome: "handler_error", error });
    }
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    try {
      closeQuietly(ws, 1000, "closed");
      const att = ws.deserializeAttachment() as RunnerAttachment;
      // A runner that comes back re-registers the sessions it still hosts.
      const replaced = this.live().some(({ info }) => info.runnerId === att.runnerId);
      if (att.runnerId && !replaced) this.sql.exec("DELETE FROM placements WHERE runner_id = ?", att.runnerId);
      log.info("pool.disconnected", { runnerId: att.runnerId, code });
    } catch (error) {
      log.error("pool.socket", { outcome: "close_error", error });
    }
  }

  /**
   * Every CHECK_MS while runners are connected: a runner silent for SILENT_MS (half-open TCP,
   * a frozen host) is dropped, and each of its sessions is asked to check its own link, which
   * starts the session's grace if that link is silent too. Sessions are never woken otherwise.
   */
  async alarm(): Promise<void> {
    for (const ws of this.ctx.getWebSockets("runner")) {
      const att = ws.deserializeAttachment() as RunnerAttachment;
      if (!att.runnerId || this.heardRecently(ws)) continue;
      log.warn("pool.heartbeat", { runnerId: att.runnerId, outcome: "silent" });
      closeQuietly(ws, 1001, "heartbeat timeout");
      const stillHeld = this.live().some(({ info }) => info.runnerId === att.runnerId);
      if (stillHeld) continue;
      const keys = this.sql
        .exec<{ key: string }>("SELECT key FROM placements WHERE runner_id = ?", att.runnerId)
        .toArray()
        .map((r) => r.key);
      this.sql.exec("DELETE FROM placements WHERE runner_id = ?", att.runnerId);
      await Promise.allSettled(keys.map((key) => this.tellSilent(key)));
    }
    await this.watch(true);
  }

  private async tellSilent(key: string): Promise<void> {
    const [tenant, sessionId] = key.split("/");
    if (!tenant || !sessionId) return;
    try {
      await sessionStub(this.env, tenant, sessionId).runnerSilent();
    } catch (error) {
      log.warn("pool.heartbeat", { key, outcome: "session_unreached", error });
    }
  }

  /** Keeps the check running while any runner socket is open. */
  private async watch(fromAlarm = false): Promise<void> {
    const open = this.ctx.getWebSockets("runner").some((ws) => ws.readyState === WebSocket.OPEN);
    if (!open) return this.ctx.storage.deleteAlarm();
    if (fromAlarm || (await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + CHECK_MS);
  }

  /** A heartbeat (or the socket's opening) within SILENT_MS. */
  private heardRecently(ws: WebSocket): boolean {
    if (ws.readyState !== WebSocket.OPEN) return false;
    const att = ws.deserializeAttachment() as RunnerAttachment;
    const heard = Math.max(att.openedAt ?? 0, this.ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0);
    return Date.now() - heard < SILENT_MS;
  }

  private live(): { ws: WebSocket; info: RunnerInfo; tenants: string[] | null }[] {
    const counts = new Map<string, number>();
    for (const row of this.sql.exec<{ runner_id: string; n: number }>(
      "SELECT runner_id, COUNT(*) AS n FROM placements GROUP BY runner_id",
    )) {
      counts.set(row.runner_id, row.n);
    }
    const live: { ws: WebSocket; info: RunnerInfo; tenants: string[] | null }[] = [];
    for (const ws of this.ctx.getWebSockets("runner")) {
      const att = ws.deserializeAttachment() as RunnerAttachment;
      if (!att.runnerId || !this.heardRecently(ws)) continue;
      live.push({
        ws,
        info: {
          runnerId: att.runnerId,
          capacity: att.capacity,
          sessions: counts.get(att.runnerId) ?? 0,
          draining: att.draining ?? false,
          sandbox: att.sandbox ?? null,
        },
        tenants: att.tenants ?? null,
      });
    }
    return live;
  }
}
