// The tenant's audit log (docs/protocol.md, "Audit log"), in its object's SQLite: who did what to
// which session, from where, and how it ended. Entries are written by the Worker's routes
// (http/audit.ts) once the outcome is known and are never changed. They are kept
// AUDIT_RETAIN_DAYS and at most MAX_ENTRIES; both are enforced on write (at most once a minute)
// and a page never shows an entry past its retention.
import type { AuditEntry, AuditPage } from "../../shared/webhooks.js";
import type { NewAuditEntry } from "../rpc.js";

/** Entries one tenant keeps at most (the oldest go first). */
export const MAX_ENTRIES = 100_000;
const PRUNE_EVERY_MS = 60_000;
const DAY_MS = 86_400_000;

interface AuditRow extends Record<string, SqlStorageValue> {
  seq: number;
  at: number;
  entry: string;
}

export class TenantAudit {
  private lastPrune = 0;

  constructor(
    private readonly sql: SqlStorage,
    private readonly retainDays: () => number,
  ) {
    sql.exec(`CREATE TABLE IF NOT EXISTS audit (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      at INTEGER NOT NULL,
      entry TEXT NOT NULL
    )`);
    sql.exec("CREATE INDEX IF NOT EXISTS audit_by_time ON audit (at)");
  }

  add(entry: NewAuditEntry, now = Date.now()): void {
    const at = Date.parse(entry.at);
    this.sql.exec("INSERT INTO audit (at, entry) VALUES (?, ?)", Number.isFinite(at) ? at : now, JSON.stringify(entry));
    if (now - this.lastPrune >= PRUNE_EVERY_MS) this.prune(now);
  }

  /** Entries after `after` (a cursor from an earlier page), oldest first. */
  page(after: number, limit: number, now = Date.now()): AuditPage {
    const rows = this.sql
      .exec<AuditRow>("SELECT seq, at, entry FROM audit WHERE seq > ? AND at >= ? ORDER BY seq LIMIT ?", after, this.cutoff(now), limit + 1)
      .toArray();
    const page = rows.slice(0, limit);
    return {
      entries: page.map((row) => ({ id: String(row.seq), ...(JSON.parse(row.entry) as NewAuditEntry) }) as AuditEntry),
      nextCursor: rows.length > limit ? String(page[page.length - 1].seq) : null,
    };
  }

  private cutoff(now: number): number {
    return now - this.retainDays() * DAY_MS;
  }

  private prune(now: number): void {
    this.lastPrune = now;
    this.sql.exec("DELETE FROM audit WHERE at < ?", this.cutoff(now));
    const newest = this.sql.exec<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM audit").one().seq ?? 0;
    this.sql.exec("DELETE FROM audit WHERE seq <= ?", newest - MAX_ENTRIES);
  }
}
