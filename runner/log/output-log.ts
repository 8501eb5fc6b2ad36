// The output log: every output byte of a session, by absolute offset, kept for replay.
// Two implementations behind this one interface: Redis streams (`redis-log.ts`, the only file
// that imports ioredis) when REDIS_URL is set, and an in-process log (`memory-log.ts`) otherwise.
// Sessions are named by their key, `tenant/sessionId/incarnation`. With each chunk the log keeps its stream
// (stdout or stderr), when the runner read it, and the terminal's size then (docs/protocol.md §3,
// "Recordings": what a recording is made of).
import type { ChunkMeta } from "../../shared/protocol.js";

/** What a read yields, in offset order, covering the requested range exactly. */
export type LogItem =
  /** bytes [offset, offset + data.byteLength), with what the log keeps about their chunk */
  | { type: "chunk"; offset: number; data: Buffer; meta: ChunkMeta }
  /** bytes [from, to) are not in the log: trimmed by retention, expired, or never stored */
  | { type: "gap"; from: number; to: number };

export interface OutputLog {
  /**
   * Stores `data` as the bytes at `offset`. Calls for one key come in offset order, each
   * starting where the previous ended, without waiting for the previous one (pipelined);
   * they resolve in call order. Rejects when the log cannot store the chunk (e.g. Redis is
   * down); the caller keeps the chunk and appends it again later (runner/flow/delivery.ts).
   * Idempotent for that retry: a chunk the log already holds at `offset` (same length)
   * resolves without change; an append at an offset the log has passed without holding it
   * (a later pipelined append landed while this one failed) drops everything from `offset`
   * on first, and the caller then appends the rest again, one chunk at a time.
   * Trims the session's log, keeping at least `retainBytes`: afterwards the newest
   * `retainBytes` bytes (or all, if fewer were written) are still readable, so `retainedFrom`
   * is at most `end - retainBytes`. Only whole chunks go, and a chunk goes only when every
   * byte of it is older than `end - retainBytes`; the one holding that byte stays whole.
   * (RedisLog trims every `retainBytes / 8` bytes, so wholly older chunks may linger that long.)
   * Counts the chunk into its tenant's retained bytes; past the tenant's bound its oldest
   * output is trimmed soon after, not before the append resolves, and then a session may keep
   * less than `retainBytes` (tenant-bound.ts).
   */
  append(key: string, offset: number, data: Buffer, meta?: ChunkMeta): Promise<void>;

  /**
   * Items covering [from, to) exactly: chunks (sliced at both ends to the range) and gaps for
   * whatever the log does not hold, in order, at most about `maxBytes` of chunk data (the
   * range may end early then; the caller reads on from where it stopped).
   */
  read(key: string, from: number, to: number, maxBytes?: number): Promise<LogItem[]>;

  /** Oldest offset still held, or null when nothing is held for `key`. */
  retainedFrom(key: string): Promise<number | null>;

  /**
   * The session's floor: the first offset its live edge has not acknowledged (runner/flow/
   * delivery.ts keeps and resends everything from there). The tenant bound never trims at or
   * above it. Called as acknowledgements arrive; `null` when nothing is held any more (the
   * session is over here). Never rejects: a floor that could not be stored is sent again with
   * the next append.
   */
  hold(key: string, floor: number | null): void;

  /** Calls `listener` when the tenant bound moved the start of a session's log to `retainedFrom`. */
  onTrimmed(listener: (key: string, retainedFrom: number) => void): void;

  /**
   * The tenant's own bound from now on (its `logBytes`, sent with each spawn), or undefined for
   * the runner's (`tenantBytes`). A lower bound trims at the tenant's next append.
   */
  boundTenant(tenant: string, bytes: number | undefined): void;

  /** The tenant's retained bytes, as the log counts them for the tenant bound. */
  tenantBytes(tenant: string): Promise<number>;

  /** Resolves once the counting and trimming that appends so far asked for are done (for tests). */
  settled(): Promise<void>;

  /** The session has ended: drop its log `ttlSec` seconds from now. */
  expire(key: string, ttlSec: number): Promise<void>;

  /** Drops the session's log now. */
  remove(key: string): Promise<void>;

  /**
   * Calls `listener` whenever the log may have lost what it held (Redis came back after an
   * outage, perhaps restarted without its data), so whoever keeps copies of it drops them.
   * The in-process log loses nothing while the runner lives and never calls it.
   */
  onMaybeLost?(listener: () => void): void;

  /** Releases connections and timers. */
  close(): Promise<void>;
}

export interface OutputLogOptions {
  /** Bytes kept per session, at least (OUTPUT_RETAIN_BYTES). */
  retainBytes: number;
  /** How long a running session's log lives without appends before it is dropped anyway. */
  idleTtlSec: number;
  /**
   * Retained bytes of all one tenant's sessions together (TENANT_LOG_BYTES), for a tenant with no
   * bound of its own (`boundTenant`); unset: no bound.
   */
  tenantBytes?: number;
}
