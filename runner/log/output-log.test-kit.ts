// For the output log's suites (output-log.test.ts, tenant-log.test.ts; test code only, no source
// imports it): seeded random chunks, appends, reads checked for contiguity, deadline waits, and
// the logs under test with the real servers they run against: MemoryLog in process, RedisLog on
// a redis-server started for the file, and RedisLog on a real 3-master Redis Cluster (by its node
// list, and by one node).
import { afterAll, afterEach, beforeAll, beforeEach, expect, vi } from "vitest";
import { startRedis, startRedisCluster, type RedisCluster, type RedisServer } from "../../test/redis-server.js";
import { MemoryLog } from "./memory-log.js";
import type { LogItem, OutputLog, OutputLogOptions } from "./output-log.js";
import { RedisLog, trimSlack } from "./redis-log.js";

export const BIG = 1 << 30;
export const defaults: OutputLogOptions = { retainBytes: 8 << 20, idleTtlSec: 600 };

/** A seeded PRNG (mulberry32), so failures reproduce. */
export function prng(seed: number): (n: number) => number {
  return (n) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/** `count` chunks of 1..maxSize random bytes; some start with NUL, 0xff or broken UTF-8. */
export function randomChunks(rand: (n: number) => number, count: number, maxSize: number): Buffer[] {
  const specials = [Buffer.from([0x00]), Buffer.from([0xff, 0xfe]), Buffer.from([0xc3]), Buffer.from([0x80, 0xbf])];
  return Array.from({ length: count }, () => {
    const chunk = Buffer.alloc(1 + rand(maxSize));
    for (let i = 0; i < chunk.length; i++) chunk[i] = rand(256);
    specials[rand(specials.length * 2)]?.copy(chunk);
    return chunk;
  });
}

/** Appends the chunks back to back from `start`, pipelined; resolves with the end offset. */
export async function appendAll(log: OutputLog, key: string, chunks: Buffer[], start = 0): Promise<number> {
  let offset = start;
  const pending = chunks.map((chunk) => {
    const appended = log.append(key, offset, chunk);
    offset += chunk.length;
    return appended;
  });
  await Promise.all(pending);
  return offset;
}

/** Checks that items cover [from, …) contiguously; returns where they end and the gaps. */
export function flatten(items: LogItem[], from: number): { end: number; bytes: Buffer; gaps: [number, number][] } {
  let end = from;
  const parts: Buffer[] = [];
  const gaps: [number, number][] = [];
  for (const item of items) {
    if (item.type === "chunk") {
      expect(item.offset).toBe(end);
      expect(item.data.length).toBeGreaterThan(0);
      parts.push(item.data);
      end += item.data.length;
    } else {
      expect(item.from).toBe(end);
      expect(item.to).toBeGreaterThan(item.from);
      gaps.push([item.from, item.to]);
      end = item.to;
    }
  }
  return { end, bytes: Buffer.concat(parts), gaps };
}

/** Reads [from, to) in `maxBytes` pieces, reading on from where each read stopped. */
export async function readOn(log: OutputLog, key: string, from: number, to: number, maxBytes: number) {
  const items: LogItem[] = [];
  let pos = from;
  while (pos < to) {
    const piece = await log.read(key, pos, to, maxBytes);
    const { end } = flatten(piece, pos);
    const chunks = piece.filter((item) => item.type === "chunk");
    const bytes = chunks.reduce((sum, item) => sum + item.data.length, 0);
    if (chunks.length > 1) expect(bytes).toBeLessThanOrEqual(maxBytes);
    expect(end).toBeGreaterThan(pos);
    items.push(...piece);
    pos = end;
  }
  expect(pos).toBe(to);
  return flatten(items, from);
}

export async function waitFor(condition: () => Promise<boolean>, what: string, deadlineMs = 5000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface Implementation {
  name: string;
  /** How far past retainBytes a log may grow between trims. */
  slack(retainBytes: number): number;
  create(options: OutputLogOptions): Promise<OutputLog>;
}

/** The servers of a suite, its logs under test, and the logs it opened (closed after each test). */
export interface LogServers {
  readonly implementations: Implementation[];
  readonly opened: OutputLog[];
  theServer(): RedisServer;
  theCluster(): RedisCluster;
  /** A session key of `tenant` no other test of the file uses. */
  newKey(tenant?: string): string;
}

/**
 * Starts a redis-server and a Redis Cluster for the file (stopped after it), silences the logs'
 * event lines in each test (tests that care look at the calls) and closes the logs each test opened.
 */
export function useLogServers(): LogServers {
  let server: RedisServer | undefined;
  let cluster: RedisCluster | undefined;
  let keys = 0;
  const opened: OutputLog[] = [];
  const theServer = () => {
    if (!server) throw new Error("no redis-server");
    return server;
  };
  const theCluster = () => {
    if (!cluster) throw new Error("no redis cluster");
    return cluster;
  };
  const ready = async (log: RedisLog, mode: "single" | "cluster") => {
    await log.ready();
    expect(log.mode).toBe(mode);
    return log;
  };
  const implementations: Implementation[] = [
    { name: "MemoryLog", slack: () => 0, create: async (options) => new MemoryLog(options) },
    { name: "RedisLog", slack: trimSlack, create: (options) => ready(new RedisLog(theServer().url, options), "single") },
    {
      name: "RedisLog on a cluster, node list",
      slack: trimSlack,
      create: (options) => ready(new RedisLog(theCluster().url, options), "cluster"),
    },
    {
      name: "RedisLog on a cluster, one node",
      slack: trimSlack,
      create: (options) => {
        const { nodes } = theCluster();
        return ready(new RedisLog(nodes[keys % nodes.length].url, options), "cluster");
      },
    },
  ];

  beforeAll(async () => {
    const [plain, clustered] = await Promise.allSettled([startRedis(), startRedisCluster()]);
    server = plain.status === "fulfilled" ? plain.value : undefined;
    cluster = clustered.status === "fulfilled" ? clustered.value : undefined;
    for (const started of [plain, clustered]) if (started.status === "rejected") throw started.reason;
  }, 30_000);
  afterAll(async () => {
    await Promise.all([server?.stop(), cluster?.stop()]);
  });
  beforeEach(() => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    vi.spyOn(console, "error").mockImplementation(() => {});
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((log) => log.close()));
    vi.restoreAllMocks();
  });
  return { implementations, opened, theServer, theCluster, newKey: (tenant = "acme") => `${tenant}/s${++keys}` };
}
