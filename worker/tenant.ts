// Tenant: one Durable Object per tenant. The index of its sessions (for listing, in
// creation order), id uniqueness, and the quota of sessions not yet ended.
import { DurableObject } from "cloudflare:workers";
import { type Failure, fail } from "../shared/errors.js";
import { type SessionStatus, canMove } from "../shared/session.js";
import type { Env } from "./env.js";

export class Tenant extends DurableObject<Env> {
  private readonly sql: SqlStorage;

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
  }

  /** Creation times within the last minute, for the create rate (in memory: a restart forgets it). */
  private recentCreates: number[] = [];

  /** Claims `id` for a new session, unless it is taken, the quota is used up or creates come too fast. */
  reserve(
    id: string,
    createdAt: string,
    tags: string[],
    maxActive: number,
    maxPerMinute = Number.POSITIVE_INFINITY,
  ): { ok: true } | Failure {
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
    return { ok: true };
  }

  setStatus(id: string, status: SessionStatus): void {
    const row = this.sql.exec<{ status: SessionStatus }>("SELECT status FROM sessions WHERE id = ?", id).toArray()[0];
    if (row && canMove(row.status, status)) this.sql.exec("UPDATE sessions SET status = ? WHERE id = ?", status, id);
  }

  remove(id: string): void {
    this.sql.exec("DELETE FROM sessions WHERE id = ?", id);
  }

  /** Session ids in creation order, optionally only those with `tag`. */
  list(tag: string | null): string[] {
    const rows = this.sql
      .exec<{ id: string; tags: string }>("SELECT id, tags FROM sessions ORDER BY created_at, seq")
      .toArray();
    return rows.filter((r) => tag === null || (JSON.parse(r.tags) as string[]).includes(tag)).map((r) => r.id);
  }
}
