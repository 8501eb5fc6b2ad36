// An offset past the end of a session's output is refused on every surface (docs/protocol.md §5,
// "An offset past the end"): framed and raw WebSocket, SSE (`from` and `Last-Event-ID`), `GET
// .../output`, `GET .../recording` and the SDK, each with INVALID_OFFSET naming the session's offset. An offset equal
// to the session's offset still works: live from there, nothing lost.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { PtyBroker, PtyBrokerError } from "../client/index.js";
import { TENANTS } from "./global-setup.js";
import { SseClient, onSharedStack, until } from "./harness.js";

const suite = onSharedStack();
const { url, api } = suite;

/** A session that prints `ready\n` (7 bytes on a terminal) and then only echoes what it is sent. */
async function quietSession(): Promise<{ id: string; end: number }> {
  const s = await suite.session({ command: "/bin/sh", args: ["-c", "printf 'ready\\n'; exec cat"] });
  const end = (await until(async () => ((await api.get(s.id)).offset === 7 ? 7 : null), 15_000, "ready printed")) as number;
  return { id: s.id, end };
}

const AHEAD = 12345;
const CLI = join(import.meta.dirname, "..", "bin/ptybroker.js");
const refusal = (end: number) => `offset ${AHEAD} is past the session's output (its offset is ${end})`;

describe("an offset past the end", () => {
  it("framed WebSocket: error INVALID_OFFSET naming the session's offset, then close 1008", async () => {
    const { id, end } = await quietSession();
    const client = suite.connect(id, { query: `from=${AHEAD}` });
    const reason = new Promise<string>((resolve) => client.socket.once("close", (_code, why: Buffer) => resolve(why.toString())));
    expect(await client.waitForClose(20_000)).toBe(1008);
    expect(client.messages).toEqual([{ type: "error", code: "INVALID_OFFSET", message: refusal(end) }]);
    expect(await reason).toBe(refusal(end));
    expect(client.output.byteLength).toBe(0);
  });

  it("raw WebSocket: close 1008 whose reason names the session's offset, and no byte", async () => {
    const { id, end } = await quietSession();
    for (const how of [{ query: `from=${AHEAD}&mode=raw` }, { query: `from=${AHEAD}`, protocols: ["raw"] }]) {
      const client = suite.connect(id, how);
      const reason = new Promise<string>((resolve) => client.socket.once("close", (_code, why: Buffer) => resolve(why.toString())));
      expect(await client.waitForClose(20_000)).toBe(1008);
      expect(await reason).toBe(refusal(end));
      expect(client.messages).toEqual([]);
      expect(client.output.byteLength).toBe(0);
    }
  });

  it("SSE: 416 INVALID_OFFSET before the stream starts, for ?from= and for Last-Event-ID", async () => {
    const { id, end } = await quietSession();
    for (const options of [{ query: `from=${AHEAD}` }, { lastEventId: String(AHEAD) }, { query: "from=0", lastEventId: String(AHEAD) }]) {
      const stream = new SseClient(url, id, TENANTS.acme, options);
      suite.cleanup.stream(stream);
      await stream.done;
      expect(stream.status).toBe(416);
      expect(stream.contentType).toMatch(/^application\/json/);
      expect(JSON.parse(stream.body)).toEqual({ error: { code: "INVALID_OFFSET", message: refusal(end) } });
      expect(stream.events).toEqual([]);
    }
  });

  it("GET output: 416 INVALID_OFFSET naming the session's offset; from the offset itself, an empty 200", async () => {
    const { id, end } = await quietSession();
    const past = await api.request("GET", `/v1/sessions/${id}/output?from=${AHEAD}`);
    expect(past.status).toBe(416);
    expect(past.body).toEqual({ error: { code: "INVALID_OFFSET", message: refusal(end) } });
    const justPast = await api.request("GET", `/v1/sessions/${id}/output?from=${end + 1}`);
    expect(justPast.body).toEqual({ error: { code: "INVALID_OFFSET", message: `offset ${end + 1} is past the session's output (its offset is ${end})` } });

    const atEnd = await fetch(`${url}/v1/sessions/${id}/output?from=${end}`, { headers: { authorization: `Bearer ${TENANTS.acme}` } });
    expect(atEnd.status).toBe(200);
    expect([atEnd.headers.get("x-offset-from"), atEnd.headers.get("x-offset-to")]).toEqual([String(end), String(end)]);
    expect((await atEnd.arrayBuffer()).byteLength).toBe(0);
  });

  it("GET recording: 416 INVALID_OFFSET for a from past the end; from the offset itself, a header and no event", async () => {
    const { id, end } = await quietSession();
    const past = await api.request("GET", `/v1/sessions/${id}/recording?from=${AHEAD}`);
    expect(past.status).toBe(416);
    expect(past.body).toEqual({ error: { code: "INVALID_OFFSET", message: refusal(end) } });

    const atEnd = await fetch(`${url}/v1/sessions/${id}/recording?from=${end}`, { headers: { authorization: `Bearer ${TENANTS.acme}` } });
    expect(atEnd.status).toBe(200);
    const lines = (await atEnd.text()).split("\n").filter((line) => line !== "");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toMatchObject({ version: 2, width: 80, height: 24 });
  });

  it("from the session's offset itself: live there, and the next output arrives at it with nothing lost", async () => {
    const { id, end } = await quietSession();
    const client = suite.connect(id, { query: `from=${end}` });
    const stream = new SseClient(url, id, TENANTS.acme, { lastEventId: String(end) });
    suite.cleanup.stream(stream);
    await client.waitForMessage((m) => m.type === "live", "live");
    expect(client.messages.map((m) => m.type)).toEqual(["hello", "live"]);
    expect(client.messages[1]).toEqual({ type: "live", offset: end });
    await stream.waitFor(() => stream.status === 200, "the stream open");

    await api.input(id, "after\n");
    // The terminal echoes the line, then cat writes it back.
    const expected = Buffer.from("after\r\nafter\r\n");
    await client.waitFor(() => client.output.byteLength >= expected.byteLength, "the echo");
    expect(client.startOffset).toBe(end);
    expect(client.output).toEqual(expected);
    expect(client.offsetErrors).toEqual([]);
    await stream.waitFor(() => stream.bytes.byteLength >= expected.byteLength, "the echo on the stream");
    expect(stream.bytes).toEqual(expected);
    expect(Number(stream.outputEvents()[0]?.id) - (stream.outputEvents()[0]?.data.byteLength ?? 0)).toBe(end);
  });

  it("refuses a finished session's offset + 1 the same way: its offset is final", async () => {
    const s = await suite.session({ command: "/bin/sh", args: ["-c", "printf 'done\\n'"] });
    const done = await until(async () => {
      const now = await api.get(s.id);
      return now.status === "exited" ? now : null;
    }, 15_000, "the exit");
    const client = suite.connect(s.id, { query: `from=${done.offset + 1}` });
    expect(await client.waitForClose(20_000)).toBe(1008);
    expect(client.messages).toEqual([
      { type: "error", code: "INVALID_OFFSET", message: `offset ${done.offset + 1} is past the session's output (its offset is ${done.offset})` },
    ]);
  });

  it("SDK: connect({ from }) past the end rejects with a PtyBrokerError INVALID_OFFSET (416), not a hang", async () => {
    const { id, end } = await quietSession();
    const broker = new PtyBroker({ url, apiKey: TENANTS.acme });
    const started = Date.now();
    const error = await broker.connect(id, { from: AHEAD, connectTimeoutMs: 60_000 }).then(
      (pty) => {
        pty.close();
        return null;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PtyBrokerError);
    expect(error).toMatchObject({ code: "INVALID_OFFSET", status: 416, message: refusal(end) });
    // Refused, not timed out: the rejection comes from the edge's answer.
    expect(Date.now() - started).toBeLessThan(30_000);

    const output = await broker.output(id, { from: AHEAD }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(output).toMatchObject({ code: "INVALID_OFFSET", status: 416, message: refusal(end) });
  });

  it("CLI: attach --from and logs --from past the end print INVALID_OFFSET with the session's offset and exit 1", async () => {
    const { id, end } = await quietSession();
    const env = { ...process.env, PTYBROKER_URL: url, PTYBROKER_API_KEY: TENANTS.acme };
    for (const command of ["attach", "logs"]) {
      const ran = await promisify(execFile)("node", [CLI, command, id, "--from", String(AHEAD)], { env, timeout: 30_000 }).then(
        () => null,
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
      expect([ran?.code, ran?.stdout, ran?.stderr]).toEqual([1, "", `ptybroker: INVALID_OFFSET: ${refusal(end)}\n`]);
    }
  });
});
