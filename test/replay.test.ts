// Issue 3: exact replay by offset from the Redis output log, over WebSocket, SSE and
// `GET .../output`, across many reconnects; and complete logs for processes that exit at once.
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TENANTS } from "./global-setup.js";
import { SHARED_WORKSPACE, SseClient, TermClient, fetchOutput, line, onSharedStack, sha256 } from "./harness.js";

const suite = onSharedStack();
const { url, api } = suite;
// A folder of acme's workspace that sessions write into (their cwd, made by their own user; the
// session's /tmp is its own), read here through the shared runner's workspace on the host.
const scratch = `replay-${randomBytes(6).toString("hex")}`;
const scratchOnHost = join(SHARED_WORKSPACE, "acme", scratch);
suite.cleanup.last(() => rmSync(scratchOnHost, { recursive: true, force: true }));

function session(body: Record<string, unknown>) {
  return suite.session(body);
}

/** `seq 1 n` as a PTY prints it: every \n becomes \r\n. */
function seqOutput(n: number): Buffer {
  const lines: string[] = [];
  for (let i = 1; i <= n; i++) lines.push(`${i}\r\n`);
  return Buffer.from(lines.join(""));
}

/** A framed client from `from` until the session's `exit`, keeping every byte it got. */
async function readToExit(id: string, from: number): Promise<Buffer> {
  const client = new TermClient(url, id, TENANTS.acme, { query: `from=${from}` });
  await client.waitForMessage((m) => m.type === "exit", "exit", 30_000);
  expect(client.offsetErrors).toEqual([]);
  if (client.startOffset !== undefined) expect(client.startOffset).toBe(from);
  const bytes = client.output;
  client.socket.terminate();
  return bytes;
}

describe("replay by offset", () => {
  it("loses and repeats nothing across 45 random disconnects while seq 1 180000 runs", async () => {
    const expected = Buffer.concat([seqOutput(180000), Buffer.from("seq-done\r\n")]);
    const s = await session({ command: "/bin/sh", args: ["-c", "sleep 0.2; seq 1 180000; echo seq-done"] });

    // 45 times: connect from the offset reached, drop the socket at a random moment (a clean
    // close or an abrupt one, alternately), keep what arrived. Then read on to the exit.
    const received: Buffer[] = [];
    let cursor = 0;
    let reconnects = 0;
    const collect = (client: TermClient) => {
      expect(client.offsetErrors).toEqual([]);
      expect(client.messages.filter((m) => m.type === "gap")).toEqual([]);
      if (client.startOffset !== undefined) expect(client.startOffset).toBe(cursor);
      received.push(client.output);
      cursor = client.nextOffset ?? cursor;
    };
    for (; reconnects < 45; reconnects++) {
      const client = new TermClient(url, s.id, TENANTS.acme, { query: `from=${cursor}` });
      await client.opened;
      await new Promise((r) => setTimeout(r, Math.random() * 40)); // the random moment of the drop
      if (reconnects % 2 === 0) await client.close();
      else {
        client.socket.terminate();
        await client.closed;
      }
      collect(client);
    }
    const last = new TermClient(url, s.id, TENANTS.acme, { query: `from=${cursor}` });
    await last.waitForMessage((m) => m.type === "exit", "exit", 30_000);
    expect(last.messages.find((m) => m.type === "exit")).toMatchObject({ status: "exited", exitCode: 0 });
    collect(last);
    last.socket.terminate();
    expect(reconnects).toBeGreaterThanOrEqual(40);

    const pieced = Buffer.concat(received);
    const fresh = await readToExit(s.id, 0);
    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.from).toBe(0);
    expect(sha256(pieced)).toBe(sha256(fresh));
    expect(sha256(rest.bytes)).toBe(sha256(fresh));
    expect(pieced.equals(expected)).toBe(true);
    expect((await api.get(s.id)).offset).toBe(expected.byteLength);
  });

  it("resumes a Server-Sent Events stream with Last-Event-ID, byte for byte", async () => {
    const s = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const first = new SseClient(url, s.id, TENANTS.acme);
    await api.input(s.id, "stty -echo; seq 1 40000; echo part-one\n");
    await first.waitFor(() => first.bytes.includes("part-one\r\n"), "part one");
    first.close();
    await first.done;
    expect(first.status).toBe(200);
    const lastId = first.lastEventId as string;
    expect(Number(lastId)).toBe(first.bytes.byteLength);

    // More output while nobody listens, then resume where the first stream stopped.
    await api.input(s.id, "seq 40001 70000; echo part-two\n");
    const second = new SseClient(url, s.id, TENANTS.acme, { lastEventId: lastId });
    await second.waitFor(() => second.bytes.includes("part-two\r\n"), "part two");
    await api.input(s.id, "exit 4\n");
    await second.done;
    const exit = second.events.find((e) => e.event === "exit");
    // `exit` says where output ends: the stream's last data event ended there.
    expect(JSON.parse(exit?.data ?? "null")).toEqual({
      status: "exited",
      exitCode: 4,
      signal: null,
      reason: "exit",
      offset: Number(second.lastEventId),
    });
    expect(second.events.filter((e) => e.event === "gap")).toEqual([]);

    const all = Buffer.concat([first.bytes, second.bytes]);
    const rest = await fetchOutput(api, s.id, 0);
    expect(all.equals(rest.bytes)).toBe(true);
    expect(all.toString()).toContain(seqOutput(70000).subarray(-200).toString());
  });

  it("logs all of 30 short-lived processes that print 60000 random bytes as base64 and exit", async () => {
    const ids = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const s = await session({ command: "/bin/sh", args: ["-c", `head -c 60000 /dev/urandom | base64 | tee ${i}.b64`], cwd: scratch });
        return { id: s.id, file: join(scratchOnHost, `${i}.b64`) };
      }),
    );
    for (const { id, file } of ids) {
      const done = await api.request("GET", `/v1/sessions/${id}/wait?timeoutSec=30`);
      expect(done.body).toMatchObject({ status: "exited", exitCode: 0 });
      const printed = Buffer.from(readFileSync(file, "utf8").replaceAll("\n", "\r\n"));
      const logged = await fetchOutput(api, id, 0);
      expect(logged.bytes.byteLength).toBe(printed.byteLength);
      expect(logged.bytes.equals(printed)).toBe(true);
    }
  });

  it("sends a live client only new output, and an exited session's history to a late one", async () => {
    const s = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    await api.input(s.id, "echo before-$((1+1))\n");
    const early = new TermClient(url, s.id, TENANTS.acme);
    await early.waitForOutput(line("before-2"));
    const live = new TermClient(url, s.id, TENANTS.acme, { query: "from=live" });
    const liveMsg = await live.waitForMessage((m) => m.type === "live", "live");
    expect(live.messages.some((m) => m.type === "replay")).toBe(false);
    await api.input(s.id, "echo after-$((2+2)); exit\n");
    await live.waitForMessage((m) => m.type === "exit", "exit");
    expect(live.startOffset).toBe(liveMsg.offset);
    expect(live.text).toContain("after-4");
    expect(live.text).not.toContain("before-2\r\n");
    const late = await readToExit(s.id, 0);
    expect(late.equals(Buffer.concat([early.bytesFrom(0)]).subarray(0, late.byteLength))).toBe(true);
    expect(late.toString()).toContain("before-2");
    expect(late.toString()).toContain("after-4");
    early.socket.terminate();
    live.socket.terminate();
  });
});
