// Issue 24, part 3: a tenant's retained output is bounded (TENANT_LOG_BYTES; docs/protocol.md
// §7a, "The tenant bound"). On a stack of its own whose runner bounds each tenant at 16 MiB
// (chunks of 64 KiB, OUTPUT_RETAIN_BYTES above what a session writes, so only the tenant bound
// trims): tenant `flood` writes 64 MiB over four sessions at once while tenant `quiet` has a
// 1 MiB session. Quiet's output stays whole; flood's oldest output goes first and is reported as a
// gap, with each session's `retainedFrom` saying where its log starts (a session that ended before
// the flood too, told by the runner's trim report, not by a read); the flood tenant's streams,
// summed entry by entry in Redis, hold within one chunk under 16 MiB; and a live client that falls
// behind, one that replays while the log is trimmed, and one that resumes after a cut are never
// handed a hole without a `gap`.
import { beforeAll, describe, expect, it } from "vitest";
import type { Session } from "../shared/session.js";
import { cli } from "./redis-server.js";
import { Api, SuiteCleanup, type SuiteStack, TermClient, fetchOutput, seqBytes, startSuiteStack, until } from "./harness.js";

const BOUND = 16 << 20;
const CHUNK = 64 << 10;
const FLOOD = 16 << 20;
const QUIET = 1 << 20;
const KEYS = { flood: "tenant-log-flood", quiet: "tenant-log-quiet" };
const cleanup = new SuiteCleanup();
let stack: SuiteStack;
let flood: Api;
let quiet: Api;

beforeAll(async () => {
  stack = await startSuiteStack(
    {
      apiKeys: `flood:${KEYS.flood},quiet:${KEYS.quiet}`,
      redis: true,
      runners: [
        {
          env: { TENANT_LOG_BYTES: String(BOUND), COALESCE_BYTES: String(CHUNK), OUTPUT_RETAIN_BYTES: String(2 * FLOOD) },
        },
      ],
    },
    cleanup,
  );
  flood = new Api(stack.edge.url, KEYS.flood);
  quiet = new Api(stack.edge.url, KEYS.quiet);
});

/** A `pty: false` session of `/bin/sh -c script`, purged after the file. */
async function pipes(api: Api, script: string): Promise<Session> {
  const session = await api.create({ pty: false, command: "/bin/sh", args: ["-c", script] });
  cleanup.session(api, session.id);
  return session;
}

/** Runs a Lua script on the stack's Redis over one key; what it returned, as redis-cli prints it. */
async function evalOn(key: string, script: string): Promise<string> {
  return (await cli(stack.redis.port, "EVAL", script, "1", key)).trim();
}

/** Redis's `used_memory`: the bytes its allocator holds for data. */
async function usedMemory(): Promise<number> {
  const info = await cli(stack.redis.port, "INFO", "memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

/** The session's stream in Redis (its key carries the incarnation). */
async function streamOf(tenant: string, id: string): Promise<string> {
  const keys = (await cli(stack.redis.port, "--scan", "--pattern", `ptyb:{${tenant}/${id}/*}:out`)).split("\n").filter(Boolean);
  expect(keys).toHaveLength(1);
  return keys[0];
}

/** Bytes the stream holds, summed over its entries in Redis itself (not the log's count). */
async function streamBytes(stream: string): Promise<number> {
  const sum = `local n = 0
    for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
      for i = 1, #e[2], 2 do if e[2][i] == 'd' then n = n + string.len(e[2][i + 1]) end end
    end
    return n`;
  return Number(await evalOn(stream, sum));
}

/** The offset the stream starts at (its first entry's ID), or `end` when it holds nothing. */
async function streamStart(stream: string, end: number): Promise<number> {
  const id = await evalOn(stream, "local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1] return e and e[1] or ''");
  return id === "" ? end : Number(id.slice(0, id.indexOf("-")));
}

/**
 * Walks what a framed client received from `from` on: each output frame must continue the one
 * before it, or start where a `gap` message said the log goes on. Returns where the client
 * stands and, with `expected`, what broke that rule or held the wrong bytes.
 */
function walk(client: TermClient, from: number, expected?: Buffer): { next: number; problems: string[] } {
  const problems: string[] = [];
  const frames = expected ? client.frames() : [];
  let next = from;
  let frame = 0;
  for (const entry of client.timeline) {
    if (entry.kind === "message" && entry.message.type === "gap") {
      if (entry.message.from !== next) problems.push(`gap from ${entry.message.from} at ${next}`);
      next = entry.message.to;
    } else if (entry.kind === "output" || entry.kind === "stderr") {
      if (entry.offset !== next) problems.push(`frame at ${entry.offset}, expected ${next} (no gap said so)`);
      const data = frames[frame++]?.data;
      if (expected && !data?.equals(expected.subarray(entry.offset, entry.offset + entry.length))) problems.push(`wrong bytes at ${entry.offset}`);
      next = entry.offset + entry.length;
    }
  }
  return { next, problems };
}

/** Checks a client of the first session got no hole and the right bytes; returns where it stands. */
function expectNoHole(client: TermClient, from: number, expected: Buffer): number {
  const { next, problems } = walk(client, from, expected);
  expect(problems).toEqual([]);
  return next;
}

/** Waits for a client of the first session to stand at its end (by bytes or gaps); says what it got if not. */
async function reachEnd(client: TermClient, from: number, who: string): Promise<void> {
  try {
    await client.waitFor(() => walk(client, from).next === FLOOD, `${who} to reach the end`, 60_000);
  } catch (error) {
    throw new Error(`${String(error)}; it got ${JSON.stringify(client.messages)}, up to ${client.nextOffset}, closed ${client.closeCode}`);
  }
}

describe("tenant log bound", () => {
  it("keeps a flooding tenant within its bound, oldest first, and never touches another tenant's output", { timeout: 240_000 }, async () => {
    const memoryBefore = await usedMemory();
    const quietSession = await pipes(quiet, `seq 1 9999999 | head -c ${QUIET}`);
    const quietDone = await quiet.request<Session>("GET", `/v1/sessions/${quietSession.id}/wait?timeoutSec=30`);
    expect(quietDone.body).toMatchObject({ status: "exited", offset: QUIET });

    // A session of the flooding tenant that ended before the flood: its output is the oldest, so
    // it goes first, and no runner hosts it any more to say so on a link.
    const ended = await pipes(flood, `seq 1 9999999 | head -c ${QUIET}`);
    const endedDone = await flood.request<Session>("GET", `/v1/sessions/${ended.id}/wait?timeoutSec=30`);
    expect(endedDone.body).toMatchObject({ status: "exited", offset: QUIET, retainedFrom: 0 });

    // Four sessions that each print 16 MiB once told to, then stay (hosted by the runner).
    const starts = [1, 2_000_001, 4_000_001, 6_000_001];
    const sessions = await Promise.all(
      starts.map((start) => pipes(flood, `read go; seq ${start} 99999999 | head -c ${FLOOD}; exec sleep 600`)),
    );
    const expected = starts.map((start) => seqBytes(start, FLOOD));
    const [first] = sessions;
    // A live client of the first session that never acknowledges: it falls behind and is cut.
    const behind = cleanup.client(new TermClient(stack.edge.url, first.id, KEYS.flood, { query: "from=0", ack: false }));
    await behind.waitForMessage((m) => m.type === "live", "the client to go live");
    // A frame of its own, so that the edge's close reaches it at once (test/term-client.ts).
    behind.control({ type: "ping" });
    await Promise.all(sessions.map((s) => flood.input(s.id, "go\n")));

    // A client that replays the first session from 0 while the flood goes on and the log is trimmed.
    await until(async () => (await flood.get(first.id)).offset >= 4 << 20, 60_000, "4 MiB of the first session");
    const replaying = cleanup.client(new TermClient(stack.edge.url, first.id, KEYS.flood, { query: "from=0" }));

    await until(
      async () => (await Promise.all(sessions.map((s) => flood.get(s.id)))).every((s) => s.offset === FLOOD),
      180_000,
      "every flood to be written",
    );
    const streams = await Promise.all(sessions.map((s) => streamOf("flood", s.id)));
    streams.push(await streamOf("flood", ended.id));
    // The trims have settled: what the tenant's streams hold, entry by entry, is within one chunk under the bound.
    const held = await until(
      async () => {
        const bytes = (await Promise.all(streams.map(streamBytes))).reduce((sum, n) => sum + n, 0);
        return bytes <= BOUND ? bytes : undefined;
      },
      30_000,
      "the flood tenant's streams to hold at most its bound",
    );
    expect(held).toBeGreaterThan(BOUND - CHUNK);
    // What Redis holds grew by that and its overhead (21 MiB measured), not by the 65 MiB written.
    expect((await usedMemory()) - memoryBefore).toBeLessThan(2 * BOUND);

    // Each session's record says where its log starts now (the runner told the edge), before any read.
    const retainedFrom = await Promise.all(streams.map((stream, i) => streamStart(stream, i < sessions.length ? FLOOD : QUIET)));
    expect(retainedFrom[0]).toBeGreaterThan(0);
    for (const [i, s] of sessions.entries()) {
      await until(async () => (await flood.get(s.id)).retainedFrom === retainedFrom[i], 10_000, `retainedFrom of session ${i}`);
    }
    // The ended session's log went whole, and the runner told the edge without a host link
    // (POST /internal/sessions/:tenant/:id/retained), also before any read.
    expect(retainedFrom[sessions.length]).toBe(QUIET);
    await until(async () => (await flood.get(ended.id)).retainedFrom === QUIET, 10_000, "retainedFrom of the ended session");
    expect(await fetchOutput(flood, ended.id, 0)).toEqual({ from: QUIET, to: QUIET, bytes: Buffer.alloc(0) });
    // Reading from 0 answers from there, byte for byte.
    for (const [i, s] of sessions.entries()) {
      const output = await fetchOutput(flood, s.id, 0);
      expect(output.from).toBe(retainedFrom[i]);
      expect(output.to).toBe(FLOOD);
      expect(output.bytes.equals(expected[i].subarray(retainedFrom[i]))).toBe(true);
    }

    // The other tenant's output is whole.
    const quietOutput = await fetchOutput(quiet, quietSession.id, 0);
    expect(quietOutput.from).toBe(0);
    expect(quietOutput.bytes.equals(seqBytes(1, QUIET))).toBe(true);

    // The client that fell behind was cut as today, having received no hole.
    expect(await behind.waitForClose(30_000)).toBe(4008);
    const stoppedAt = expectNoHole(behind, 0, expected[0]);
    expect(behind.messages.filter((m) => m.type === "gap")).toEqual([]);
    // Resuming where it stopped: a gap up to where the log starts, then the rest, exactly.
    const resumed = cleanup.client(new TermClient(stack.edge.url, first.id, KEYS.flood, { query: `from=${stoppedAt}` }));
    await reachEnd(resumed, stoppedAt, "the resumed client");
    expect(resumed.messages.filter((m) => m.type === "gap")).toEqual(
      stoppedAt < retainedFrom[0] ? [{ type: "gap", from: stoppedAt, to: retainedFrom[0] }] : [],
    );
    expectNoHole(resumed, stoppedAt, expected[0]);

    // The client that replayed while the log was trimmed: gaps where bytes went, never a silent hole.
    await reachEnd(replaying, 0, "the replaying client");
    expect(expectNoHole(replaying, 0, expected[0])).toBe(FLOOD);
  });
});
