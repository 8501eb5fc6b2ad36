// One contract suite for both output logs: MemoryLog in-process, RedisLog against a real
// redis-server started for this file. Byte-for-byte checks on random binary data, plus
// Redis-only tests for pipelining and for a Redis that restarts and loses its data.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { startRedis, type RedisServer } from "../test/redis-server.js";
import { MemoryLog } from "./memory-log.js";
import type { LogItem, OutputLog, OutputLogOptions } from "./output-log.js";
import { RedisLog, streamKey, trimSlack } from "./redis-log.js";

const BIG = 1 << 30;
const defaults: OutputLogOptions = { retainBytes: 8 << 20, idleTtlSec: 600 };

/** A seeded PRNG (mulberry32), so failures reproduce. */
function prng(seed: number): (n: number) => number {
  return (n) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/** `count` chunks of 1..maxSize random bytes; some start with NUL, 0xff or broken UTF-8. */
function randomChunks(rand: (n: number) => number, count: number, maxSize: number): Buffer[] {
  const specials = [Buffer.from([0x00]), Buffer.from([0xff, 0xfe]), Buffer.from([0xc3]), Buffer.from([0x80, 0xbf])];
  return Array.from({ length: count }, () => {
    const chunk = Buffer.alloc(1 + rand(maxSize));
    for (let i = 0; i < chunk.length; i++) chunk[i] = rand(256);
    specials[rand(specials.length * 2)]?.copy(chunk);
    return chunk;
  });
}

/** Appends the chunks back to back from `start`, pipelined; resolves with the end offset. */
async function appendAll(log: OutputLog, key: string, chunks: Buffer[], start = 0): Promise<number> {
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
function flatten(items: LogItem[], from: number): { end: number; bytes: Buffer; gaps: [number, number][] } {
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
async function readOn(log: OutputLog, key: string, from: number, to: number, maxBytes: number) {
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

async function waitFor(condition: () => Promise<boolean>, what: string, deadlineMs = 5000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let server: RedisServer | undefined;
const opened: OutputLog[] = [];

interface Implementation {
  name: string;
  /** How far past retainBytes a log may grow between trims. */
  slack(retainBytes: number): number;
  create(options: OutputLogOptions): Promise<OutputLog>;
}

const implementations: Implementation[] = [
  { name: "MemoryLog", slack: () => 0, create: async (options) => new MemoryLog(options) },
  {
    name: "RedisLog",
    slack: trimSlack,
    async create(options) {
      if (!server) throw new Error("no redis-server");
      const log = new RedisLog(server.url, options);
      await log.ready();
      return log;
    },
  },
];

let keys = 0;
const newKey = () => `acme/s${++keys}`;

beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});
beforeEach(() => {
  // Silences the logs' event lines; tests that care look at the calls.
  vi.spyOn(console, "log").mockImplementation(() => {});
  vi.spyOn(console, "error").mockImplementation(() => {});
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((log) => log.close()));
  vi.restoreAllMocks();
});

describe.each(implementations)("$name", (impl) => {
  const open = async (options: Partial<OutputLogOptions> = {}) => {
    const log = await impl.create({ ...defaults, ...options });
    opened.push(log);
    return log;
  };

  it("stores binary chunks and reads any range byte for byte", async () => {
    const log = await open();
    const key = newKey();
    const rand = prng(1);
    const chunks = randomChunks(rand, 300, 3000);
    const all = Buffer.concat(chunks);
    const end = await appendAll(log, key, chunks);
    expect(end).toBe(all.length);
    expect(await log.retainedFrom(key)).toBe(0);

    const whole = flatten(await log.read(key, 0, end, BIG), 0);
    expect(whole.gaps).toEqual([]);
    expect(whole.bytes.equals(all)).toBe(true);

    for (let i = 0; i < 150; i++) {
      const a = rand(end);
      const b = a + 1 + rand(end - a);
      const got = flatten(await log.read(key, a, b, BIG), a);
      expect(got.end).toBe(b);
      expect(got.gaps).toEqual([]);
      expect(got.bytes.equals(all.subarray(a, b))).toBe(true);
    }
    for (let i = 0; i < 30; i++) {
      const a = rand(end);
      const b = a + 1 + rand(end - a);
      const got = await readOn(log, key, a, b, 1 + rand(8000));
      expect(got.gaps).toEqual([]);
      expect(got.bytes.equals(all.subarray(a, b))).toBe(true);
    }

    // Past the end: the stored tail, then a gap; an empty range yields nothing.
    const tail = flatten(await log.read(key, end - 5, end + 50), end - 5);
    expect(tail.bytes.equals(all.subarray(end - 5))).toBe(true);
    expect(tail.gaps).toEqual([[end, end + 50]]);
    expect(await log.read(key, 10, 10)).toEqual([]);
  });

  it("round-trips every byte value", async () => {
    const log = await open();
    const key = newKey();
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const broken = Buffer.from([0xed, 0xa0, 0x80, 0xf8, 0x88, 0x80, 0x80, 0x80, 0xc0, 0xaf, 0x00, 0x00]);
    await log.append(key, 0, bytes);
    await log.append(key, 256, broken);
    const items = await log.read(key, 0, 256 + broken.length);
    expect(items).toHaveLength(2);
    expect(flatten(items, 0).bytes.equals(Buffer.concat([bytes, broken]))).toBe(true);
  });

  it("keeps sessions apart", async () => {
    const log = await open();
    const [k1, k2] = [newKey(), newKey()];
    await Promise.all([log.append(k1, 0, Buffer.from("one")), log.append(k2, 0, Buffer.from("two"))]);
    expect(flatten(await log.read(k1, 0, 3), 0).bytes.toString()).toBe("one");
    expect(flatten(await log.read(k2, 0, 3), 0).bytes.toString()).toBe("two");
  });

  it("takes a retried append again: the same chunk changes nothing, a skipped one replaces what followed", async () => {
    const log = await open();
    const key = newKey();
    await log.append(key, 0, Buffer.from("aaa"));
    await log.append(key, 3, Buffer.from("bb"));
    // Its reply was lost: the same chunk again.
    await log.append(key, 3, Buffer.from("bb"));
    await log.append(key, 5, Buffer.from("c"));
    expect(flatten(await log.read(key, 0, 6), 0).bytes.toString()).toBe("aaabbc");
    // The chunk at 3 failed while the one after it landed ("BB" never stored, "C" stored at 5):
    // the retry of 3 drops 5 on, and the rest is appended again after it.
    await log.append(key, 3, Buffer.from("BBB"));
    expect(flatten(await log.read(key, 0, 6), 0)).toMatchObject({ gaps: [] });
    expect(flatten(await log.read(key, 0, 6), 0).bytes.toString()).toBe("aaaBBB");
    await log.append(key, 6, Buffer.from("d"));
    const all = flatten(await log.read(key, 0, 7), 0);
    expect(all.gaps).toEqual([]);
    expect(all.bytes.toString()).toBe("aaaBBBd");
  });

  it("trims to retainBytes, leaving a leading gap", async () => {
    const retainBytes = 16 * 1024;
    const maxChunk = 600;
    const log = await open({ retainBytes });
    const key = newKey();
    const chunks = randomChunks(prng(2), 400, maxChunk);
    const all = Buffer.concat(chunks);
    const limit = retainBytes + impl.slack(retainBytes);
    let end = 0;
    let previous = 0;
    for (const [i, chunk] of chunks.entries()) {
      await log.append(key, end, chunk);
      end += chunk.length;
      if (i % 10 !== 0) continue;
      const from = await log.retainedFrom(key);
      if (from === null) throw new Error("nothing retained");
      expect(from).toBeGreaterThanOrEqual(previous);
      expect(end - from).toBeLessThanOrEqual(limit);
      if (end > limit) expect(end - from).toBeGreaterThan(retainBytes - maxChunk);
      previous = from;
    }
    const from = await log.retainedFrom(key);
    if (from === null) throw new Error("nothing retained");
    expect(from).toBeGreaterThan(0);
    const items = await log.read(key, 0, end, BIG);
    expect(items[0]).toEqual({ type: "gap", from: 0, to: from });
    const rest = flatten(items.slice(1), from);
    expect(rest.gaps).toEqual([]);
    expect(rest.end).toBe(end);
    expect(rest.bytes.equals(all.subarray(from))).toBe(true);
  });

  it("reports holes in the log as gaps with exact bounds", async () => {
    const log = await open();
    const key = newKey();
    const head = randomChunks(prng(3), 10, 200);
    const headEnd = await appendAll(log, key, head);
    const later = randomChunks(prng(4), 5, 200);
    const laterStart = headEnd + 5000;
    const laterEnd = await appendAll(log, key, later, laterStart);
    const all = Buffer.concat(head);
    const laterBytes = Buffer.concat(later);

    const whole = flatten(await log.read(key, 0, laterEnd + 100), 0);
    expect(whole.gaps).toEqual([
      [headEnd, laterStart],
      [laterEnd, laterEnd + 100],
    ]);
    expect(whole.bytes.equals(Buffer.concat([all, laterBytes]))).toBe(true);

    const across = flatten(await log.read(key, headEnd - 3, laterStart + 3), headEnd - 3);
    expect(across.gaps).toEqual([[headEnd, laterStart]]);
    expect(across.bytes.equals(Buffer.concat([all.subarray(-3), laterBytes.subarray(0, 3)]))).toBe(true);

    expect(await log.read(key, headEnd + 10, headEnd + 20)).toEqual([
      { type: "gap", from: headEnd + 10, to: headEnd + 20 },
    ]);
  });

  it("remove drops the log", async () => {
    const log = await open();
    const key = newKey();
    const end = await appendAll(log, key, randomChunks(prng(5), 20, 100));
    await log.remove(key);
    expect(await log.read(key, 0, end)).toEqual([{ type: "gap", from: 0, to: end }]);
    expect(await log.retainedFrom(key)).toBeNull();
    await log.remove(key); // already gone: fine

    await log.append(key, end, Buffer.from("again"));
    expect(await log.retainedFrom(key)).toBe(end);
    expect(flatten(await log.read(key, end, end + 5), end).bytes.toString()).toBe("again");
  });

  it("expire drops the log after the TTL", async () => {
    const log = await open();
    const key = newKey();
    await log.append(key, 0, Buffer.from("bye"));
    await log.expire(key, 1);
    expect(await log.retainedFrom(key)).toBe(0);
    await waitFor(async () => (await log.retainedFrom(key)) === null, "the log to expire");
    expect(await log.read(key, 0, 3)).toEqual([{ type: "gap", from: 0, to: 3 }]);
  });

  it("drops a log with no appends for idleTtlSec", async () => {
    const log = await open({ idleTtlSec: 1 });
    const key = newKey();
    await log.append(key, 0, Buffer.from("idle"));
    await waitFor(async () => (await log.retainedFrom(key)) === null, "the idle log to go");
  });
});

describe("RedisLog only", () => {
  const open = async (options: Partial<OutputLogOptions> = {}) => {
    if (!server) throw new Error("no redis-server");
    const log = new RedisLog(server.url, { ...defaults, ...options });
    opened.push(log);
    await log.ready();
    return log;
  };

  it("names streams with the session key as hash tag", () => {
    expect(streamKey("acme/abc")).toBe("ptyb:{acme/abc}:out");
  });

  it("pipelines appends and resolves them in order", async () => {
    const log = await open();
    const key = newKey();
    const chunks = randomChunks(prng(6), 2000, 1000);
    const resolved: number[] = [];
    let offset = 0;
    const pending = chunks.map((chunk, i) => {
      const appended = log.append(key, offset, chunk).then(() => void resolved.push(i));
      offset += chunk.length;
      return appended;
    });
    await Promise.all(pending);
    expect(resolved).toEqual(chunks.map((_, i) => i));
    const got = await readOn(log, key, 0, offset, 256 * 1024);
    expect(got.gaps).toEqual([]);
    expect(got.bytes.equals(Buffer.concat(chunks))).toBe(true);
  });

  it("survives a Redis restart: fails fast while down, recovers, reports the loss as gaps", async () => {
    if (!server) throw new Error("no redis-server");
    const log = await open();
    const key = newKey();
    const chunks = randomChunks(prng(7), 20, 300);
    const before = await appendAll(log, key, chunks);
    const warnings = () => vi.mocked(console.error).mock.calls.filter(([line]) => String(line).includes("redis.error"));
    const readies = () => vi.mocked(console.log).mock.calls.filter(([line]) => String(line).includes("redis.ready"));
    const readyLines = readies().length;

    await server.stop();
    let offset = before;
    for (let i = 0; i < 10; i++) {
      const started = Date.now();
      await expect(log.append(key, offset, Buffer.from("lost"))).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(2000);
      offset += 4;
    }
    expect(warnings()).toHaveLength(1); // one line for the outage, not one per attempt

    await server.restart();
    // Appends fail until the client has reconnected; the first one that lands marks the gap's end.
    let restartedAt = -1;
    await waitFor(async () => {
      try {
        await log.append(key, offset, Buffer.from("back"));
        restartedAt = offset;
        return true;
      } catch {
        return false;
      } finally {
        offset += 4;
      }
    }, "appends to succeed again");
    expect(readies()).toHaveLength(readyLines + 1);

    const after = randomChunks(prng(8), 20, 300);
    const end = await appendAll(log, key, after, offset);
    const got = flatten(await log.read(key, 0, end), 0);
    expect(got.gaps).toEqual([[0, restartedAt]]);
    expect(got.bytes.equals(Buffer.concat([Buffer.from("back"), ...after]))).toBe(true);
    expect(await log.retainedFrom(key)).toBe(restartedAt);
  });
});
