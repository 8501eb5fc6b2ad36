// One contract suite for both output logs: MemoryLog in-process, RedisLog against a real
// redis-server started for this file, and RedisLog against a real 3-master Redis Cluster (named
// by its node list, and by one node). Byte-for-byte checks on random binary data, plus
// Redis-only tests for pipelining and for a Redis that restarts and loses its data, and
// cluster-only tests for sessions spread over the masters and a master that restarts. The tenant
// bound has its suite of its own (tenant-log.test.ts) on the same kit (output-log.test-kit.ts).
import { describe, expect, it, vi } from "vitest";
import { command } from "../../test/redis-server.js";
import { loadConfig } from "../config.js";
import { BIG, appendAll, defaults, flatten, prng, randomChunks, readOn, useLogServers, waitFor } from "./output-log.test-kit.js";
import { MemoryLog } from "./memory-log.js";
import type { OutputLog, OutputLogOptions } from "./output-log.js";
import { RedisLog, streamKey } from "./redis-log.js";

const servers = useLogServers();
const { implementations, opened } = servers;
const newKey = () => servers.newKey();

/**
 * Appends "back" (4 bytes) at `offset`, then at each next 4 bytes, until one lands; resolves with
 * where it landed (the end of what the outage lost).
 */
async function appendUntilItLands(log: OutputLog, key: string, offset: number, what: string, deadlineMs?: number) {
  let at = offset;
  let landed = -1;
  await waitFor(
    async () => {
      try {
        await log.append(key, at, Buffer.from("back"));
        landed = at;
        return true;
      } catch {
        at += 4;
        return false;
      }
    },
    what,
    deadlineMs,
  );
  return landed;
}

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

  it("trims to at least retainBytes, leaving a leading gap", async () => {
    const retainBytes = 16 * 1024;
    const maxChunk = 600;
    const log = await open({ retainBytes });
    const key = newKey();
    const chunks = randomChunks(prng(2), 400, maxChunk);
    const all = Buffer.concat(chunks);
    // At most the newest retainBytes, the chunk straddling their start, and what has come
    // since the last trim.
    const limit = retainBytes + maxChunk + impl.slack(retainBytes);
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
      expect(end - from).toBeGreaterThanOrEqual(Math.min(end, retainBytes));
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

  // docs/protocol.md §5 ("Offsets, replay and the switch to live"): after trimming, the newest
  // retainBytes bytes are still replayable; a chunk goes only when every byte of it is older than
  // end - retainBytes.
  it.each([
    { what: "chunks of retainBytes", sizes: Array<number>(6).fill(256 * 1024) },
    // As the coalescer makes them at COALESCE_BYTES = retainBytes: full chunks, a small one at
    // its leading edge or after a quiet moment, one cut a few bytes short at a UTF-8 boundary.
    {
      what: "chunks of retainBytes and shorter ones",
      sizes: [1000, 262_144, 262_144, 80_000, 262_144, 262_144, 3000, 262_144, 262_141, 262_144, 80_000],
    },
    { what: "chunks that do not divide retainBytes", sizes: Array<number>(23).fill(100_000) },
    { what: "odd chunk sizes", sizes: Array.from({ length: 31 }, (_, i) => 50_000 + ((i * 7919) % 40_000)) },
  ])("keeps at least retainBytes with $what", async ({ sizes }) => {
    const retainBytes = 256 * 1024;
    const log = await open({ retainBytes });
    const key = newKey();
    const rand = prng(sizes.length);
    const chunks = sizes.map((size) => {
      const bytes = Buffer.alloc(size);
      for (let i = 0; i < bytes.length; i++) bytes[i] = rand(256);
      return bytes;
    });
    const all = Buffer.concat(chunks);
    const starts: number[] = [];
    let end = 0;
    for (const bytes of chunks) {
      // One at a time, checked after each: the newest retainBytes are always there.
      await log.append(key, end, bytes);
      starts.push(end);
      end += bytes.length;
      const wanted = Math.max(0, end - retainBytes);
      const from = await log.retainedFrom(key);
      expect(from).not.toBeNull();
      expect(from).toBeLessThanOrEqual(wanted);
      const got = flatten(await log.read(key, wanted, end, BIG), wanted);
      expect(got.gaps).toEqual([]);
      expect(got.end).toBe(end);
      expect(got.bytes.equals(all.subarray(wanted, end))).toBe(true);
    }
    // Whatever is held from retainedFrom on reads back exactly; nothing before it does.
    const from = (await log.retainedFrom(key)) as number;
    expect(from).toBeGreaterThan(0);
    const items = await log.read(key, 0, end, BIG);
    expect(items[0]).toEqual({ type: "gap", from: 0, to: from });
    const rest = flatten(items.slice(1), from);
    expect(rest.gaps).toEqual([]);
    expect(rest.bytes.equals(all.subarray(from))).toBe(true);
    // The chunk that straddles end - retainBytes is kept whole, and every chunk wholly older is
    // gone (each append here grows the log past RedisLog's trimSlack, so each one trims).
    const straddler = starts.filter((start) => start <= end - retainBytes).pop();
    expect(from).toBe(straddler);
  });

  it("drops a chunk once every byte of it is older than end - retainBytes, and only then", async () => {
    const retainBytes = 64 * 1024;
    const log = await open({ retainBytes });
    const key = newKey();
    const size = 40_000;
    const bytes = (i: number) => Buffer.alloc(size, i + 1);
    // Chunks at 0, 40000, 80000, …; retainBytes = 65536.
    let end = 0;
    for (let i = 0; i < 3; i++) {
      await log.append(key, end, bytes(i));
      end += size;
    }
    // end = 120000, boundary 54464: chunk 0 [0, 40000) is wholly older, chunk 1 straddles.
    // A trim runs here for both logs (RedisLog: the log grew by more than trimSlack).
    await log.append(key, end, bytes(3).subarray(0, 10_000));
    end += 10_000;
    // end = 130000, boundary 64464: chunk 1 [40000, 80000) still holds newer bytes.
    expect(await log.retainedFrom(key)).toBe(size);
    expect(await log.read(key, 0, size, BIG)).toEqual([{ type: "gap", from: 0, to: size }]);
    const held = flatten(await log.read(key, size, end, BIG), size);
    expect(held.gaps).toEqual([]);
    expect(held.bytes.equals(Buffer.concat([bytes(1), bytes(2), bytes(3).subarray(0, 10_000)]))).toBe(true);
    // Past 80000 + 65536 = 145536, chunk 1 is wholly older: the trim after that drops it.
    await log.append(key, end, bytes(4).subarray(0, 20_000));
    end += 20_000;
    expect(await log.retainedFrom(key)).toBe(2 * size);
    const rest = flatten(await log.read(key, 0, end, BIG), 0);
    expect(rest.gaps).toEqual([[0, 2 * size]]);
    expect(rest.bytes.equals(Buffer.concat([bytes(2), bytes(3).subarray(0, 10_000), bytes(4).subarray(0, 20_000)]))).toBe(true);
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

describe("MemoryLog only", () => {
  const open = (options: Partial<OutputLogOptions> = {}) => {
    const log = new MemoryLog({ ...defaults, ...options });
    opened.push(log);
    return log;
  };

  it("holds nothing for a removed key, at once", async () => {
    const log = open();
    const [gone, kept] = [newKey(), newKey()];
    const goneEnd = await appendAll(log, gone, randomChunks(prng(20), 200, 4000));
    const keptChunks = randomChunks(prng(21), 50, 4000);
    const keptEnd = await appendAll(log, kept, keptChunks);
    expect(log.held()).toEqual({ sessions: 2, chunks: 250, bytes: goneEnd + keptEnd });

    // The edge's purge (SESSION_RETAIN_SEC after the end) reaches the runner as remove.
    await log.expire(gone, 86_400);
    await log.remove(gone);
    expect(log.held()).toEqual({ sessions: 1, chunks: 50, bytes: keptEnd });
    expect(await log.read(gone, 0, goneEnd)).toEqual([{ type: "gap", from: 0, to: goneEnd }]);
    const still = flatten(await log.read(kept, 0, keptEnd, BIG), 0);
    expect(still.bytes.equals(Buffer.concat(keptChunks))).toBe(true);

    await log.remove(kept);
    expect(log.held()).toEqual({ sessions: 0, chunks: 0, bytes: 0 });
  });

  it("lets trimmed chunks go at once", async () => {
    const retainBytes = 1 << 20;
    const chunk = 256 * 1024;
    const log = open({ retainBytes });
    const key = newKey();
    const chunks = Array.from({ length: 200 }, (_, i) => Buffer.alloc(chunk, i));
    const end = await appendAll(log, key, chunks);
    // The newest 1 MiB is exactly four chunks: nothing else is held, trimmed chunks included.
    expect(log.held()).toEqual({ sessions: 1, chunks: 4, bytes: retainBytes });
    expect(await log.retainedFrom(key)).toBe(end - retainBytes);
  });

  it("an expired log holds nothing once its TTL is up", async () => {
    const log = open();
    const key = newKey();
    await log.append(key, 0, Buffer.from("bye"));
    await log.expire(key, 1);
    await waitFor(async () => log.held().sessions === 0, "the log to expire");
    expect(log.held()).toEqual({ sessions: 0, chunks: 0, bytes: 0 });
  });
});

describe("RedisLog only", () => {
  const open = async (options: Partial<OutputLogOptions> = {}) => {
    const server = servers.theServer();
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

  it("survives a Redis restart: fails fast while down, recovers, reports the loss as gaps", { timeout: 30_000 }, async () => {
    const server = servers.theServer();
    const log = await open();
    const key = newKey();
    const chunks = randomChunks(prng(7), 20, 300);
    const before = await appendAll(log, key, chunks);
    const warnings = () => vi.mocked(console.warn).mock.calls.filter(([line]) => String(line).includes("redis.error"));
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
    // One line for the outage, not one per attempt. The client logs it from its own error event,
    // which may come after the appends failed when the machine is busy: waited for, then exact.
    await vi.waitFor(() => expect(warnings()).toHaveLength(1), { timeout: 10_000 });

    await server.restart();
    // Appends fail until the client has reconnected; the first one that lands marks the gap's end.
    const restartedAt = await appendUntilItLands(log, key, offset, "appends to succeed again");
    offset = restartedAt + 4;
    expect(readies()).toHaveLength(readyLines + 1);

    const after = randomChunks(prng(8), 20, 300);
    const end = await appendAll(log, key, after, offset);
    const got = flatten(await log.read(key, 0, end), 0);
    expect(got.gaps).toEqual([[0, restartedAt]]);
    expect(got.bytes.equals(Buffer.concat([Buffer.from("back"), ...after]))).toBe(true);
    expect(await log.retainedFrom(key)).toBe(restartedAt);
  });
});

describe("RedisLog on a Redis Cluster", () => {
  const open = async (url: string, options: Partial<OutputLogOptions> = {}) => {
    const log = new RedisLog(url, { ...defaults, ...options });
    opened.push(log);
    await log.ready();
    return log;
  };
  const theCluster = () => servers.theCluster();

  /**
   * The port of the master that holds `key`'s stream, as the nodes say: EXISTS answers 1 there,
   * and every other master answers MOVED to it with the key's slot (CLUSTER KEYSLOT).
   */
  async function holder(key: string): Promise<number> {
    const { nodes } = theCluster();
    const stream = streamKey(key);
    const slot = await command(nodes[0].port, `CLUSTER KEYSLOT ${stream}`);
    const replies = await Promise.all(nodes.map((node) => command(node.port, `EXISTS ${stream}`)));
    const owners = nodes.filter((_, i) => replies[i] === ":1");
    expect(owners).toHaveLength(1);
    const owner = owners[0].port;
    for (const [i, node] of nodes.entries()) {
      if (node.port !== owner) expect(replies[i]).toBe(`-MOVED ${slot?.slice(1)} 127.0.0.1:${owner}`);
    }
    return owner;
  }

  // Eight clients discover the cluster at once: on a busy machine (the suites start their stacks
  // beside this one) that took more than the default 5 s.
  it("connects with the Cluster client from a node list or any one node, and with the plain client to a plain Redis", { timeout: 30_000 }, async () => {
    const { nodes } = theCluster();
    const server = servers.theServer();
    const urls = [
      nodes.map((node) => node.url).join(","),
      `${nodes[0].url},${nodes.slice(1).map((node) => `127.0.0.1:${node.port}`).join(",")}`,
      `${nodes[2].url}, ${nodes[1].url}`, // a part of the cluster is enough
      ...nodes.map((node) => node.url),
    ];
    const logs = await Promise.all(urls.map((url) => open(url)));
    for (const log of logs) expect(log.mode).toBe("cluster");
    const detected = vi.mocked(console.log).mock.calls.filter(([line]) => /"redis\.cluster".*"detected"/.test(String(line)));
    expect(detected).toHaveLength(nodes.length); // one per single-node URL
    expect((await open(server.url)).mode).toBe("single");

    // All of them are one log: what one appends, every other reads.
    const key = newKey();
    const chunks = randomChunks(prng(11), 40, 2000);
    const end = await appendAll(logs[0], key, chunks);
    for (const log of logs) {
      const got = flatten(await log.read(key, 0, end, BIG), 0);
      expect(got.gaps).toEqual([]);
      expect(got.bytes.equals(Buffer.concat(chunks))).toBe(true);
    }
  });

  it("keeps each session on its hash tag's shard, with sessions on every master", async () => {
    const { nodes } = theCluster();
    const writer = await open(theCluster().url);
    const reader = await open(nodes[1].url);
    const rand = prng(12);
    const sessions = Array.from({ length: 12 }, (_, i) => ({
      key: `tenant${i}/session${i}/${i}`,
      chunks: randomChunks(rand, 150, 3000),
      resolved: [] as number[],
    }));
    // Appends for every session interleaved, all pipelined at once: they go to three masters.
    const offsets = sessions.map(() => 0);
    const pending: Promise<void>[] = [];
    for (let i = 0; i < 150; i++) {
      for (const [s, session] of sessions.entries()) {
        const chunk = session.chunks[i];
        pending.push(writer.append(session.key, offsets[s], chunk).then(() => void session.resolved.push(i)));
        offsets[s] += chunk.length;
      }
    }
    await Promise.all(pending);

    const holders = new Set<number>();
    for (const [s, session] of sessions.entries()) {
      expect(session.resolved).toEqual(session.chunks.map((_, i) => i)); // in order, per session
      const got = await readOn(reader, session.key, 0, offsets[s], 64 * 1024);
      expect(got.gaps).toEqual([]);
      expect(got.bytes.equals(Buffer.concat(session.chunks))).toBe(true);
      // The whole stream on one master: every entry is there.
      const port = await holder(session.key);
      expect(await command(port, `XLEN ${streamKey(session.key)}`)).toBe(`:${session.chunks.length}`);
      holders.add(port);
    }
    expect([...holders].sort()).toEqual(nodes.map((node) => node.port).sort());
  });

  it("a master that restarts empty: its sessions fail fast and recover with the loss as a gap, the others go on", async () => {
    const { nodes } = theCluster();
    const log = await open(theCluster().url);
    let lost = 0;
    log.onMaybeLost(() => lost++);
    // One session on the master that will restart, one elsewhere.
    const victim = nodes[0];
    const candidates = Array.from({ length: 30 }, (_, i) => `restart${i}/s/${i}`);
    for (const key of candidates) await log.append(key, 0, Buffer.from("first"));
    const held = await Promise.all(candidates.map(holder));
    const onVictim = candidates[held.indexOf(victim.port)];
    const elsewhere = candidates[held.findIndex((port) => port !== victim.port)];
    if (!onVictim || !elsewhere) throw new Error("no session on each side");
    const lines = (event: string, spy: typeof console.log) =>
      vi.mocked(spy).mock.calls.filter(([line]) => String(line).includes(`"event":"${event}"`));
    const readyLines = lines("redis.ready", console.log).length;

    await victim.stop();
    let offset = 5;
    let other = 5;
    for (let i = 0; i < 10; i++) {
      const started = Date.now();
      await expect(log.append(onVictim, offset, Buffer.from("lost"))).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(2000);
      offset += 4;
      await log.append(elsewhere, other, Buffer.from("kept")); // the other masters go on
      other += 4;
    }
    // One line for the log's outage and one for the node, not one per attempt.
    expect(lines("redis.error", console.warn)).toHaveLength(1);
    const down = lines("redis.cluster", console.warn);
    expect(down).toHaveLength(1);
    expect(String(down[0][0])).toContain(`"node":"127.0.0.1:${victim.port}"`);

    await victim.restart();
    // Appends fail until the master has rejoined (CLUSTERDOWN meanwhile); the first that lands
    // marks the end of the gap.
    const restartedAt = await appendUntilItLands(log, onVictim, offset, "appends to the restarted master", 20_000);
    offset = restartedAt + 4;
    expect(lost).toBe(1);
    expect(lines("redis.ready", console.log)).toHaveLength(readyLines + 1);
    const after = randomChunks(prng(13), 20, 300);
    const end = await appendAll(log, onVictim, after, offset);
    const got = flatten(await log.read(onVictim, 0, end), 0);
    expect(got.gaps).toEqual([[0, restartedAt]]);
    expect(got.bytes.equals(Buffer.concat([Buffer.from("back"), ...after]))).toBe(true);
    // The restarted master lost the stream's TTL with its data; the appends set it again (through
    // the tenant's counting script, which appends do not wait for: settled() does).
    await log.settled();
    expect(Number((await command(victim.port, `TTL ${streamKey(onVictim)}`))?.slice(1))).toBeGreaterThan(0);
    const kept = flatten(await log.read(elsewhere, 0, other), 0);
    expect(kept.gaps).toEqual([]);
    expect(kept.bytes.toString()).toBe(`first${"kept".repeat(10)}`);
  }, 30_000);

  it("REDIS_URL takes one URL or a node list, and says what is wrong", () => {
    const redisUrl = (value: string) => loadConfig({ RUNNER_TOKEN: "t", REDIS_URL: value }).redisUrl;
    expect(redisUrl("redis://127.0.0.1:7001")).toBe("redis://127.0.0.1:7001");
    expect(redisUrl("redis://127.0.0.1:7001,redis://127.0.0.1:7002")).toBe("redis://127.0.0.1:7001,redis://127.0.0.1:7002");
    expect(redisUrl("rediss://:pw@10.0.0.1:7001, 10.0.0.2:7002")).toBe("rediss://:pw@10.0.0.1:7001, 10.0.0.2:7002");
    expect(redisUrl("")).toBeUndefined();
    const rejects = (value: string, message: RegExp) => expect(() => redisUrl(value)).toThrow(message);
    rejects("http://127.0.0.1:6379", /REDIS_URL: use redis:\/\/ or rediss:\/\//);
    rejects("127.0.0.1:7001,127.0.0.1:7002", /use redis:\/\/ or rediss:\/\//);
    rejects("redis://127.0.0.1:7001,", /empty entry/);
    rejects("redis://127.0.0.1:7001,rediss://127.0.0.1:7002", /node 2 uses rediss:\/\//);
    rejects("redis://127.0.0.1:7001,127.0.0.1:notaport", /node 2 is not host:port/);
    rejects("redis://127.0.0.1:7001/2,127.0.0.1:7002", /only database 0/);
    rejects("redis://a:secret@h:1,b:other@h:2", /other credentials/);
    expect(() => redisUrl("redis://a:secret@h:1,b:other@h:2")).not.toThrow(/secret|other@/);
  });
});
