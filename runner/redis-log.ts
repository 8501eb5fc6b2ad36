// The output log in Redis: one stream per session, `ptyb:{tenant/sessionId}:out` (the braces
// are a Redis Cluster hash tag, so a session's data stays on one shard). Each chunk is one
// entry with ID `<offset>-1` (offsets strictly increase, so IDs do; seq 1 because `0-0` is not
// a valid ID) and one field `d` holding the bytes. Needs Redis >= 6.2 (XTRIM MINID, exclusive
// XRANGE starts). The only file that imports ioredis.
import { Redis } from "ioredis";
import { log } from "../shared/log.js";
import { DEFAULT_READ_BYTES, ReadCollector } from "./memory-log.js";
import type { LogItem, OutputLog, OutputLogOptions } from "./output-log.js";

/** The Redis key of a session's stream. */
export function streamKey(key: string): string {
  return `ptyb:{${key}}:out`;
}

/**
 * Trimming runs once the log has grown this much since the last trim, not on every append,
 * so a session's stream can hold up to `retainBytes + trimSlack(retainBytes)` bytes between
 * trims. Each trim is exact: afterwards it holds at most `retainBytes`.
 */
export function trimSlack(retainBytes: number): number {
  return Math.max(1, Math.ceil(retainBytes / 8));
}

/** A session's TTL is refreshed at most this often (and at least twice per TTL). */
const EXPIRE_REFRESH_MS = 60_000;
/**
 * Entries per XRANGE: the first batch guesses full-size coalesced chunks (64 KiB by default),
 * so a big read does not fetch far more than it wants; later ones are sized by the average
 * entry seen so far.
 */
const GUESSED_ENTRY_BYTES = 64 * 1024;
const MAX_BATCH = 1024;

/**
 * Entries to ask for: enough for `wanted` bytes at `entryBytes` each, and no more, so a small
 * read (a replay's first piece, for a client that may drop at once) fetches little.
 */
function batchSize(wanted: number, entryBytes: number): number {
  return Math.min(MAX_BATCH, Math.max(1, Math.ceil(wanted / entryBytes)));
}

interface KeyState {
  /** Log end at the last trim. */
  trimmedAt: number;
  /** When EXPIRE was last sent (ms since epoch). */
  refreshedAt: number;
}

type Entry = [id: Buffer, fields: Buffer[]];

export class RedisLog implements OutputLog {
  private readonly redis: Redis;
  private readonly keys = new Map<string, KeyState>();
  private readonly slack: number;
  private readonly refreshMs: number;
  private up = false;
  private down = false;
  private closing = false;

  constructor(
    url: string,
    private readonly options: OutputLogOptions,
  ) {
    this.slack = trimSlack(options.retainBytes);
    this.refreshMs = Math.min(EXPIRE_REFRESH_MS, (options.idleTtlSec * 1000) / 2);
    this.redis = new Redis(url, {
      // While disconnected, commands fail at once instead of queueing; commands in flight when
      // the connection drops fail after one reconnect attempt.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      // A connection that hangs without closing (a blackholed host) fails commands too.
      commandTimeout: 5000,
      // Reconnect forever, quickly.
      retryStrategy: (times) => Math.min(times * 100, 1000),
    });
    // One log line per state change; the listener also keeps ioredis from printing its own.
    this.redis.on("error", (error: Error) => this.wentDown(error));
    this.redis.on("close", () => this.wentDown(new Error("connection closed")));
    this.redis.on("ready", () => {
      // The server may have restarted without its data: TTLs must be set again on next append.
      for (const state of this.keys.values()) state.refreshedAt = -Infinity;
      if (this.up) return;
      const again = this.down;
      this.up = true;
      this.down = false;
      log.info("redis.ready", {});
      // Back after an outage: the server may have restarted without its data.
      if (again) for (const listener of this.lostListeners) listener();
    });
  }

  private readonly lostListeners: (() => void)[] = [];

  onMaybeLost(listener: () => void): void {
    this.lostListeners.push(listener);
  }

  /** Resolves once connected (until then appends reject); rejects after `timeoutMs`. */
  ready(timeoutMs = 10_000): Promise<void> {
    if (this.redis.status === "ready") return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.redis.off("ready", onReady);
        reject(new Error(`redis not ready after ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      this.redis.once("ready", onReady);
    });
  }

  append(key: string, offset: number, data: Buffer): Promise<void> {
    if (data.byteLength === 0) return Promise.resolve();
    const stream = streamKey(key);
    // Not awaited here: ioredis writes each command to the socket at once, so back-to-back
    // appends are pipelined, and replies (hence these promises) come back in order.
    // The command is encoded (copied) right away, so the caller may reuse `data`.
    const added = this.redis.xadd(stream, `${offset}-1`, "d", data);
    if (this.redis.status === "ready") this.maintain(key, stream, offset + data.byteLength);
    return added.then(
      () => undefined,
      (error: unknown) => {
        if (!(error instanceof Error) || !/equal or smaller/i.test(error.message)) throw error;
        return this.appendAgain(stream, offset, data);
      },
    );
  }

  /**
   * An append at an offset the stream has passed: a retry of a chunk that landed after all
   * (its reply was lost), or of one that failed while a later pipelined one landed. The first
   * resolves as it is; for the second, the entries from `offset` on go and the chunk is added
   * (the caller appends the rest again, one at a time: output-log.ts).
   */
  private async appendAgain(stream: string, offset: number, data: Buffer): Promise<void> {
    const id = `${offset}-1`;
    const [held] = await this.redis.xrangeBuffer(stream, id, id);
    if (held && entryData(held).byteLength === data.byteLength) return;
    const later = await this.redis.xrangeBuffer(stream, id, "+");
    if (later.length > 0) await this.redis.xdel(stream, ...later.map(([entryId]) => entryId.toString("latin1")));
    // XDEL leaves the stream's last ID where it was; XADD needs it below this chunk's.
    await this.redis.xsetid(stream, `${offset}-0`);
    log.warn("log.append", { stream, offset, outcome: "replaced", dropped: later.length });
    await this.redis.xadd(stream, id, "d", data);
  }

  /** Trims and refreshes the TTL now and then; failures are retried by later appends. */
  private maintain(key: string, stream: string, end: number): void {
    let state = this.keys.get(key);
    if (!state) {
      state = { trimmedAt: end, refreshedAt: -Infinity };
      this.keys.set(key, state);
    }
    const now = Date.now();
    if (now - state.refreshedAt >= this.refreshMs) {
      const refreshing = state;
      refreshing.refreshedAt = now;
      this.redis.expire(stream, this.options.idleTtlSec).catch(() => {
        refreshing.refreshedAt = -Infinity;
      });
    }
    if (end - state.trimmedAt >= this.slack) {
      state.trimmedAt = end;
      // Exact MINID: every entry starting before end - retainBytes goes, a straddling one too.
      const minOffset = end - this.options.retainBytes;
      if (minOffset > 0) this.redis.xtrim(stream, "MINID", minOffset).catch(() => {});
    }
  }

  async read(key: string, from: number, to: number, maxBytes = DEFAULT_READ_BYTES): Promise<LogItem[]> {
    const collector = new ReadCollector(from, to, maxBytes);
    if (to <= from) return collector.finish();
    const stream = streamKey(key);
    const last = `${to - 1}-1`;
    let count = batchSize(collector.remaining(), GUESSED_ENTRY_BYTES);
    // Both sent at once: the last entry starting before `from` (it may reach into the range)
    // and the first batch of entries starting in [from, to).
    const [before, first] = await Promise.all([
      this.redis.xrevrangeBuffer(stream, `${from}-0`, "-", "COUNT", 1),
      this.redis.xrangeBuffer(stream, `${from}-0`, last, "COUNT", count),
    ]);
    for (const entry of before) collector.add(entryOffset(entry), entryData(entry));
    let batch: Entry[] = first;
    let entries = 0;
    let bytes = 0;
    for (;;) {
      for (const entry of batch) {
        if (!collector.add(entryOffset(entry), entryData(entry))) return collector.finish();
        entries++;
        bytes += entryData(entry).byteLength;
      }
      if (batch.length < count) return collector.finish(); // the log ends before `to`
      count = batchSize(collector.remaining(), bytes / entries);
      batch = await this.redis.xrangeBuffer(stream, `(${batch[batch.length - 1][0].toString()}`, last, "COUNT", count);
    }
  }

  async retainedFrom(key: string): Promise<number | null> {
    const [first] = await this.redis.xrangeBuffer(streamKey(key), "-", "+", "COUNT", 1);
    return first ? entryOffset(first) : null;
  }

  async expire(key: string, ttlSec: number): Promise<void> {
    this.keys.delete(key);
    await this.redis.expire(streamKey(key), ttlSec);
  }

  async remove(key: string): Promise<void> {
    this.keys.delete(key);
    await this.redis.del(streamKey(key));
  }

  async close(): Promise<void> {
    this.closing = true;
    this.keys.clear();
    try {
      await this.redis.quit(); // waits for replies still due
    } catch {
      this.redis.disconnect(); // not connected: just stop reconnecting
    }
  }

  private wentDown(error: Error): void {
    if (this.down || this.closing) return;
    this.down = true;
    this.up = false;
    log.warn("redis.error", { error });
  }
}

function entryOffset([id]: Entry): number {
  const text = id.toString("latin1");
  return Number(text.slice(0, text.indexOf("-")));
}

function entryData([, fields]: Entry): Buffer {
  return fields[1] ?? Buffer.alloc(0);
}
