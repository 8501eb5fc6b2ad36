// The tenant's minted API keys (docs/security.md, "Keys"), in its object's SQLite: each row the
// key's id, name, scopes, times and the SHA-256 hash of its secret part (never the text). The
// Worker asks this object on every request made with one of them (auth/auth.ts), so a revoke
// holds from the next request. `lastUsedAt` is written at most once a minute per key, not per
// request.
import { type Failure, fail } from "../../shared/errors.js";
import type { KeyInfo, KeyScope } from "../../shared/keys.js";
import { keyPrefix } from "../auth/keys.js";
import type { KeyCheck, NewKeyRow } from "../rpc.js";

/** Keys one tenant may hold at once (409 beyond). */
export const MAX_KEYS = 1000;
/** `lastUsedAt` moves when the stored one is at least this old. */
const LAST_USED_EVERY_MS = 60_000;

interface KeyRow extends Record<string, SqlStorageValue> {
  id: string;
  name: string;
  hash: string;
  scopes: string;
  created_at: number;
  last_used_at: number | null;
  expires_at: number | null;
}

const encoder = new TextEncoder();

/** Equal hex digests, compared in constant time. */
function sameHash(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  return x.byteLength === y.byteLength && crypto.subtle.timingSafeEqual(x, y);
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export class TenantKeys {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(`CREATE TABLE IF NOT EXISTS keys (
      id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      hash TEXT NOT NULL,
      scopes TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      last_used_at INTEGER,
      expires_at INTEGER
    )`);
  }

  /** A presented key: its hash must match, and it must not have expired. */
  check(keyId: string, hash: string, now = Date.now()): KeyCheck {
    const row = this.row(keyId);
    if (!row || !sameHash(row.hash, hash)) return { ok: false, expiredAt: null };
    return this.standing(row, now);
  }

  /** Whether the key still stands (a session token it minted is in use). */
  alive(keyId: string, now = Date.now()): KeyCheck {
    const row = this.row(keyId);
    return row ? this.standing(row, now) : { ok: false, expiredAt: null };
  }

  add(tenant: string, key: NewKeyRow, now = Date.now()): KeyInfo | Failure {
    const count = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM keys").one().n;
    if (count >= MAX_KEYS) return fail("CONFLICT", `a tenant holds at most ${MAX_KEYS} keys: revoke one first`);
    this.sql.exec(
      "INSERT INTO keys (id, name, hash, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
      key.keyId,
      key.name,
      key.hash,
      JSON.stringify(key.scopes),
      now,
      key.expiresAt === null ? null : Date.parse(key.expiresAt),
    );
    return this.info(tenant, this.row(key.keyId) as KeyRow);
  }

  list(tenant: string): KeyInfo[] {
    return this.sql
      .exec<KeyRow>("SELECT * FROM keys ORDER BY created_at, id")
      .toArray()
      .map((row) => this.info(tenant, row));
  }

  /** Deletes the key; false when there was none. */
  remove(keyId: string): boolean {
    return this.sql.exec("DELETE FROM keys WHERE id = ? RETURNING id", keyId).toArray().length > 0;
  }

  /** Deletes every key; answers their ids. */
  removeAll(): string[] {
    return this.sql
      .exec<{ id: string }>("DELETE FROM keys RETURNING id")
      .toArray()
      .map((row) => row.id);
  }

  private row(keyId: string): KeyRow | undefined {
    return this.sql.exec<KeyRow>("SELECT * FROM keys WHERE id = ?", keyId).toArray()[0];
  }

  private standing(row: KeyRow, now: number): KeyCheck {
    if (row.expires_at !== null && row.expires_at <= now) return { ok: false, expiredAt: iso(row.expires_at) };
    if (row.last_used_at === null || now - row.last_used_at >= LAST_USED_EVERY_MS) {
      this.sql.exec("UPDATE keys SET last_used_at = ? WHERE id = ?", now, row.id);
    }
    return { ok: true, scopes: JSON.parse(row.scopes) as KeyScope[] };
  }

  private info(tenant: string, row: KeyRow): KeyInfo {
    return {
      keyId: row.id,
      name: row.name,
      prefix: keyPrefix(tenant, row.id),
      scopes: JSON.parse(row.scopes) as KeyScope[],
      createdAt: iso(row.created_at) as string,
      lastUsedAt: iso(row.last_used_at),
      expiresAt: iso(row.expires_at),
    };
  }
}
