// The output log in Redis: one stream per session, `ptyb:{tenant/sessionId/incarnation}:out` (the
// braces are a Redis Cluster hash tag, so a session's data stays on one shard). Each chunk is one
// entry with ID `<offset>-1` (offsets strictly increase, so IDs do; seq 1 because `0-0` is not
// a valid ID): field `d` holds the bytes, `t` when the runner read them (ms since epoch), `s` is
// "1" for stderr (absent: stdout or a terminal), `z` the terminal's size as `COLSxROWS` (absent
// without a terminal). Entries written before `t`/`s`/`z` existed read as UNKNOWN_META (redis-
// entries.ts). Needs Redis >= 6.2 (XTRIM MINID, exclusive XRANGE starts) with scripting (EVAL, for
// the trims and the tenant bound's counts: redis-log-tenant.ts). The only file that imports ioredis.
//
// One Redis or a Redis Cluster (REDIS_URL, runner/log/redis-url.ts): a node list connects with
// ioredis's Cluster client at once; a single URL connects with the plain client, asks the server
// `INFO cluster` on every (re)connect, and moves to the Cluster client when it answers
// `cluster_enabled:1`. INFO is what ioredis's own ready check sends, so it is allowed wherever the
// plain client works; the answer is the server's own setting (no guessing from errors); and a
// plain Redis costs one round trip per connect. Every command here names exactly one key, or
// (the tenant bound's scripts) keys of one hash tag (no MULTI, no explicit pipeline), so each is
// routed to one shard and none can be CROSSSLOT; back-to-back appends are still pipelined on
// that shard's connection, in order.
import { Cluster, Redis } from "ioredis";
import { log } from "../../shared/log.js";
import { type ChunkMeta, UNKNOWN_META } from "../../shared/protocol.js";
import { DEFAULT_READ_BYTES, ReadCollector } from "./memory-log.js";
import type { LogItem, OutputLog, OutputLogOptions } from "./output-log.js";
import { type Entry, entryData, entryMeta, entryOffset, metaFields } from "./redis-entries.js";
import { type LuaScript, RETENTION_TRIM, RedisTenantBound } from "./redis-log-tenant.js";
import { TenantBounds } from "./tenant-bound.js";
import { parseRedisUrl, type RedisTarget } from "./redis-url.js";

/** The Redis key of a session's stream. */
export function streamKey(key: string): string {
  return `ptyb:{${key}}:out`;
}

/**
 * Trimming runs once the log has grown this much since the last trim, not on every append,
 * so between trims a stream holds up to `trimSlack(retainBytes)` bytes more than a trim leaves.
 * Each trim is exact: it leaves the entries that hold the newest `retainBytes` bytes (the one
 * holding byte `end - retainBytes` included) and removes every entry wholly older than that.
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
 * Entries to ask for: enough for `wanted` bytes at `entryBytes` each and one more (the range's
 * last entry may straddle its end), and no more, so a small read fetches little.
 */
function batchSize(wanted: number, entryBytes: number): number {
  return Math.min(MAX_BATCH, Math.max(1, Math.ceil(wanted / entryBytes) + 1));
}

interface KeyState {
  /** Log end at the last trim. */
  trimmedAt: number;
  /** When EXPIRE was last sent (ms since epoch). */
  refreshedAt: number;
}

/** Commands fail after this long without a reply (a blackholed host), not never. */
const COMMAND_TIMEOUT_MS = 5000;
/** Redial quickly, forever: ms before attempt `times`. */
const redial = (times: number): number => Math.min(times * 100, 1000);

export class RedisLog implements OutputLog {
  /** The client in use: the plain one, or the Cluster client once the URL names a cluster. */
  private redis: Redis | Cluster;
  private readonly target: RedisTarget;
  private readonly keys = new Map<string, KeyState>();
  private readonly tenant: RedisTenantBound;
  private readonly bounds: TenantBounds;
  private readonly slack: number;
  private readonly refreshMs: number;
  private up = false;
  private down = false;
  private closing = false;
  /** Cluster nodes (`host:port`) whose connection failed and has not been ready since. */
  private readonly downNodes = new Set<string>();
  private readonly readyWaiters = new Set<() => void>();
  private readonly lostListeners: (() => void)[] = [];
  private connectedAs: "single" | "cluster" | undefined;

  constructor(
    url: string,
    private readonly options: OutputLogOptions,
  ) {
    this.slack = trimSlack(options.retainBytes);
    this.refreshMs = Math.min(EXPIRE_REFRESH_MS, (options.idleTtlSec * 1000) / 2);
    this.target = parseRedisUrl(url);
    this.redis = this.target.nodes.length > 1 ? this.connectCluster() : this.connectSingle(url);
    this.bounds = new TenantBounds(options.tenantBytes);
    this.tenant = new RedisTenantBound((script, keys, args) => this.script(script, keys, args), streamKey, this.bounds);
  }

  /** What the log is connected to once it has been ready: one Redis or a cluster. */
  get mode(): "single" | "cluster" | undefined {
    return this.connectedAs;
  }

  /** The plain client on a single-node URL, as before clusters: options, logging, redialling. */
  private connectSingle(url: string): Redis {
    const redis = new Redis(url, {
      // While disconnected, commands fail at once instead of queueing; commands in flight when
      // the connection drops fail after one reconnect attempt.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      // A connection that hangs without closing (a blackholed host) fails commands too.
      commandTimeout: COMMAND_TIMEOUT_MS,
      // Reconnect forever, quickly.
      retryStrategy: redial,
    });
    // One log line per state change; the listener also keeps ioredis from printing its own.
    const onError = (error: Error) => this.wentDown(error);
    const onClose = () => this.wentDown(new Error("connection closed"));
    const onReady = () => void this.singleReady(redis, detach);
    const detach = () => {
      redis.off("close", onClose);
      redis.off("ready", onReady);
      redis.off("error", onError);
      redis.on("error", () => {}); // still handled, so never thrown
    };
    redis.on("error", onError);
    redis.on("close", onClose);
    redis.on("ready", onReady);
    return redis;
  }

  /** Connected on a single-node URL: a plain Redis, or one node of a cluster (then switch). */
  private async singleReady(redis: Redis, detach: () => void): Promise<void> {
    let info = "";
    try {
      info = await redis.info("cluster");
    } catch (error) {
      if (redis.status !== "ready") return; // dropped again: the next "ready" asks again
      // INFO refused (an ACL without it): take the URL for a plain Redis, and say so.
      log.warn("redis.cluster", { outcome: "unknown", error });
    }
    if (this.closing || this.redis !== redis) return;
    if (!/^cluster_enabled:1\b/m.test(info)) return this.cameUp("single");
    const [node] = this.target.nodes;
    log.info("redis.cluster", { outcome: "detected", node: node ? `${node.host}:${node.port}` : undefined });
    // Quietly: the plain client's close is not an outage.
    detach();
    redis.disconnect();
    this.redis = this.connectCluster();
  }

  /**
   * ioredis's Cluster client, with the plain client's behaviour: no offline queue (a command for
   * a shard that cannot take it fails at once), commands time out, and it redials forever.
   */
  private connectCluster(): Cluster {
    const { nodes, tls, username, password } = this.target;
    const cluster = new Cluster(nodes, {
      enableOfflineQueue: false,
      // Every node gone (the cluster, or the network, down): dial the listed nodes again, forever.
      clusterRetryStrategy: redial,
      // A command that meets a dropped node connection or CLUSTERDOWN fails now instead of being
      // retried for up to maxRedirections × 100 ms: the caller keeps the chunk and appends it
      // again (runner/flow/delivery.ts), as it does with one Redis. MOVED/ASK are still followed.
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 0,
      // Node connections: ioredis never redials them itself (it finds nodes again from the
      // cluster's slot map), so its retry options do not apply here.
      redisOptions: {
        username,
        password,
        tls: tls ? {} : undefined,
        maxRetriesPerRequest: 1,
        commandTimeout: COMMAND_TIMEOUT_MS,
      },
    });
    // The whole cluster unreachable: slot map refresh failed, or every node connection closed.
    cluster.on("error", (error: Error) => this.wentDown(error));
    cluster.on("close", () => this.wentDown(new Error("every cluster node connection closed")));
    // One node unreachable: its shard's appends fail while the others' go on.
    cluster.on("node error", (error: Error, node: string) => this.nodeDown(node, error));
    cluster.on("+node", (redis: Redis) => {
      redis.on("ready", () => this.nodeReady(`${redis.options.host}:${redis.options.port}`));
      // The Cluster client dials a node on the first command for it, and without an offline
      // queue the commands right behind that one fail while it connects. A node learnt while
      // the cluster is up (a new slot map) is dialled at once, on the next tick so that the
      // command that made it goes first; while the cluster connects, nodes are left to the
      // client's own ready check (a node dialled now would refuse it) and then clusterReady.
      setImmediate(() => {
        if (cluster.status === "ready" && redis.status === "wait") redis.connect().catch(() => {}); // failures come as "node error"
      });
    });
    cluster.on("refresh", () => this.forgetGoneNodes(cluster));
    cluster.on("ready", () => void this.clusterReady(cluster));
    return cluster;
  }

  /**
   * The cluster answered (slot map and `cluster_state:ok`): the log is ready once every master
   * is connected too, so the first appends are not refused while their shard's connection opens.
   */
  private async clusterReady(cluster: Cluster): Promise<void> {
    this.downNodes.clear();
    // A node's own client queues while it connects: PING resolves once connected (or fails).
    await Promise.allSettled(cluster.nodes("master").map((node) => node.ping()));
    if (this.closing || this.redis !== cluster || cluster.status !== "ready") return;
    // A master that could not be reached is in downNodes now: ready once it is back (nodeReady).
    if (this.downNodes.size === 0) this.cameUp("cluster");
  }

  private nodeDown(node: string, error: Error): void {
    if (this.closing) return;
    if (!this.downNodes.has(node)) {
      this.downNodes.add(node);
      log.warn("redis.cluster", { outcome: "node_down", node, error });
    }
    this.wentDown(error);
  }

  private nodeReady(node: string): void {
    if (this.closing || !this.downNodes.delete(node)) return;
    log.info("redis.cluster", { outcome: "node_up", node });
    // The node may have restarted without its data: TTLs must be set again on next append.
    for (const state of this.keys.values()) state.refreshedAt = -Infinity;
    if (this.downNodes.size === 0 && this.redis.status === "ready") this.cameUp("cluster");
  }

  /** A node that no longer holds slots is no longer waited for. */
  private forgetGoneNodes(cluster: Cluster): void {
    const current = new Set(cluster.nodes().map((redis) => `${redis.options.host}:${redis.options.port}`));
    for (const node of this.downNodes) {
      if (current.has(node)) continue;
      this.downNodes.delete(node);
      log.info("redis.cluster", { outcome: "node_removed", node });
    }
    if (this.down && this.downNodes.size === 0 && cluster.status === "ready") this.cameUp("cluster");
  }

  /** Connected (again): one line for the change, and listeners told the data may be gone. */
  private cameUp(mode: "single" | "cluster"): void {
    if (this.closing) return;
    this.connectedAs = mode;
    // The server may have restarted without its data: TTLs must be set again on next append.
    for (const state of this.keys.values()) state.refreshedAt = -Infinity;
    if (this.up) return;
    const again = this.down;
    this.up = true;
    this.down = false;
    const masters = this.redis instanceof Cluster ? this.redis.nodes("master").length : undefined;
    log.info("redis.ready", { mode, masters });
    for (const resolve of this.readyWaiters) resolve();
    this.readyWaiters.clear();
    // Back after an outage: the server may have restarted without its data.
    if (again) for (const listener of this.lostListeners) listener();
  }

  onMaybeLost(listener: () => void): void {
    this.lostListeners.push(listener);
  }

  /** Resolves once connected (until then appends reject); rejects after `timeoutMs`. */
  ready(timeoutMs = 10_000): Promise<void> {
    if (this.up) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.readyWaiters.delete(onReady);
        reject(new Error(`redis not ready after ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      this.readyWaiters.add(onReady);
    });
  }

  append(key: string, offset: number, data: Buffer, meta: ChunkMeta = UNKNOWN_META): Promise<void> {
    if (data.byteLength === 0) return Promise.resolve();
    const stream = streamKey(key);
    const fields = metaFields(meta);
    // Not awaited here: ioredis writes each command to the socket at once, so back-to-back
    // appends are pipelined, and replies (hence these promises) come back in order.
    // The command is encoded (copied) right away, so the caller may reuse `data`.
    const added = this.redis.xadd(stream, `${offset}-1`, "d", data, ...fields);
    const refreshed = this.redis.status === "ready" && this.maintain(key, stream, offset + data.byteLength);
    return added.then(
      () => this.counted(key, data.byteLength, meta, refreshed),
      (error: unknown) => {
        if (!(error instanceof Error) || !/equal or smaller/i.test(error.message)) throw error;
        return this.appendAgain(stream, offset, data, fields).then((bytes) => this.counted(key, bytes, meta, refreshed));
      },
    );
  }

  /**
   * The stream holds `bytes` more: into the tenant's count (not awaited: see RedisTenantBound),
   * with the stream's TTL when this append refreshed it.
   */
  private counted(key: string, bytes: number, meta: ChunkMeta, refreshed: boolean): void {
    if (bytes !== 0) this.tenant.added(key, bytes, meta.at, refreshed ? this.options.idleTtlSec : undefined);
  }

  /**
   * An append at an offset the stream has passed: a retry of a chunk that landed after all
   * (its reply was lost), or of one that failed while a later pipelined one landed. The first
   * resolves as it is; for the second, the entries from `offset` on go and the chunk is added
   * (the caller appends the rest again, one at a time: output-log.ts). Resolves with how much
   * more the stream holds than the count knows: the attempt whose reply was lost was not counted.
   */
  private async appendAgain(stream: string, offset: number, data: Buffer, fields: string[]): Promise<number> {
    const id = `${offset}-1`;
    const [held] = await this.redis.xrangeBuffer(stream, id, id);
    if (held && entryData(held).byteLength === data.byteLength) return data.byteLength;
    const later = await this.redis.xrangeBuffer(stream, id, "+");
    if (later.length > 0) await this.redis.xdel(stream, ...later.map(([entryId]) => entryId.toString("latin1")));
    // XDEL leaves the stream's last ID where it was; XADD needs it below this chunk's.
    await this.redis.xsetid(stream, `${offset}-0`);
    log.warn("log.append", { stream, offset, outcome: "replaced", dropped: later.length });
    await this.redis.xadd(stream, id, "d", data, ...fields);
    return later.reduce((bytes, entry) => bytes - entryData(entry).byteLength, data.byteLength);
  }

  /** Runs a script on its keys' shard: by its SHA1, and by its text when the shard lacks it. */
  private async script(script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await this.redis.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
      return this.redis.eval(script.lua, keys.length, ...keys, ...args);
    }
  }

  /** Trims and refreshes the TTL now and then (true when it did the latter); failures are retried by later appends. */
  private maintain(key: string, stream: string, end: number): boolean {
    let state = this.keys.get(key);
    if (!state) {
      state = { trimmedAt: end, refreshedAt: -Infinity };
      this.keys.set(key, state);
    }
    const now = Date.now();
    const refresh = now - state.refreshedAt >= this.refreshMs;
    if (refresh) {
      const refreshing = state;
      refreshing.refreshedAt = now;
      this.redis.expire(stream, this.options.idleTtlSec).catch(() => {
        refreshing.refreshedAt = -Infinity;
      });
    }
    if (end - state.trimmedAt >= this.slack) {
      state.trimmedAt = end;
      // Every entry wholly older than end - retainBytes goes; the one straddling it stays.
      const minOffset = end - this.options.retainBytes;
      if (minOffset > 0) {
        this.script(RETENTION_TRIM, [stream], [minOffset]).then(
          (reply) => {
            const [removed, oldest] = reply as number[];
            if (removed > 0) this.tenant.retentionTrimmed(key, removed, oldest);
          },
          () => {},
        );
      }
    }
    return refresh;
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
    for (const entry of before) collector.add(entryOffset(entry), entryData(entry), entryMeta(entry));
    let batch: Entry[] = first;
    let entries = 0;
    let bytes = 0;
    for (;;) {
      for (const entry of batch) {
        if (!collector.add(entryOffset(entry), entryData(entry), entryMeta(entry))) return collector.finish();
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
    await this.tenant.ended(key, ttlSec);
  }

  async remove(key: string): Promise<void> {
    this.keys.delete(key);
    await this.redis.del(streamKey(key));
    await this.tenant.purged(key);
  }

  hold(key: string, floor: number | null): void {
    this.tenant.hold(key, floor);
  }

  onTrimmed(listener: (key: string, retainedFrom: number) => void): void {
    this.tenant.trims.onTrimmed(listener);
  }

  boundTenant(tenant: string, bytes: number | undefined): void {
    this.bounds.set(tenant, bytes);
  }

  tenantBytes(tenant: string): Promise<number> {
    return this.tenant.total(tenant);
  }

  settled(): Promise<void> {
    return this.tenant.settled();
  }

  async close(): Promise<void> {
    this.closing = true;
    this.keys.clear();
    try {
      await this.redis.quit(); // waits for replies still due
    } catch {
      // not connected
    }
    this.redis.disconnect(); // and stop reconnecting
  }

  private wentDown(error: Error): void {
    if (this.down || this.closing) return;
    this.down = true;
    this.up = false;
    log.warn("redis.error", { error });
  }
}
