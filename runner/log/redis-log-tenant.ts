// The tenant bound in Redis (tenant-bound.ts; docs/architecture.md, "The tenant bound in Redis"):
// every runner that shares the Redis shares one count per tenant, kept in three keys that carry
// the tenant's hash tag, so each script below touches keys of ONE hash slot, as the streams' do
// (the rule at the top of redis-log.ts):
//   ptyb:{tenant:<t>}:sizes   hash: `total`, the tenant's retained bytes; `<key>`, a session's
//                             retained bytes (so a stream that is gone is subtracted exactly);
//                             `floor:<key>`, the session's floor (OutputLog.hold)
//   ptyb:{tenant:<t>}:oldest  zset: session key → read time (ms, the chunk's `t`) of its oldest chunk
//   ptyb:{tenant:<t>}:expiry  zset: session key → when its stream expires at the latest (ms, Redis's
//                             clock), so an expired stream leaves the count without anyone looking
// A stream's own scripts (the retention trim, the front trim) run on the stream's slot and return
// what they removed; the tenant's scripts then subtract it. Scripts go by EVALSHA (EVAL when the
// shard does not know them yet). No ioredis here: redis-log.ts hands in `run`.
import { createHash } from "node:crypto";
import { type FrontTrim, type TenantBounds, type TenantCandidate, type TenantPick, type TenantStore, TenantTrims, tenantOf } from "./tenant-bound.js";

export interface LuaScript {
  lua: string;
  sha: string;
}

/** Runs a script on the shard of its keys and resolves with its reply. */
export type RunScript = (script: LuaScript, keys: string[], args: (string | number)[]) => Promise<unknown>;

function lua(text: string): LuaScript {
  return { lua: text, sha: createHash("sha1").update(text).digest("hex") };
}

/** The tenant's keys, in the order every tenant script takes them. */
export function tenantKeys(tenant: string): [sizes: string, oldest: string, expiry: string] {
  return [`ptyb:{tenant:${tenant}}:sizes`, `ptyb:{tenant:${tenant}}:oldest`, `ptyb:{tenant:${tenant}}:expiry`];
}

/**
 * What a tenant's expiry entry adds to a stream's TTL: the stream's EXPIRE and the tenant script
 * run apart (two slots, maybe two machines' clocks), and a stream must never leave the count
 * while it still exists.
 */
const EXPIRY_MARGIN_MS = 60_000;

/** Entries a front trim removes at most in one call (the loop comes back for more). */
const FRONT_TRIM_MAX_ENTRIES = 256;

/** Lua shared by the stream scripts: an entry's offset and one of its fields. */
const ENTRY_LUA = `
local function offsetOf(id) return tonumber(string.sub(id, 1, string.find(id, '-', 1, true) - 1)) end
local function field(fields, name)
  for i = 1, #fields, 2 do if fields[i] == name then return fields[i + 1] end end
  return nil
end
local function sizeOf(entry) return string.len(field(entry[2], 'd') or '') end
local function timeOf(entry) return tonumber(field(entry[2], 't') or '0') or 0 end
`;

/**
 * The retention trim of one stream (OUTPUT_RETAIN_BYTES): the entries that hold bytes at or after
 * ARGV[1] (`end - retainBytes`) stay: the last entry starting at or before that offset is kept if
 * it reaches past it, and everything older goes (XTRIM MINID, exact). Replies {bytes removed,
 * time of the oldest entry left (-1: none), the offset the stream now starts at}, or {0} when
 * nothing goes, for the tenant's count. The bytes removed are counted by offsets (from the first
 * entry to the first kept), reading three entries, not every one removed: a script that read
 * them took 2 ms per MiB trimmed (Lua copies each entry's data), a third of the log's append
 * speed. A hole inside a stream (output a failover lost after it was counted) counts as removed,
 * which takes that output out of the count too.
 */
export const RETENTION_TRIM = lua(`${ENTRY_LUA}
local last = redis.call('XREVRANGE', KEYS[1], ARGV[1] .. '-1', '-', 'COUNT', 1)[1]
if not last then return {0} end
local lastEnd = offsetOf(last[1]) + sizeOf(last)
local minid = lastEnd > tonumber(ARGV[1]) and last[1] or ARGV[1] .. '-0'
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if redis.call('XTRIM', KEYS[1], 'MINID', minid) == 0 then return {0} end
local kept = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if not kept then return {lastEnd - offsetOf(first[1]), -1, lastEnd} end
return {offsetOf(kept[1]) - offsetOf(first[1]), timeOf(kept), offsetOf(kept[1])}
`);

/**
 * The tenant bound's trim of one stream's front (TenantStore.trimFront): whole entries go while
 * removed < ARGV[1] (the excess), the entry ends at or below ARGV[2] (the floor; '' = none) and its
 * time is not after ARGV[3] (the next session's oldest; '+inf' = none). Replies {-1} when the
 * stream does not exist, else {removed, time of the oldest entry left or -1 for none, the offset
 * the stream now starts at}.
 */
const FRONT_TRIM = lua(`${ENTRY_LUA}
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local excess = tonumber(ARGV[1])
local floor = ARGV[2] == '' and math.huge or tonumber(ARGV[2])
local notAfter = ARGV[3] == '+inf' and math.huge or tonumber(ARGV[3])
-- Batches start small: a trim after an append usually takes one entry, and each entry read is
-- copied whole into Lua.
local removed, count, start, from, want = 0, 0, 0, '-', 2
local function cut(before) if count > 0 then redis.call('XTRIM', KEYS[1], 'MINID', before) end end
while true do
  local batch = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', want)
  if #batch == 0 then break end
  want = math.min(want * 2, 64)
  for _, entry in ipairs(batch) do
    local offset, bytes, t = offsetOf(entry[1]), sizeOf(entry), timeOf(entry)
    if removed >= excess or offset + bytes > floor or t > notAfter or count >= ${FRONT_TRIM_MAX_ENTRIES} then
      cut(entry[1])
      return {removed, t, offset}
    end
    removed, count, start = removed + bytes, count + 1, offset + bytes
  end
  from = '(' .. batch[#batch][1]
end
if count > 0 then redis.call('XTRIM', KEYS[1], 'MAXLEN', 0) end
return {removed, -1, start}
`);

/**
 * Lua shared by the tenant scripts: a count moved (never by -0, which Lua prints as "-0" and
 * HINCRBY refuses), the time on Redis's clock, a session leaving the count, a session's expiry.
 */
const TENANT_LUA = `
local function add(field, n)
  if n == 0 then return tonumber(redis.call('HGET', KEYS[1], field) or '0') end
  return redis.call('HINCRBY', KEYS[1], field, n)
end
local function nowMs()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
local function forget(key)
  local had = tonumber(redis.call('HGET', KEYS[1], key) or '0')
  redis.call('HDEL', KEYS[1], key, 'floor:' .. key)
  add('total', -had)
  redis.call('ZREM', KEYS[2], key)
  redis.call('ZREM', KEYS[3], key)
end
local function live(key, ttlSec)
  redis.call('ZADD', KEYS[3], nowMs() + ttlSec * 1000 + ${EXPIRY_MARGIN_MS}, key)
  local ttl = ttlSec + ${EXPIRY_MARGIN_MS / 1000}
  for i = 1, 3 do
    local left = redis.call('TTL', KEYS[i])
    if left ~= -2 and left < ttl then redis.call('EXPIRE', KEYS[i], ttl) end
  end
end
`;

/**
 * An append landed (or a retry changed what the stream holds by ARGV[2] bytes, maybe fewer):
 * ARGV = key, bytes, the chunk's time, the floor ('' = unchanged), and the stream's TTL in
 * seconds when the append refreshed it ('' = not this time: redis-log.ts does so once a minute).
 * The session's and the tenant's counts move together (not clamped: counts and trims may reach
 * Redis in either order, and the sums come out the same), the session enters the order with the
 * chunk's time if it is not in it, its expiry moves on with its stream's TTL. Replies the total.
 */
const ACCOUNT = lua(`${TENANT_LUA}
local key, delta = ARGV[1], tonumber(ARGV[2])
add(key, delta)
local total = add('total', delta)
if delta > 0 then redis.call('ZADD', KEYS[2], 'NX', ARGV[3], key) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'floor:' .. key, ARGV[4]) end
if ARGV[5] ~= '' then live(key, tonumber(ARGV[5])) end
return total
`);

/**
 * A trim of the session's stream removed ARGV[2] bytes; ARGV[3] is the time of its oldest entry
 * left, '' when none is left (whatever the session was still counted for goes: nothing holds it);
 * ARGV[2] = 'gone': the stream does not exist, the session leaves the count.
 */
const SETTLE = lua(`${TENANT_LUA}
local key = ARGV[1]
if ARGV[2] == 'gone' then forget(key) return 0 end
local removed = tonumber(ARGV[2])
if ARGV[3] == '' then removed = tonumber(redis.call('HGET', KEYS[1], key) or '0') end
add(key, -removed)
add('total', -removed)
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], key)
  redis.call('ZREM', KEYS[2], key)
else
  redis.call('ZADD', KEYS[2], 'XX', ARGV[3], key)
end
return 0
`);

/**
 * The tenant's count (sessions whose streams have expired leave it first), and when it is over
 * ARGV[1], its ARGV[2] oldest sessions with their oldest time and floor ('' = none).
 */
const PICK = lua(`${TENANT_LUA}
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowMs(), 'LIMIT', 0, 256)) do forget(key) end
local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
if total <= tonumber(ARGV[1]) then return {total} end
local reply = {total}
local oldest = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
for i = 1, #oldest, 2 do
  table.insert(reply, oldest[i])
  table.insert(reply, oldest[i + 1])
  table.insert(reply, redis.call('HGET', KEYS[1], 'floor:' .. oldest[i]) or '')
end
return reply
`);

/** The session ended: its stream expires in ARGV[2] seconds. Purged: ARGV[2] = 'purge', it leaves the count. */
const ENDED = lua(`${TENANT_LUA}
if ARGV[2] == 'purge' then forget(ARGV[1]) else live(ARGV[1], tonumber(ARGV[2])) end
return 0
`);

/** The session's floor: ARGV[2], or '' to drop it. Replies the tenant's total. */
const FLOOR = lua(`
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'floor:' .. ARGV[1])
else redis.call('HSET', KEYS[1], 'floor:' .. ARGV[1], ARGV[2]) end
return tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
`);

/**
 * One runner's side of the tenant bound in Redis: it counts what its appends and trims change,
 * and trims a tenant that is over the bound (TenantTrims: one loop per tenant in this runner).
 * Counting commands are not awaited by the append they belong to; `settled` waits for them.
 */
export class RedisTenantBound {
  readonly trims: TenantTrims;
  private readonly pending = new Set<Promise<unknown>>();
  /** Counts not sent yet, by session: the appends answered in one turn of the event loop go as one ACCOUNT. */
  private readonly unsent = new Map<string, { bytes: number; at: number; ttlSec: number | undefined }>();
  /** Floors of the sessions this runner hosts (OutputLog.hold), sent with each count too. */
  private readonly floors = new Map<string, number>();
  private flush: Promise<void> | undefined;

  constructor(
    private readonly run: RunScript,
    private readonly streamKey: (key: string) => string,
    private readonly bounds: TenantBounds,
  ) {
    this.trims = new TenantTrims(this.store(), bounds);
  }

  /**
   * The session's stream now holds `bytes` more (fewer, when negative) from a chunk read at `at`;
   * `ttlSec` when the append refreshed the stream's TTL.
   */
  added(key: string, bytes: number, at: number, ttlSec: number | undefined): void {
    const waiting = this.unsent.get(key);
    if (waiting) {
      // The oldest chunk's time stays: it is the session's place in the order.
      waiting.bytes += bytes;
      waiting.ttlSec ??= ttlSec;
      return;
    }
    this.unsent.set(key, { bytes, at, ttlSec });
    this.flush ??= new Promise((resolve) =>
      setImmediate(() => {
        this.flush = undefined;
        for (const session of [...this.unsent.keys()]) this.sendCount(session);
        resolve();
      }),
    );
  }

  /** Sends what the session's appends added and has not been sent yet, now. */
  private sendCount(key: string): void {
    const count = this.unsent.get(key);
    if (!count) return;
    this.unsent.delete(key);
    if (count.bytes === 0 && count.ttlSec === undefined) return;
    const tenant = tenantOf(key);
    // The floor as it is now: a floor sent since the appends must not be undone.
    const args = [key, count.bytes, count.at, this.floors.get(key) ?? "", count.ttlSec ?? ""];
    this.track(this.tenantScript(ACCOUNT, tenant, args), this.overBound(tenant));
  }

  /** The retention trim removed `removed` bytes; the stream's oldest entry is now from `oldest` (-1: none is left). */
  retentionTrimmed(key: string, removed: number, oldest: number): void {
    // What was counted goes before what was removed, so that an emptied stream leaves nothing behind.
    this.sendCount(key);
    this.track(this.tenantScript(SETTLE, tenantOf(key), [key, removed, oldest < 0 ? "" : oldest]));
  }

  /**
   * The session's floor moved (or is gone): a tenant held over its bound by it (the edge had
   * not acknowledged its oldest output yet) is trimmed now, not at its next append.
   */
  hold(key: string, floor: number | null): void {
    if (floor === (this.floors.get(key) ?? null)) return;
    if (floor === null) this.floors.delete(key);
    else this.floors.set(key, floor);
    const tenant = tenantOf(key);
    this.track(this.run(FLOOR, [tenantKeys(tenant)[0]], [key, floor ?? ""]), this.overBound(tenant));
  }

  /** The session ended; its stream expires in `ttlSec`. */
  ended(key: string, ttlSec: number): Promise<unknown> {
    return this.tenantScript(ENDED, tenantOf(key), [key, ttlSec]);
  }

  /** The session's stream was deleted (purge): it leaves the count. */
  purged(key: string): Promise<unknown> {
    this.floors.delete(key);
    this.unsent.delete(key);
    return this.tenantScript(ENDED, tenantOf(key), [key, "purge"]);
  }

  async total(tenant: string): Promise<number> {
    const [total] = (await this.tenantScript(PICK, tenant, [Number.MAX_SAFE_INTEGER, 0])) as number[];
    return total;
  }

  async settled(): Promise<void> {
    await this.flush;
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    await this.trims.idle();
    if (this.pending.size > 0 || this.flush) return this.settled();
  }

  /** What to do with a script's reply of the tenant's total: trim the tenant if it is over the bound. */
  private overBound(tenant: string): (total: unknown) => void {
    return (total) => {
      if (Number(total) > this.bounds.of(tenant)) this.trims.request(tenant);
    };
  }

  private tenantScript(script: LuaScript, tenant: string, args: (string | number)[]): Promise<unknown> {
    return this.run(script, tenantKeys(tenant), args);
  }

  /** Keeps the command until it answers; a failure is dropped (what it would have counted stays off). */
  private track(command: Promise<unknown>, then?: (reply: unknown) => void): void {
    const tracked = command.then(then, () => {});
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }

  private store(): TenantStore {
    return {
      pick: async (tenant, bound, count): Promise<TenantPick> => {
        const reply = (await this.tenantScript(PICK, tenant, [bound, count])) as (number | string)[];
        const oldest: TenantCandidate[] = [];
        for (let i = 1; i + 2 < reply.length; i += 3) {
          const floor = String(reply[i + 2]);
          oldest.push({ key: String(reply[i]), oldest: Number(reply[i + 1]), floor: floor === "" ? null : Number(floor) });
        }
        return { total: Number(reply[0]), oldest };
      },
      trimFront: async ({ key, floor }, excess, notAfter): Promise<FrontTrim> => {
        const args = [excess, floor ?? "", Number.isFinite(notAfter) ? notAfter : "+inf"];
        const [removed, oldest, start] = (await this.run(FRONT_TRIM, [this.streamKey(key)], args)) as number[];
        if (removed < 0) return { gone: true };
        return { gone: false, removed, oldest: oldest < 0 ? null : oldest, retainedFrom: start };
      },
      settle: async (tenant, key, trim) => {
        this.sendCount(key);
        const args = trim.gone ? [key, "gone", ""] : [key, trim.removed, trim.oldest ?? ""];
        await this.tenantScript(SETTLE, tenant, args);
      },
    };
  }
}
