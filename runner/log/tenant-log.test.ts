// The tenant bound (TENANT_LOG_BYTES, runner/log/tenant-bound.ts) on both output logs: MemoryLog
// in process and RedisLog on a real redis-server and a real Redis Cluster (the tenant's counting
// keys and the sessions' streams sit on different shards there). A tenant's retained output stays
// within one chunk under its bound, its oldest output goes first across its sessions, in whole
// chunks, never at or above a session's floor, never another tenant's; the count is exact through
// per-session retention, purges and streams deleted behind the log's back; two runners on one
// Redis share one bound. What the log holds is read back through the log, byte for byte.
import { describe, expect, it } from "vitest";
import { command } from "../../test/redis-server.js";
import type { ChunkMeta } from "../../shared/protocol.js";
import { BIG, defaults, flatten, prng, randomChunks, useLogServers } from "./output-log.test-kit.js";
import type { OutputLog, OutputLogOptions } from "./output-log.js";
import { RedisLog, streamKey } from "./redis-log.js";
import { TenantBounds } from "./tenant-bound.js";

const servers = useLogServers();
const CHUNK = 16 * 1024;
const BOUND = 256 * 1024;

/** One chunk as written: which session, where, what. */
interface Written {
  key: string;
  offset: number;
  data: Buffer;
}

/** Chunk metadata whose read time is `at`: the Redis log orders a tenant's chunks by it. */
const readAt = (at: number): ChunkMeta => ({ stream: "stdout", at, cols: 0, rows: 0 });

let clock = 1_700_000_000_000;

/**
 * Writes `count` chunks of exactly CHUNK random bytes to each key, one key after another per
 * round (so the sessions' output interleaves in time), each with a later read time than the one
 * before; resolves with them in the order written.
 */
async function interleave(log: OutputLog, keys: string[], count: number, seed: number, ends = new Map<string, number>()): Promise<Written[]> {
  const rand = prng(seed);
  const written: Written[] = [];
  const pending: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    for (const key of keys) {
      const chunk = Buffer.alloc(CHUNK);
      for (let j = 0; j < chunk.length; j++) chunk[j] = rand(256);
      const offset = ends.get(key) ?? 0;
      ends.set(key, offset + CHUNK);
      written.push({ key, offset, data: chunk });
      pending.push(log.append(key, offset, chunk, readAt(++clock)));
    }
  }
  await Promise.all(pending);
  return written;
}

/** What the log holds of `key` from its start on, read back through the log; checked against what was written. */
async function held(log: OutputLog, key: string, written: Written[]): Promise<{ from: number | null; bytes: number }> {
  const mine = written.filter((chunk) => chunk.key === key);
  const end = mine.reduce((sum, chunk) => sum + chunk.data.byteLength, 0);
  const from = await log.retainedFrom(key);
  if (from === null) return { from, bytes: 0 };
  const got = flatten(await log.read(key, 0, end, BIG), 0);
  expect(got.gaps).toEqual(from > 0 ? [[0, from]] : []);
  expect(got.bytes.equals(Buffer.concat(mine.map((chunk) => chunk.data)).subarray(from))).toBe(true);
  return { from, bytes: end - from };
}

/**
 * The tenant's chunks the log holds are exactly the newest ones it was given, in the order
 * written: every chunk from some index on, none before it (whole chunks, oldest first).
 */
async function expectNewestKept(log: OutputLog, written: Written[]): Promise<number> {
  const starts = new Map<string, number>();
  for (const key of new Set(written.map((chunk) => chunk.key))) {
    const { from } = await held(log, key, written);
    starts.set(key, from ?? Number.POSITIVE_INFINITY);
  }
  const kept = written.map((chunk) => chunk.offset >= (starts.get(chunk.key) ?? 0));
  const first = kept.indexOf(true);
  expect(kept.slice(first).every(Boolean)).toBe(true);
  return written.slice(first).reduce((sum, chunk) => sum + chunk.data.byteLength, 0);
}

describe.each(servers.implementations.slice(0, 3))("$name", (impl) => {
  const open = async (options: Partial<OutputLogOptions> = {}) => {
    const log = await impl.create({ ...defaults, tenantBytes: BOUND, ...options });
    servers.opened.push(log);
    return log;
  };

  it("trims the tenant's oldest output first across its sessions, whole chunks, within one chunk of the bound, never another tenant's", async () => {
    const log = await open();
    const trimmed: [string, number][] = [];
    log.onTrimmed((key, from) => trimmed.push([key, from]));
    const a = [servers.newKey("tenantA"), servers.newKey("tenantA"), servers.newKey("tenantA")];
    const b = servers.newKey("tenantB");
    // B holds 12 chunks first (the oldest output in the log, but not tenant A's), then A 3 × 20.
    const written = { a: [] as Written[], b: await interleave(log, [b], 12, 1) };
    written.a = await interleave(log, a, 20, 2);
    await log.settled();

    const keptA = await expectNewestKept(log, written.a);
    expect(keptA).toBeLessThanOrEqual(BOUND);
    expect(keptA).toBeGreaterThan(BOUND - CHUNK);
    expect(await log.tenantBytes("tenantA")).toBe(keptA);
    // Each of A's sessions was trimmed from its front, and the log said where it starts now.
    for (const key of a) {
      const from = await log.retainedFrom(key);
      expect(from).toBeGreaterThan(0);
      expect(trimmed.filter(([k]) => k === key).at(-1)).toEqual([key, from]);
    }
    // B, the oldest output of all, is whole.
    expect(await held(log, b, written.b)).toEqual({ from: 0, bytes: 12 * CHUNK });
    expect(await log.tenantBytes("tenantB")).toBe(12 * CHUNK);
    expect(trimmed.some(([key]) => key === b)).toBe(false);
  });

  it("bounds a tenant by its own bound where it has one, the runner's otherwise; a changed bound holds from the next append", async () => {
    const log = await open();
    const [p, q, r] = [servers.newKey("ownP"), servers.newKey("ownQ"), servers.newKey("ownR")];
    log.boundTenant("ownP", BOUND / 2);
    log.boundTenant("ownR", 2 * BOUND);
    const ends = new Map<string, number>();
    await interleave(log, [p, q, r], 40, 7, ends);
    await log.settled();
    const within = async (tenant: string, bound: number) => {
      const bytes = await log.tenantBytes(tenant);
      expect(bytes, tenant).toBeLessThanOrEqual(bound);
      expect(bytes, tenant).toBeGreaterThan(bound - CHUNK);
    };
    await within("ownP", BOUND / 2);
    await within("ownQ", BOUND);
    await within("ownR", 2 * BOUND);
    // Lowered: the next append trims to it. Given back to the runner's: the runner's bound again.
    log.boundTenant("ownR", BOUND / 2);
    log.boundTenant("ownP", undefined);
    await interleave(log, [r], 1, 8, ends);
    await interleave(log, [p], 20, 9, ends);
    await log.settled();
    await within("ownR", BOUND / 2);
    await within("ownP", BOUND);
    await within("ownQ", BOUND);
  });

  it("never trims at or above a session's floor, and trims there once it is released", async () => {
    const log = await open();
    const [f, g] = [servers.newKey("tenantF"), servers.newKey("tenantF")];
    const ends = new Map<string, number>();
    // The floor comes before the first append, as a hosted session's resume does.
    log.hold(f, 0);
    const written = await interleave(log, [f], 10, 3, ends);
    log.hold(f, 3 * CHUNK);
    written.push(...(await interleave(log, [g], 20, 4, ends)));
    await log.settled();
    // 30 chunks over a bound of 16: f, the oldest, gives up the 3 below its floor, g the other 11.
    expect(await held(log, f, written)).toEqual({ from: 3 * CHUNK, bytes: 7 * CHUNK });
    expect(await held(log, g, written)).toEqual({ from: 11 * CHUNK, bytes: 9 * CHUNK });
    expect(await log.tenantBytes("tenantF")).toBe(BOUND);

    // Released (the session is over here): f's oldest chunk is the tenant's oldest again.
    log.hold(f, null);
    written.push(...(await interleave(log, [g], 1, 5, ends)));
    await log.settled();
    expect(await held(log, f, written)).toEqual({ from: 4 * CHUNK, bytes: 6 * CHUNK });
    expect(await held(log, g, written)).toEqual({ from: 11 * CHUNK, bytes: 10 * CHUNK });
  });

  it("trims a tenant its floors held over the bound as soon as a floor moves", async () => {
    const log = await open();
    const key = servers.newKey("tenantH");
    const ends = new Map<string, number>();
    log.hold(key, 0);
    const written = await interleave(log, [key], 20, 12, ends);
    await log.settled();
    // Nothing acknowledged: all 20 chunks stay, over the bound of 16.
    expect(await held(log, key, written)).toEqual({ from: 0, bytes: 20 * CHUNK });
    // The edge acknowledges 10 chunks: 4 go at once, no append needed.
    log.hold(key, 10 * CHUNK);
    await log.settled();
    expect(await held(log, key, written)).toEqual({ from: 4 * CHUNK, bytes: 16 * CHUNK });
    expect(await log.tenantBytes("tenantH")).toBe(BOUND);
  });

  it("keeps the count exact through per-session retention and purges", async () => {
    const log = await open({ retainBytes: 64 * 1024, tenantBytes: BIG });
    const keys = [servers.newKey("tenantR"), servers.newKey("tenantR")];
    const rand = prng(6);
    const written: Written[] = [];
    for (const key of keys) {
      let offset = 0;
      for (const data of randomChunks(rand, 120, 3000)) {
        written.push({ key, offset, data });
        await log.append(key, offset, data, readAt(++clock));
        offset += data.byteLength;
      }
    }
    await log.settled();
    const [first, second] = await Promise.all(keys.map((key) => held(log, key, written)));
    expect(first.from).toBeGreaterThan(0);
    expect(await log.tenantBytes("tenantR")).toBe(first.bytes + second.bytes);
    await log.remove(keys[0]);
    expect(await log.tenantBytes("tenantR")).toBe(second.bytes);
    await log.remove(keys[1]);
    expect(await log.tenantBytes("tenantR")).toBe(0);
  });
});

describe("TenantBounds", () => {
  it("gives each tenant its own bound, the newest given, or the runner's", () => {
    const bounds = new TenantBounds(BOUND);
    bounds.set("a", 1 << 20);
    bounds.set("a", 2 << 20);
    expect(bounds.of("a")).toBe(2 << 20);
    expect(bounds.of("b")).toBe(BOUND);
    bounds.set("a", undefined);
    expect(bounds.of("a")).toBe(BOUND);
    expect(new TenantBounds().of("a")).toBe(Number.POSITIVE_INFINITY);
  });
});

describe("RedisLog only", () => {
  const open = async (options: Partial<OutputLogOptions> = {}) => {
    const log = new RedisLog(servers.theServer().url, { ...defaults, tenantBytes: BOUND, ...options });
    servers.opened.push(log);
    await log.ready();
    return log;
  };

  it("subtracts a stream deleted behind the log's back, whole, instead of trimming others for it", async () => {
    const log = await open();
    const [x, y] = [servers.newKey("tenantX"), servers.newKey("tenantX")];
    const ends = new Map<string, number>();
    const written = await interleave(log, [x], 8, 7, ends);
    expect(await command(servers.theServer().port, `DEL ${streamKey(x)}`)).toBe(":1");
    written.push(...(await interleave(log, [y], 12, 8, ends)));
    await log.settled();
    // Counted 20 chunks, over the bound of 16: the trim finds x gone and subtracts its 8.
    expect(await log.tenantBytes("tenantX")).toBe(12 * CHUNK);
    expect(await held(log, y, written)).toEqual({ from: 0, bytes: 12 * CHUNK });
  });

  it("two runners on one Redis share one bound, and one respects the floor the other holds", async () => {
    const [one, two] = [await open(), await open()];
    const trimmedBy = { one: [] as string[], two: [] as string[] };
    one.onTrimmed((key) => trimmedBy.one.push(key));
    two.onTrimmed((key) => trimmedBy.two.push(key));
    const [p, q] = [servers.newKey("tenantS"), servers.newKey("tenantS")];
    const ends = new Map<string, number>();
    // p is hosted by the first runner, which holds its floor; q by the second.
    one.hold(p, 0);
    const written = await interleave(one, [p], 12, 9, ends);
    one.hold(p, 5 * CHUNK);
    await one.settled();
    written.push(...(await interleave(two, [q], 12, 10, ends)));
    await two.settled();
    // 24 chunks over 16: the second runner trims p, the oldest, up to its floor, then q.
    expect(await held(two, p, written)).toEqual({ from: 5 * CHUNK, bytes: 7 * CHUNK });
    expect(await held(one, q, written)).toEqual({ from: 3 * CHUNK, bytes: 9 * CHUNK });
    expect(await one.tenantBytes("tenantS")).toBe(BOUND);
    expect(await two.tenantBytes("tenantS")).toBe(BOUND);
    expect({ one: [...new Set(trimmedBy.one)], two: [...new Set(trimmedBy.two)] }).toEqual({ one: [], two: [p, q] });
  });

  it("keeps the tenant's counting keys no longer than its streams", async () => {
    const log = await open({ idleTtlSec: 30 });
    const key = servers.newKey("tenantT");
    await interleave(log, [key], 2, 11);
    await log.settled();
    const { port } = servers.theServer();
    for (const name of ["sizes", "oldest", "expiry"]) {
      const ttl = Number((await command(port, `TTL ptyb:{tenant:tenantT}:${name}`))?.slice(1));
      expect(ttl).toBeGreaterThan(30);
      expect(ttl).toBeLessThanOrEqual(90);
    }
  });
});
