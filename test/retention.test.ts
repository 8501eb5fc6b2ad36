// Issue 3: history trimmed by OUTPUT_RETAIN_BYTES. `from=0` gets `gap` up to `retainedFrom`,
// then exactly the bytes from there; without `from`, the retained bytes with no gap.
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { Edge } from "../scripts/stack.js";
import { Api, SseClient, SuiteCleanup, TermClient, fetchOutput, startSuiteStack } from "./harness.js";

const RETAIN = 256 * 1024;
/** Output chunk size of this suite's runner: the log is trimmed a whole chunk at a time. */
const CHUNK = 64 * 1024;
const KEY = "retention-key";
const cleanup = new SuiteCleanup();
let edge: Edge;
let api: Api;
const state = cleanup.tempFolder("ptybroker-retention-");

beforeAll(async () => {
  ({ edge } = await startSuiteStack(
    {
      apiKeys: `retained:${KEY}`,
      persistTo: join(state, "edge"),
      redis: true,
      runners: [{ env: { OUTPUT_RETAIN_BYTES: String(RETAIN), COALESCE_BYTES: String(CHUNK) } }],
    },
    cleanup,
  ));
  api = new Api(edge.url, KEY);
});

function seqOutput(n: number): Buffer {
  const lines: string[] = [];
  for (let i = 1; i <= n; i++) lines.push(`${i}\r\n`);
  return Buffer.from(lines.join(""));
}

describe("retention", () => {
  it("says gap for trimmed history and then replays exactly what is retained", async () => {
    const expected = seqOutput(100_000);
    const s = await api.create({ command: "/usr/bin/seq", args: ["1", "100000"] });
    const done = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=30`);
    expect(done.body).toMatchObject({ status: "exited", exitCode: 0, offset: expected.byteLength });

    const fromZero = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    await fromZero.waitForMessage((m) => m.type === "exit", "exit");
    const kinds = fromZero.messages.map((m) => m.type);
    expect(kinds).toEqual(["hello", "gap", "replay", "live", "exit"]);
    const gap = fromZero.messages[1];
    const retainedFrom = gap.to as number;
    expect(gap.from).toBe(0);
    expect(retainedFrom).toBeGreaterThan(0);
    // At most the retention (plus the trimming slack and one chunk) is kept.
    expect(expected.byteLength - retainedFrom).toBeLessThanOrEqual(RETAIN + RETAIN / 8 + CHUNK);
    expect(expected.byteLength - retainedFrom).toBeGreaterThanOrEqual(RETAIN - CHUNK);
    expect(fromZero.messages[2]).toEqual({ type: "replay", from: retainedFrom, to: expected.byteLength });
    expect(fromZero.startOffset).toBe(retainedFrom);
    expect(fromZero.output.equals(expected.subarray(retainedFrom))).toBe(true);
    fromZero.socket.terminate();

    expect((await api.get(s.id)).retainedFrom).toBe(retainedFrom);

    // No `from`: whatever is retained, without a gap.
    const retained = new TermClient(edge.url, s.id, KEY);
    await retained.waitForMessage((m) => m.type === "exit", "exit");
    expect(retained.messages.map((m) => m.type)).toEqual(["hello", "replay", "live", "exit"]);
    expect(retained.output.equals(expected.subarray(retainedFrom))).toBe(true);
    retained.socket.terminate();

    // REST: the answer starts at retainedFrom and says so in its headers.
    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.from).toBe(retainedFrom);
    expect(rest.bytes.equals(expected.subarray(retainedFrom))).toBe(true);

    // SSE from 0: a gap event, then the retained bytes, then exit.
    const sse = new SseClient(edge.url, s.id, KEY, { query: "from=0" });
    await sse.done;
    expect(sse.events[0]).toMatchObject({ event: "gap", data: JSON.stringify({ from: 0, to: retainedFrom }) });
    expect(sse.bytes.equals(expected.subarray(retainedFrom))).toBe(true);
    expect(sse.events.at(-1)?.event).toBe("exit");
  });

  it("tells a replay from 0 about 20 MB of trimmed history with one gap, not one per read", async () => {
    const total = seqOutput(2_500_000).byteLength;
    const s = await api.create({ command: "/usr/bin/seq", args: ["1", "2500000"] });
    const done = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=60`);
    expect(done.body).toMatchObject({ status: "exited", exitCode: 0, offset: total });
    for (const via of ["websocket", "sse"] as const) {
      let gaps: { from: number; to: number }[];
      if (via === "websocket") {
        const client = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
        await client.waitForMessage((m) => m.type === "exit", "exit", 30_000);
        expect(client.messages.map((m) => m.type)).toEqual(["hello", "gap", "replay", "live", "exit"]);
        gaps = client.messages.filter((m) => m.type === "gap");
        expect(client.startOffset).toBe(gaps[0].to);
        client.socket.terminate();
      } else {
        const sse = new SseClient(edge.url, s.id, KEY, { query: "from=0" });
        await sse.done;
        gaps = sse.events.filter((e) => e.event === "gap").map((e) => JSON.parse(e.data));
      }
      expect(gaps).toHaveLength(1);
      expect(gaps[0].from).toBe(0);
      expect(total - gaps[0].to).toBeLessThanOrEqual(RETAIN + RETAIN / 8 + CHUNK);
    }
  });
});
