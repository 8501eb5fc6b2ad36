// 300 sessions on 2 runners, one client each, all printing at once (issue 12, hole 9): no runner
// link stalls (workerd's "expected !currentlySending" under load), no replay or connect refused
// with 1013, every client gets its output byte for byte. A stack of its own with raised limits.
import { writeFileSync } from "node:fs";
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import type { Edge, ManagedProcess } from "../scripts/stack.js";
import { Api, SuiteCleanup, TermClient, line, startSuiteStack } from "./harness.js";

const KEY = "scale-key";
const SESSIONS = 300;
/**
 * Each session prints the lines 1..100 every 100 ms for ~15 s: busy links for longer than a
 * heartbeat period, 300 chunks a second reaching the edge at once, ~22 MB in all. (With 300 lines
 * a round, ~65 MB, a slow hour of this 2-core machine took over a minute to carry it: that
 * measures the machine's throughput, which the bench reports, not a stall.)
 */
const ROUNDS = 150;
const LINES = 100;

const cleanup = new SuiteCleanup();
let edge: Edge;
let runners: ManagedProcess[];
let api: Api;

beforeAll(async () => {
  ({ edge, runners } = await startSuiteStack(
    {
      apiKeys: `scaled:${KEY}`,
      vars: { MAX_SESSIONS_PER_TENANT: String(SESSIONS + 20), MAX_CREATES_PER_MINUTE: "100000" },
      redis: true,
      runners: ["scale-a", "scale-b"].map((runnerId) => ({ runnerId, capacity: 200 })),
    },
    cleanup,
  ));
  api = new Api(edge.url, KEY);
});

/** Runs `work` over `items`, `limit` at a time. */
async function pool<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await work(items[i]);
      }
    }),
  );
  return results;
}

function seqLines(n: number): Buffer {
  const lines: string[] = [];
  for (let i = 1; i <= n; i++) lines.push(`${i}\r\n`);
  return Buffer.from(lines.join(""));
}

describe("scale", () => {
  it("runs 300 sessions on 2 runners with one client each, all printing at once: no stall, no 1013", { timeout: 240_000 }, async () => {
    const indexes = Array.from({ length: SESSIONS }, (_, i) => i);
    const created = await pool(indexes, 4, (i) =>
      api.create({ id: `scale-${i}`, command: "/bin/bash", args: ["--norc", "--noprofile"] }),
    );
    expect(created.every((s) => s.status === "running")).toBe(true);
    const clients = await pool(created, 8, async (s) => {
      const client = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
      await client.waitForMessage((m) => m.type === "live", `live on ${s.id}`, 30_000);
      return client;
    });
    onTestFailed(() => {
      writeFileSync("/tmp/scale-logs.txt", [edge.output(), ...runners.map((r) => r.output())].join("\n"));
    });
    const started = Date.now();
    clients.forEach((client, i) =>
      // Builtins only (printf, and `read -t` on an empty pipe as the pause): 300 shells that
      // forked `seq` and `sleep` ten times a second would measure this machine's fork rate.
      client.send(
        `exec 3<> <(:); for ((r=0;r<${ROUNDS};r++)); do printf '%s\\n' {1..${LINES}}; read -t 0.1 -u 3; done; echo done-$((${i}+100000))\n`,
      ),
    );
    await Promise.all(clients.map((client, i) => client.waitForOutput(line(`done-${i + 100000}`), 60_000)));
    const tookMs = Date.now() - started;

    const expected = Buffer.concat(Array.from({ length: ROUNDS }, () => seqLines(LINES)));
    for (const client of clients) {
      expect(client.offsetErrors).toEqual([]);
      expect(client.messages.filter((m) => m.type === "error" || m.type === "gap")).toEqual([]);
      expect(client.closeCode).toBeUndefined();
      expect(client.output.includes(expected)).toBe(true);
    }
    const logs = [edge.output(), ...runners.map((r) => r.output())].join("\n");
    expect(logs).not.toContain("currentlySending");
    expect(logs).not.toMatch(/"event":"link\.heartbeat"/);
    expect(logs).not.toMatch(/"event":"link\.closed"/);
    console.info("scale", JSON.stringify({ sessions: SESSIONS, bytes: SESSIONS * expected.byteLength, tookMs }));

    for (const client of clients) client.socket.terminate();
    await pool(created, 8, (s) => api.destroy(s.id));
  });
});
