// Tenant: one Durable Object per tenant. The index of its sessions (each row holds the session
// as it last reported itself, so a list is one query, never a call per session), id
// uniqueness, the quota of sessions not yet ended, the tenant's lifecycle events
// (`GET /v1/events`, tenant-events.ts), its limits as data and its minted keys (tenant-keys.ts;
// docs/architecture.md, "Tenants and keys"), its webhooks (tenant-webhooks.ts) and audit log
// (tenant-audit.ts). Its one alarm belongs to alarm-plan.ts, which sets it for the earliest due
// part (the sweep, tenant-sweep.ts, and webhook deliveries).
import { DurableObject } from "cloudflare:workers";
import { type Failure, fail } from "../../shared/errors.js";
import type { KeyInfo, TenantLimits } from "../../shared/keys.js";
import { type Session, type SessionPage, type SessionStatus, type TenantEventType, canMove } from "../../shared/session.js";
import { log } from "../../shared/log.js";
import { type Env, limits, sessionStub } from "../env.js";
import type { AuditPage, WebhookDelivery, WebhookInfo } from "../../shared/webhooks.js";
import type { KeyCheck, ListOptions, NewAuditEntry, NewKeyRow, NewWebhook, ReserveRequest, Reserved, TenantRpc } from "../rpc.js";
import { AlarmPlan } from "./alarm-plan.js";
import { type StoredEvent, TenantEvents } from "./tenant-events.js";
import { TenantAudit } from "./tenant-audit.js";
import { TenantKeys } from "./tenant-keys.js";
import { TenantSweep } from "./tenant-sweep.js";
import { TenantWebhooks } from "./tenant-webhooks.js";
import { retryPolicy } from "./webhook-schedule.js";
import { eachAtMost } from "./fan-out.js";

/** Events kept for resuming: at least the last 1,000 (docs/protocol.md §3, "Events"). */
const KEEP_EVENTS = 2000;
/** Open event streams per tenant (429 beyond). */
const MAX_EVENT_STREAMS = 64;
/** Calls to session objects in flight at once when a revoke or a delete reaches them all. */
const FAN_OUT = 32;
/** AUDIT_RETAIN_DAYS, 90 by default. */
function auditRetainDays(env: Env): number {
  const n = Number(env.AUDIT_RETAIN_DAYS);
  return env.AUDIT_RETAIN_DAYS && Number.isFinite(n) && n > 0 ? n : 90;
}

/** The reason a client is shown when its key is revoked. */
const REVOKED = "API key revoked";

export class Tenant extends DurableObject<Env> implements TenantRpc {
  private readonly sql: SqlStorage;
  private readonly events: TenantEvents;
  private readonly keys: TenantKeys;
  private readonly webhooks: TenantWebhooks;
  private readonly auditLog: TenantAudit;
  private readonly plan: AlarmPlan;
  private readonly sweep: TenantSweep;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS sessions (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL,
      status TEXT NOT NULL,
      tags TEXT NOT NULL
    )`);
    // The session as it last reported itself; null between reserve and the session's first report.
    const columns = this.sql.exec<{ name: string }>("PRAGMA table_info(sessions)").toArray();
    if (!columns.some((c) => c.name === "record")) this.sql.exec("ALTER TABLE sessions ADD COLUMN record TEXT");
    this.sql.exec("CREATE INDEX IF NOT EXISTS sessions_by_status ON sessions (status, seq)");
    this.sql.exec(`CREATE TABLE IF NOT EXISTS events (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      type TEXT NOT NULL,
      data TEXT NOT NULL
    )`);
    this.events = new TenantEvents(() => limits(env).sseKeepAliveMs, {
      next: (seq) =>
        this.sql
          .exec<{ seq: number; type: string; data: string }>("SELECT seq, type, data FROM events WHERE seq > ? ORDER BY seq LIMIT 1", seq)
          .toArray()[0],
      latest: () => this.sql.exec<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM events").one().seq ?? 0,
    });
    this.keys = new TenantKeys(this.sql);
    const tenantName = () => this.ctx.storage.kv.get<string>("tenant") ?? null;
    this.webhooks = new TenantWebhooks(this.sql, () => retryPolicy(env), tenantName);
    this.auditLog = new TenantAudit(this.sql, () => auditRetainDays(env));
    const kv = ctx.storage.kv;
    const clock = { get: () => kv.get<number>("sweepAt"), put: (at: number) => kv.put("sweepAt", at), clear: () => void kv.delete("sweepAt") };
    this.sweep = new TenantSweep(this.sql, clock, {
      tenant: tenantName,
      ask: async (tenant, id) => (await sessionStub(env, tenant, id).get()) as Session | Failure,
      record: (session) => this.record(session, null),
      free: (id) => this.forget(id, null),
    });
    this.plan = new AlarmPlan(ctx.storage, [this.sweep, this.webhooks], tenantName);
    void this.plan.schedule();
  }

  /** Creation times within the last minute, for the create rate (in memory: a restart forgets it). */
  private recentCreates: number[] = [];

  /** Claims `id` for a new session, unless it is taken, the quota is used up or creates come too fast. */
  async reserve(request: ReserveRequest): Promise<Reserved | Failure> {
    const { tenant, id, createdAt, tags, asked = {} } = request;
    // The tenant's own limits, where the admin API set them, over the deployment's.
    const own = this.settings();
    const maxActive = own.sessions ?? request.maxActive;
    const maxPerMinute = own.createsPerMinute ?? request.maxPerMinute ?? Number.POSITIVE_INFINITY;
    // With them, the tenant's own workspace size and log bound, which its sessions' runner applies.
    const max = { memoryMiB: own.memoryMiB, pids: own.pids, cpus: own.cpus, diskMiB: own.diskMiB, logBytes: own.logBytes };
    for (const name of ["memoryMiB", "pids", "cpus"] as const) {
      const most = max[name];
      const want = asked[name];
      if (most !== undefined && want !== undefined && want > most) {
        return fail("INVALID_REQUEST", `limits.${name}: at most ${most}, this tenant's maximum`);
      }
    }
    const now = Date.now();
    this.recentCreates = this.recentCreates.filter((t) => now - t < 60_000);
    if (this.recentCreates.length >= maxPerMinute) {
      const retryAfter = Math.max(1, Math.ceil((this.recentCreates[0] + 60_000 - now) / 1000));
      return fail("QUOTA_EXCEEDED", `at most ${maxPerMinute} sessions may be created per minute`, retryAfter);
    }
    if (this.sql.exec("SELECT 1 FROM sessions WHERE id = ?", id).toArray().length > 0) {
      return fail("CONFLICT", `session ${id} already exists`);
    }
    const active = this.sql
      .exec<{ n: number }>("SELECT COUNT(*) AS n FROM sessions WHERE status IN ('starting', 'running')")
      .one().n;
    if (active >= maxActive) {
      return fail("QUOTA_EXCEEDED", `at most ${maxActive} sessions may run at once for this tenant`, 5);
    }
    this.recentCreates.push(now);
    this.sql.exec(
      "INSERT INTO sessions (id, created_at, status, tags) VALUES (?, ?, 'starting', ?)",
      id,
      createdAt,
      JSON.stringify(tags),
    );
    this.nameTenant(tenant);
    // The new row has no record yet: the sweep is due for it if its session never reports.
    this.sweep.reserved();
    await this.plan.schedule();
    return { ok: true, max: Object.fromEntries(Object.entries(max).filter(([, v]) => v !== undefined)) };
  }

  /** The one alarm: every part that is due runs, then the alarm is set for the next (alarm-plan.ts). */
  async alarm(): Promise<void> {
    await this.plan.run();
  }

  /**
   * A session reports how it is now (its reports come in order): its index row follows it
   * (status only forward), and with `event` the tenant's events record it.
   */
  record(session: Session, event: TenantEventType | null): void {
    const row = this.sql
      .exec<{ status: SessionStatus }>("SELECT status FROM sessions WHERE id = ?", session.id)
      .toArray()[0];
    if (!row) return; // purged meanwhile
    if (row.status === session.status || canMove(row.status, session.status)) {
      this.sql.exec(
        "UPDATE sessions SET status = ?, tags = ?, record = ? WHERE id = ?",
        session.status,
        JSON.stringify(session.tags),
        JSON.stringify(session),
        session.id,
      );
    }
    if (event) this.publish(event, session);
  }

  /** The id is free again; with the purged `session`, `session.deleted` is recorded. */
  forget(id: string, session: Session | null): void {
    this.sql.exec("DELETE FROM sessions WHERE id = ?", id);
    if (session) this.publish("session.deleted", session);
  }

  /** A page of sessions in creation order, from the index alone. */
  list(options: ListOptions): SessionPage {
    const where = ["record IS NOT NULL", "seq > ?"];
    const params: (string | number)[] = [options.after ?? 0];
    if (options.status) {
      where.push("status = ?");
      params.push(options.status);
    }
    if (options.tag) {
      where.push("EXISTS (SELECT 1 FROM json_each(sessions.tags) WHERE json_each.value = ?)");
      params.push(options.tag);
    }
    const rows = this.sql
      .exec<{ seq: number; record: string }>(
        `SELECT seq, record FROM sessions WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ?`,
        ...params,
        options.limit + 1,
      )
      .toArray();
    const page = rows.slice(0, options.limit);
    const more = rows.length > options.limit;
    return {
      sessions: page.map((r) => JSON.parse(r.record) as Session),
      nextCursor: more ? String(page[page.length - 1].seq) : null,
    };
  }

  /** `GET /v1/events`: the Worker passes where to resume in `x-ptyb-after` (an id, or absent for live only). */
  async fetch(request: Request): Promise<Response> {
    if (this.events.size >= MAX_EVENT_STREAMS) {
      const refused = fail("QUOTA_EXCEEDED", `at most ${MAX_EVENT_STREAMS} event streams per tenant`, 5);
      return Response.json({ error: refused.failure }, { status: 429, headers: { "retry-after": "5" } });
    }
    const afterHeader = request.headers.get("x-ptyb-after");
    // Trimming always keeps the newest KEEP_EVENTS: a resume from before them gets a gap first.
    return this.events.open(afterHeader === null ? null : Number(afterHeader), request.headers.get("x-ptyb-key"));
  }

  // ---- Limits and keys as data (docs/protocol.md, "Tenants and keys") ----

  settings(): TenantLimits {
    return this.ctx.storage.kv.get<TenantLimits>("limits") ?? {};
  }

  configure(tenant: string, limits: TenantLimits): void {
    this.nameTenant(tenant);
    this.ctx.storage.kv.put("limits", limits);
  }

  checkKey(keyId: string, hash: string): KeyCheck {
    return this.keys.check(keyId, hash);
  }

  keyAlive(keyId: string): KeyCheck {
    return this.keys.alive(keyId);
  }

  addKey(tenant: string, key: NewKeyRow): KeyInfo | Failure {
    this.nameTenant(tenant);
    return this.keys.add(tenant, key);
  }

  listKeys(tenant: string): KeyInfo[] {
    return this.keys.list(tenant);
  }

  /**
   * The key is gone at once (the next request with it is 401); then every socket and stream
   * opened with it, or with a session token it minted, is closed with 4011: the tenant's event
   * streams here, and the clients of each session not yet ended (an ended session's clients
   * leave on their own once their replay is done).
   */
  async revokeKey(keyId: string): Promise<{ keyId: string; closed: number } | Failure> {
    if (!this.keys.remove(keyId)) return fail("NOT_FOUND", `key ${keyId} not found`);
    let closed = this.events.closeKey(keyId, REVOKED);
    const tenant = this.ctx.storage.kv.get<string>("tenant");
    if (tenant) {
      const live = this.sql
        .exec<{ id: string }>("SELECT id FROM sessions WHERE status IN ('starting', 'running')")
        .toArray()
        .map((row) => row.id);
      const counts = await eachAtMost(live, FAN_OUT, (id) => sessionStub(this.env, tenant, id).closeKey(keyId));
      closed += counts.reduce<number>((sum, n) => sum + (n ?? 0), 0);
    }
    log.info("keys.revoke", { tenant: tenant ?? null, keyId, outcome: "revoked", closed });
    return { keyId, closed };
  }

  // ---- Webhooks and the audit log (docs/protocol.md, "Webhooks", "Audit log") ----

  async addHook(tenant: string, hook: NewWebhook): Promise<WebhookInfo | Failure> {
    this.nameTenant(tenant);
    return this.webhooks.add(hook);
  }

  listHooks(): WebhookInfo[] {
    return this.webhooks.list();
  }

  getHook(id: string): WebhookInfo | Failure {
    return this.webhooks.get(id);
  }

  async removeHook(id: string): Promise<{ id: string } | Failure> {
    if (!this.webhooks.remove(id)) return fail("NOT_FOUND", `webhook ${id} not found`);
    await this.plan.schedule();
    return { id };
  }

  hookDeliveries(id: string): { deliveries: WebhookDelivery[] } | Failure {
    return this.webhooks.deliveries(id);
  }

  audit(entry: NewAuditEntry): void {
    this.auditLog.add(entry);
  }

  auditPage(after: number, limit: number): AuditPage {
    return this.auditLog.page(after, limit);
  }

  /** Admin DELETE: every key goes, every session is ended and purged, the limits are forgotten. */
  async dissolve(tenant: string): Promise<{ sessions: number; keys: number }> {
    const keys = this.keys.removeAll().length;
    this.events.closeKey(null, "tenant deleted");
    const ids = this.sql.exec<{ id: string }>("SELECT id FROM sessions").toArray().map((row) => row.id);
    await eachAtMost(ids, FAN_OUT, async (id) => {
      try {
        const ended = await sessionStub(this.env, tenant, id).terminate(true);
        if ("failure" in ended && ended.failure.code !== "NOT_FOUND") {
          log.warn("tenant.dissolve", { tenant, id, outcome: "not_ended", code: ended.failure.code });
        }
      } catch (error) {
        log.warn("tenant.dissolve", { tenant, id, outcome: "unreached", error });
      }
    });
    const left = this.sql.exec<{ id: string }>("SELECT id FROM sessions").toArray();
    for (const { id } of left) this.forget(id, null);
    this.ctx.storage.kv.delete("limits");
    const hooks = this.webhooks.removeAll();
    await this.plan.schedule();
    log.info("tenant.dissolve", { tenant, outcome: "dissolved", sessions: ids.length, keys, hooks });
    return { sessions: ids.length, keys };
  }

  /** The tenant's name, for calls to its session objects (the sweep, a revoke). */
  private nameTenant(tenant: string): void {
    if (this.ctx.storage.kv.get<string>("tenant") !== tenant) this.ctx.storage.kv.put("tenant", tenant);
  }

  /** Records the event, sends it to the open streams, and queues it for each webhook that asks for it. */
  private publish(type: TenantEventType, session: Session): void {
    const at = new Date().toISOString();
    const data = JSON.stringify({ type, session, at });
    const seq = this.sql.exec<{ seq: number }>("INSERT INTO events (type, data) VALUES (?, ?) RETURNING seq", type, data).one().seq;
    this.sql.exec("DELETE FROM events WHERE seq <= ?", seq - KEEP_EVENTS);
    this.events.publish({ seq, type, data } satisfies StoredEvent);
    // A webhook's body is the event with its id (the same id as on `GET /v1/events`).
    const body = () => JSON.stringify({ id: String(seq), type, at, session });
    if (this.webhooks.enqueue(String(seq), type, body) > 0) {
      this.ctx.waitUntil(this.plan.schedule());
    }
  }
}
