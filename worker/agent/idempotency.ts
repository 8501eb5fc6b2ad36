// `Idempotency-Key` on REST input (docs/protocol.md §3, "Agents"): an answer remembered per key
// for 10 minutes, so an agent that retries a request it never heard back from types its command
// once. Kept in the session object's SQLite storage, at most MAX_KEYS per session (the oldest go
// first).
import { type Failure, fail } from "../../shared/errors.js";

const KEEP_MS = 10 * 60_000;
const MAX_KEYS = 1000;

export interface Remembered<T> {
  /** The earlier answer, when the same key came with the same body. */
  answer: T;
}

export class IdempotencyKeys<T> {
  constructor(private readonly sql: SqlStorage) {}

  /**
   * The answer given to `key` within the last 10 minutes, or undefined when there is none; a
   * Failure when the key came before with another body.
   */
  recall(key: string, bodyHash: string, now: number): Remembered<T> | Failure | undefined {
    this.ensure();
    this.sql.exec("DELETE FROM idempotency WHERE at < ?", now - KEEP_MS);
    const row = this.sql.exec<{ hash: string; answer: string }>("SELECT hash, answer FROM idempotency WHERE key = ?", key).toArray()[0];
    if (!row) return undefined;
    if (row.hash !== bodyHash) return fail("CONFLICT", "this Idempotency-Key was used with a different body");
    return { answer: JSON.parse(row.answer) as T };
  }

  remember(key: string, bodyHash: string, answer: T, now: number): void {
    this.ensure();
    this.sql.exec("INSERT OR REPLACE INTO idempotency (key, hash, answer, at) VALUES (?, ?, ?, ?)", key, bodyHash, JSON.stringify(answer), now);
    this.sql.exec(
      "DELETE FROM idempotency WHERE key IN (SELECT key FROM idempotency ORDER BY at DESC LIMIT -1 OFFSET ?)",
      MAX_KEYS,
    );
  }

  /** Storage may have been wiped (deleteAll on purge): the table is made again when needed. */
  private ensure(): void {
    this.sql.exec("CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, hash TEXT NOT NULL, answer TEXT NOT NULL, at INTEGER NOT NULL)");
  }
}
