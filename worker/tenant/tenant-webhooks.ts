// The tenant's webhooks (docs/protocol.md, "Webhooks"), in its object's SQLite, and their
// deliveries: each lifecycle event a hook asks for becomes a delivery, POSTed signed
// (shared/webhook-signature.ts) and tried again with backoff (webhook-schedule.ts) until a 2xx
// or the end of its 24 h window. This is one part of the tenant's alarm (alarm-plan.ts): `due`
// is the earliest pending attempt; `run` makes every due attempt at once, each with its own
// timeout, and records each one as it ends. A receiver's redirect is never followed (a public
// URL must not bounce the edge to a private one, http/webhook-url.ts).
import { type Failure, fail } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { TenantEventType } from "../../shared/session.js";
import { signWebhook } from "../../shared/webhook-signature.js";
import type { WebhookAttempt, WebhookDelivery, WebhookInfo } from "../../shared/webhooks.js";
import type { NewWebhook } from "../rpc.js";
import type { AlarmPart } from "./alarm-plan.js";
import { type RetryPolicy, nextAttemptAt } from "./webhook-schedule.js";

/** Hooks one tenant may have (409 beyond). */
export const MAX_HOOKS = 16;
/** Deliveries pending at once per tenant: an event beyond is recorded as failed, not sent. */
export const MAX_PENDING = 1000;
/** Finished deliveries kept per hook (the newest), with their attempts. */
export const KEEP_DELIVERIES = 100;
/** Attempts made in one alarm run at most (the rest wait for the next run, at once). */
const BATCH = 32;
/** How long a receiver has to answer. */
export const ATTEMPT_TIMEOUT_MS = 10_000;

interface HookRow extends Record<string, SqlStorageValue> {
  id: string;
  url: string;
  events: string;
  secret: string;
  created_at: number;
}

interface DeliveryRow extends Record<string, SqlStorageValue> {
  hook_id: string;
  event_id: string;
  type: string;
  body: string;
  created_at: number;
  state: string;
  attempts: number;
  next_at: number | null;
  note: string | null;
}

interface AttemptRow extends Record<string, SqlStorageValue> {
  n: number;
  at: number;
  status: number | null;
  error: string | null;
  ms: number;
}

export class TenantWebhooks implements AlarmPart {
  readonly name = "webhooks";
  /** Deliveries whose attempt is on the wire (`hook/event`): not picked again until it ends. */
  private readonly inFlight = new Set<string>();
  /** The hooks, read once and dropped on every change: an event with none costs no query. */
  private cached: HookRow[] | null = null;

  constructor(
    private readonly sql: SqlStorage,
    private readonly policy: () => RetryPolicy,
    private readonly tenant: () => string | null,
  ) {
    sql.exec(`CREATE TABLE IF NOT EXISTS webhooks (
      id TEXT PRIMARY KEY,
      url TEXT NOT NULL,
      events TEXT NOT NULL,
      secret TEXT NOT NULL,
      created_at INTEGER NOT NULL
    )`);
    sql.exec(`CREATE TABLE IF NOT EXISTS webhook_deliveries (
      hook_id TEXT NOT NULL,
      event_id TEXT NOT NULL,
      type TEXT NOT NULL,
      body TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      state TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      next_at INTEGER,
      note TEXT,
      PRIMARY KEY (hook_id, event_id)
    )`);
    sql.exec("CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (state, next_at)");
    sql.exec(`CREATE TABLE IF NOT EXISTS webhook_attempts (
      hook_id TEXT NOT NULL,
      event_id TEXT NOT NULL,
      n INTEGER NOT NULL,
      at INTEGER NOT NULL,
      status INTEGER,
      error TEXT,
      ms INTEGER NOT NULL,
      PRIMARY KEY (hook_id, event_id, n)
    )`);
  }

  add(hook: NewWebhook, now = Date.now()): WebhookInfo | Failure {
    const count = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM webhooks").one().n;
    if (count >= MAX_HOOKS) return fail("CONFLICT", `a tenant has at most ${MAX_HOOKS} webhooks: delete one first`);
    this.sql.exec(
      "INSERT INTO webhooks (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)",
      hook.id,
      hook.url,
      JSON.stringify(hook.events),
      hook.secret,
      now,
    );
    this.cached = null;
    return info(this.hook(hook.id) as HookRow);
  }

  list(): WebhookInfo[] {
    return this.sql.exec<HookRow>("SELECT * FROM webhooks ORDER BY created_at, id").toArray().map(info);
  }

  get(id: string): WebhookInfo | Failure {
    const row = this.hook(id);
    return row ? info(row) : fail("NOT_FOUND", `webhook ${id} not found`);
  }

  /** The hook, its deliveries and their attempts go; an attempt on the wire is not recorded. */
  remove(id: string): boolean {
    const gone = this.sql.exec("DELETE FROM webhooks WHERE id = ? RETURNING id", id).toArray().length > 0;
    this.cached = null;
    this.sql.exec("DELETE FROM webhook_deliveries WHERE hook_id = ?", id);
    this.sql.exec("DELETE FROM webhook_attempts WHERE hook_id = ?", id);
    return gone;
  }

  removeAll(): number {
    const ids = this.sql.exec<{ id: string }>("SELECT id FROM webhooks").toArray();
    for (const { id } of ids) this.remove(id);
    return ids.length;
  }

  /** The hook's deliveries, newest first, each with its attempts. */
  deliveries(id: string): { deliveries: WebhookDelivery[] } | Failure {
    if (!this.hook(id)) return fail("NOT_FOUND", `webhook ${id} not found`);
    const rows = this.sql
      .exec<DeliveryRow>("SELECT * FROM webhook_deliveries WHERE hook_id = ? ORDER BY created_at DESC, rowid DESC", id)
      .toArray();
    return {
      deliveries: rows.map((row) => ({
        eventId: row.event_id,
        type: row.type as TenantEventType,
        createdAt: new Date(row.created_at).toISOString(),
        state: row.state as WebhookDelivery["state"],
        nextAttemptAt: row.state === "pending" && row.next_at !== null ? new Date(row.next_at).toISOString() : null,
        ...(row.note ? { note: row.note } : {}),
        attempts: this.sql
          .exec<AttemptRow>("SELECT n, at, status, error, ms FROM webhook_attempts WHERE hook_id = ? AND event_id = ? ORDER BY n", id, row.event_id)
          .toArray()
          .map((a): WebhookAttempt => ({ attempt: a.n, at: new Date(a.at).toISOString(), status: a.status, error: a.error, ms: a.ms })),
      })),
    };
  }

  /**
   * A lifecycle event: a delivery for each hook that asks for its type, due at once. Answers
   * how many were queued (the caller schedules the alarm when any were).
   */
  enqueue(eventId: string, type: TenantEventType, bodyOf: () => string, now = Date.now()): number {
    this.cached ??= this.sql.exec<HookRow>("SELECT * FROM webhooks").toArray();
    const hooks = this.cached.filter((hook) => (JSON.parse(hook.events) as string[]).includes(type));
    if (hooks.length === 0) return 0;
    const body = bodyOf();
    let queued = 0;
    for (const hook of hooks) {
      const pending = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE state = 'pending'").one().n;
      const full = pending >= MAX_PENDING;
      this.sql.exec(
        "INSERT OR IGNORE INTO webhook_deliveries (hook_id, event_id, type, body, created_at, state, next_at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        hook.id,
        eventId,
        type,
        body,
        now,
        full ? "failed" : "pending",
        full ? null : now,
        full ? `not sent: ${MAX_PENDING} deliveries were pending for this tenant` : null,
      );
      if (full) {
        log.warn("webhook.drop", { tenant: this.tenant(), hookId: hook.id, eventId, outcome: "too_many_pending" });
        this.trim(hook.id);
      } else {
        queued++;
      }
    }
    return queued;
  }

  due(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MIN(next_at) AS at FROM webhook_deliveries WHERE state = 'pending'").one().at;
  }

  /** Every due attempt at once, each recorded as soon as it ends. */
  async run(now: number): Promise<void> {
    const rows = this.sql
      .exec<DeliveryRow>(
        "SELECT * FROM webhook_deliveries WHERE state = 'pending' AND next_at <= ? ORDER BY next_at LIMIT ?",
        now,
        BATCH + this.inFlight.size,
      )
      .toArray()
      .filter((row) => !this.inFlight.has(`${row.hook_id}/${row.event_id}`))
      .slice(0, BATCH);
    await Promise.all(rows.map((row) => this.attempt(row)));
  }

  private async attempt(delivery: DeliveryRow): Promise<void> {
    const hook = this.hook(delivery.hook_id);
    if (!hook) return;
    const key = `${delivery.hook_id}/${delivery.event_id}`;
    this.inFlight.add(key);
    const n = delivery.attempts + 1;
    const started = Date.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      const t = Math.floor(started / 1000);
      const res = await fetch(hook.url, {
        method: "POST",
        body: delivery.body,
        redirect: "manual",
        signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
        headers: {
          "content-type": "application/json",
          "user-agent": "ptybroker-webhooks",
          "ptybroker-signature": await signWebhook(hook.secret, delivery.body, t),
          "ptybroker-event-id": delivery.event_id,
        },
      });
      status = res.status;
      await res.body?.cancel();
      if (status < 200 || status > 299) error = `HTTP ${status}`;
    } catch (caught) {
      const name = caught instanceof Error ? caught.name : "";
      error = name === "TimeoutError" || name === "AbortError" ? `no answer within ${ATTEMPT_TIMEOUT_MS} ms` : String((caught as Error)?.message ?? caught).slice(0, 200);
    } finally {
      this.inFlight.delete(key);
    }
    const ended = Date.now();
    const ms = ended - started;
    // The hook may have been deleted while the attempt was on the wire: then nothing is recorded.
    if (!this.hook(delivery.hook_id)) return;
    this.sql.exec(
      "INSERT OR REPLACE INTO webhook_attempts (hook_id, event_id, n, at, status, error, ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
      delivery.hook_id,
      delivery.event_id,
      n,
      started,
      status,
      error,
      ms,
    );
    const next = error === null ? null : nextAttemptAt(delivery.created_at, n, ended, this.policy());
    const state = error === null ? "delivered" : next === null ? "failed" : "pending";
    this.sql.exec(
      "UPDATE webhook_deliveries SET attempts = ?, state = ?, next_at = ? WHERE hook_id = ? AND event_id = ?",
      n,
      state,
      next,
      delivery.hook_id,
      delivery.event_id,
    );
    const fields = { tenant: this.tenant(), hookId: delivery.hook_id, eventId: delivery.event_id, attempt: n, status, ms };
    if (error === null) log.info("webhook.attempt", { ...fields, outcome: "delivered" });
    else log.warn("webhook.attempt", { ...fields, outcome: state === "failed" ? "failed" : "retry", error, next: next === null ? null : new Date(next).toISOString() });
    if (state !== "pending") this.trim(delivery.hook_id);
  }

  /** Finished deliveries beyond the newest KEEP_DELIVERIES of the hook go, with their attempts. */
  private trim(hookId: string): void {
    const old = this.sql
      .exec<{ event_id: string }>(
        "SELECT event_id FROM webhook_deliveries WHERE hook_id = ? AND state != 'pending' ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET ?",
        hookId,
        KEEP_DELIVERIES,
      )
      .toArray();
    for (const { event_id } of old) {
      this.sql.exec("DELETE FROM webhook_deliveries WHERE hook_id = ? AND event_id = ?", hookId, event_id);
      this.sql.exec("DELETE FROM webhook_attempts WHERE hook_id = ? AND event_id = ?", hookId, event_id);
    }
  }

  private hook(id: string): HookRow | undefined {
    return this.sql.exec<HookRow>("SELECT * FROM webhooks WHERE id = ?", id).toArray()[0];
  }
}

function info(row: HookRow): WebhookInfo {
  return { id: row.id, url: row.url, events: JSON.parse(row.events) as TenantEventType[], createdAt: new Date(row.created_at).toISOString() };
}
