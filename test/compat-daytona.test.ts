// Daytona's toolbox PTY API under /compat/daytona/:sandbox (docs/protocol.md, "Compatibility:
// Daytona"), driven by Daytona's own published client (`@daytonaio/toolbox-api-client`'s
// ProcessApi) and by a WebSocket opened as Daytona's SDK PtyHandle opens it (Node: `ws` with the
// client's headers at `<basePath as ws>/process/pty/<id>/connect`; read in daytonaio/daytona,
// libs/sdk-typescript/src/Process.ts and PtyHandle.ts, v0.161.0), on the real stack with real bash.
import { randomBytes } from "node:crypto";
import { Configuration, ProcessApi } from "@daytonaio/toolbox-api-client";
import { describe, expect, it, onTestFailed } from "vitest";
import WebSocket from "ws";
import { secret, startEdge } from "../scripts/stack.js";
import { TENANTS } from "./global-setup.js";
import { Api, SuiteCleanup, fetchOutput, onSharedStack, startSuiteStack, until } from "./harness.js";

const suite = onSharedStack();
const { url, api, globex, cleanup } = suite;

/** Daytona's client for a tenant's key, at `<edge>/compat/daytona/<any sandbox>`. */
function processApi(edge: string, key: string | null, sandbox = "sandbox-1"): ProcessApi {
  const headers = key === null ? {} : { Authorization: `Bearer ${key}` };
  return new ProcessApi(new Configuration({ basePath: `${edge}/compat/daytona/${sandbox}`, baseOptions: { headers } }));
}

const daytona = processApi(url, TENANTS.acme);
const daytonaGlobex = processApi(url, TENANTS.globex);

/** A fresh id, purged from the tenant after the file. */
function ptyId(on: Api = api): string {
  const id = `dt-${randomBytes(6).toString("hex")}`;
  cleanup.session(on, id);
  return id;
}

/** The status and body of a request the client refused (axios throws for non-2xx). */
async function refusal(request: Promise<unknown>): Promise<{ status: number | undefined; data: any }> {
  try {
    await request;
  } catch (error) {
    // The client's axios (CommonJS) throws its own AxiosError class: known by its flag.
    const failed = error as { isAxiosError?: boolean; response?: { status: number; data: unknown } };
    if (failed.isAxiosError) return { status: failed.response?.status, data: failed.response?.data };
    throw error;
  }
  throw new Error("the request succeeded");
}

/**
 * A PTY connection as Daytona's SDK PtyHandle makes it: `ws` with the client's headers, binary
 * frames as output, `{"type":"control"}` text messages, and the exit read from the close.
 */
class DaytonaPty {
  readonly ws: WebSocket;
  readonly messages: { text: boolean; data: Buffer }[] = [];
  close: { code: number; reason: string } | undefined;
  private chunks: Buffer[] = [];

  constructor(edge: string, id: string, key: string, sandbox = "sandbox-1", protocols: string[] = []) {
    const wsUrl = `${edge.replace(/^http/, "ws")}/compat/daytona/${sandbox}/process/pty/${id}/connect`;
    this.ws = new WebSocket(wsUrl, protocols, { headers: { Authorization: `Bearer ${key}`, "X-Daytona-SDK-Version": "0.161.0" } });
    this.ws.binaryType = "nodebuffer";
    this.ws.on("message", (data: Buffer, isBinary) => {
      this.messages.push({ text: !isBinary, data });
      if (isBinary) this.chunks.push(data);
    });
    this.ws.on("close", (code, reason) => {
      this.close = { code, reason: reason.toString() };
    });
    cleanup.first(() => this.ws.terminate());
  }

  get output(): Buffer {
    return Buffer.concat(this.chunks);
  }

  get text(): string {
    return this.output.toString("utf8");
  }

  /** The first message, as PtyHandle.waitForConnection waits for it. */
  async connected(): Promise<void> {
    await until(() => this.messages.length > 0 || this.close, 15_000, "the first message");
    expect(this.messages[0]).toEqual({ text: true, data: Buffer.from('{"type":"control","status":"connected"}') });
  }

  async waitForText(needle: string): Promise<void> {
    const found = await until(() => this.text.includes(needle) || this.close, 15_000, JSON.stringify(needle)).catch(() => false);
    if (found !== true) {
      const messages = this.messages.map((m) => `${m.text ? "text" : "binary"} ${JSON.stringify(m.data.toString())}`);
      throw new Error(`no ${JSON.stringify(needle)}; close ${JSON.stringify(this.close)}; messages:\n${messages.join("\n")}`);
    }
  }

  /** Input as PtyHandle.sendInput sends a string: its UTF-8 bytes, binary. */
  send(input: string): void {
    this.ws.send(new TextEncoder().encode(input));
  }

  closed(): Promise<{ code: number; reason: string }> {
    return until(() => this.close, 20_000, "the close");
  }
}

describe("Daytona's toolbox PTY API", () => {
  it("creates as the SDK does (lazyStart), starts on connect, types, resizes, and closes with the exit code", async () => {
    const id = ptyId();
    const created = await daytona.createPtySession({ id, cols: 100, rows: 30, envs: { MARK: "mk" }, lazyStart: true });
    expect(created.status).toBe(201);
    expect(created.data).toEqual({ sessionId: id });

    // Held: no process until the first connect.
    const held = (await daytona.getPtySession(id)).data;
    expect(held).toEqual({
      id,
      cwd: "~",
      envs: { TERM: "xterm-256color", MARK: "mk" },
      cols: 100,
      rows: 30,
      createdAt: expect.any(String),
      active: false,
      lazyStart: true,
    });
    expect(await api.get(id)).toMatchObject({ status: "starting", pid: null });

    // Two clients at once: both wait for the one start.
    const pty = new DaytonaPty(url, id, TENANTS.acme);
    const watcher = new DaytonaPty(url, id, TENANTS.acme);
    await pty.connected();
    await watcher.connected();
    // "connected" comes once the process runs, as Daytona's daemon starts it before saying so.
    expect((await daytona.getPtySession(id)).data).toMatchObject({ active: true, lazyStart: true });
    expect(await api.get(id)).toMatchObject({ status: "running", pid: expect.any(Number) });

    pty.send("echo $((6*7))-$MARK-marker\n");
    await pty.waitForText("42-mk-marker\r\n");

    const resized = await daytona.resizePtySession(id, { cols: 120, rows: 40 });
    expect(resized.data).toMatchObject({ id, cols: 120, rows: 40, active: true });
    pty.send("stty size\n");
    await pty.waitForText("40 120\r\n");

    pty.send("exit 3\n");
    expect(await pty.closed()).toEqual({ code: 1011, reason: '{"exitCode":3,"exitReason":"non-zero exit"}' });
    expect(await watcher.closed()).toEqual({ code: 1011, reason: '{"exitCode":3,"exitReason":"non-zero exit"}' });
    expect(watcher.output.equals(pty.output)).toBe(true);
    // Every message after the first was output, as binary frames.
    expect(pty.messages.slice(1).every((m) => !m.text)).toBe(true);

    // Daytona forgets an ended PTY; /v1 keeps it, with every byte the Daytona client got.
    const gone = await refusal(daytona.getPtySession(id));
    expect(gone.status).toBe(404);
    expect(gone.data).toMatchObject({ error: "PTY session not found", message: "PTY session not found", statusCode: 404 });
    expect(await api.get(id)).toMatchObject({ status: "exited", exitCode: 3, cols: 120, rows: 40 });
    const logged = await fetchOutput(api, id, 0);
    expect(logged.bytes.equals(pty.output)).toBe(true);
  });

  it("starts at once without lazyStart, takes text frames as input, and closes 1000 for exit code 0", async () => {
    const id = ptyId();
    expect((await daytona.createPtySession({ id })).data).toEqual({ sessionId: id });
    expect((await daytona.getPtySession(id)).data).toMatchObject({ active: true, lazyStart: false, cols: 80, rows: 24 });

    // The browser SDK offers a subprotocol naming its version: agreed to.
    const pty = new DaytonaPty(url, id, TENANTS.acme, "sandbox-1", ["X-Daytona-SDK-Version~0.161.0"]);
    await pty.connected();
    expect(pty.ws.protocol).toBe("X-Daytona-SDK-Version~0.161.0");
    const marker = randomBytes(4).toString("hex");
    pty.ws.send(`echo text-$((0x${marker}))\n`); // a text frame
    await pty.waitForText(`text-${Number.parseInt(marker, 16)}\r\n`);
    pty.send("exit\n");
    expect(await pty.closed()).toEqual({ code: 1000, reason: '{"exitCode":0}' });
    // The output the shell made before the connect was replayed, not lost.
    expect((await fetchOutput(api, id, 0)).bytes.equals(pty.output)).toBe(true);
  });

  it("lists the tenant's terminals with /v1's, answers 409 for a live id, and lets an ended id be used again", async () => {
    const fromV1 = await suite.session({ id: ptyId(), cols: 90, rows: 20 });
    const pipes = await suite.session({ id: ptyId(), pty: false, command: "/bin/cat" });
    const id = ptyId();
    await daytona.createPtySession({ id, lazyStart: true });

    const listed = (await daytona.listPtySessions()).data.sessions;
    const mine = listed.filter((s) => [fromV1.id, pipes.id, id].includes(s.id));
    expect(mine.map((s) => s.id)).toEqual([fromV1.id, id]);
    expect(mine[0]).toMatchObject({ cols: 90, rows: 20, active: true, lazyStart: false, envs: { TERM: "xterm-256color" } });
    expect(mine[1]).toMatchObject({ active: false, lazyStart: true });
    // And the reverse: Daytona's session in /v1's list.
    const v1List = await api.request("GET", "/v1/sessions?status=starting");
    expect(v1List.body.sessions.map((s: { id: string }) => s.id)).toContain(id);

    for (const taken of [fromV1.id, id]) {
      const conflict = await refusal(daytona.createPtySession({ id: taken }));
      expect(conflict.status).toBe(409);
      expect(conflict.data).toMatchObject({ statusCode: 409, error: `PTY session with ID '${taken}' already exists` });
    }

    // DELETE ends it as Daytona's kill does: a connected client gets 137 (SIGKILL).
    const pty = new DaytonaPty(url, id, TENANTS.acme);
    await pty.connected();
    expect((await daytona.deletePtySession(id)).data).toEqual({ message: "PTY session deleted" });
    expect(await pty.closed()).toEqual({ code: 1011, reason: '{"exitCode":137,"exitReason":"SIGKILL"}' });
    expect(await api.get(id)).toMatchObject({ status: "exited", reason: "deleted" });
    expect((await refusal(daytona.deletePtySession(id))).status).toBe(404);
    const ended = await refusal(daytona.resizePtySession(id, { cols: 10, rows: 10 }));
    expect(ended.status).toBe(410);

    // Daytona forgets ended PTYs, so the id is free again: a new session (the old one purged).
    expect((await daytona.createPtySession({ id })).status).toBe(201);
    expect(await api.get(id)).toMatchObject({ status: "running", reason: null });
  });

  it("keeps tenants apart: another tenant's key gets 404 and its own session under the same id", async () => {
    const id = ptyId();
    await daytona.createPtySession({ id, envs: { WHO: "acme" } });
    cleanup.session(globex, id);

    for (const request of [
      () => daytonaGlobex.getPtySession(id),
      () => daytonaGlobex.deletePtySession(id),
      () => daytonaGlobex.resizePtySession(id, { cols: 50, rows: 10 }),
    ]) {
      const refused = await refusal(request());
      expect(refused).toEqual({ status: 404, data: expect.objectContaining({ statusCode: 404, error: "PTY session not found" }) });
    }
    expect((await daytonaGlobex.listPtySessions()).data.sessions.map((s) => s.id)).not.toContain(id);
    const stranger = new DaytonaPty(url, id, TENANTS.globex);
    await until(() => stranger.close, 15_000, "the refusal");
    expect(JSON.parse(stranger.messages[0].data.toString())).toEqual({
      type: "control",
      status: "error",
      error: `Failed to connect to PTY session: PTY session ${id} not found`,
    });

    // The same id in the other tenant is another session, with nothing of the first.
    await daytonaGlobex.createPtySession({ id, envs: { WHO: "globex" } });
    const theirs = new DaytonaPty(url, id, TENANTS.globex, "another-sandbox");
    await theirs.connected();
    theirs.send("echo who-$WHO\n");
    await theirs.waitForText("who-globex\r\n");
    expect((await daytona.getPtySession(id)).data.envs).toEqual({ TERM: "xterm-256color", WHO: "acme" });
  });

  it("refuses a missing or wrong key (401) and invalid input (400) in Daytona's shape", async () => {
    for (const key of [null, "not-a-key"]) {
      const refused = await refusal(processApi(url, key).listPtySessions());
      expect(refused.status).toBe(401);
      expect(refused.data).toMatchObject({ statusCode: 401, code: "Unauthorized", message: expect.any(String) });
    }
    const cases: [Record<string, unknown>, string][] = [
      [{}, "id"],
      [{ id: "../etc" }, "id"],
      [{ id: "x".repeat(65) }, "id"],
      [{ id: "ok-id", cols: 0 }, "cols"],
      [{ id: "ok-id", rows: 1001 }, "rows"],
      [{ id: "ok-id", cwd: "/etc" }, "cwd"],
      [{ id: "ok-id", envs: { "BAD NAME": "1" } }, "envs"],
    ];
    for (const [body, field] of cases) {
      const refused = await refusal(daytona.createPtySession(body as never));
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.data.error, JSON.stringify(body)).toMatch(new RegExp(`^${field}`));
    }
    expect((await refusal(daytona.getPtySession("no.such.id"))).status).toBe(404);
  });
});

describe("Daytona's session after an edge restart", () => {
  const own = new SuiteCleanup();
  const KEY = "daytona-restart-key";

  it("is replayed exactly by /v1, and goes on", async () => {
    const persistTo = own.tempFolder("ptybroker-daytona-");
    const runnerToken = secret();
    const tokenSecret = secret();
    const stack = await startSuiteStack(
      { apiKeys: `dt:${KEY}`, runnerToken, tokenSecret, persistTo, redis: true, runners: [{ runnerId: "daytona-restart-runner" }] },
      own,
    );
    let edge = stack.edge;
    onTestFailed(() => console.error(stack.runners[0].output().slice(-4000), edge.output().slice(-4000)));
    const client = processApi(edge.url, KEY, "restart-sandbox");
    const id = "restart-pty";
    await client.createPtySession({ id, lazyStart: true, cols: 70, rows: 15 });
    const pty = new DaytonaPty(edge.url, id, KEY);
    await pty.connected();
    pty.send("echo before-$((40+2))\n");
    await pty.waitForText("before-42\r\n");
    const seen = pty.output;

    const port = edge.port;
    await edge.stop();
    own.edges.delete(edge);
    // Same port, same Durable Object storage, same secrets: a restart, as a deploy would be.
    edge = own.edge(await startEdge({ apiKeys: `dt:${KEY}`, runnerToken, tokenSecret, persistTo, port }));
    const v1 = new Api(edge.url, KEY);
    // What the Daytona client saw before the restart, byte for byte, from offset 0.
    const replayed = await until(async () => {
      const out = await fetchOutput(v1, id, 0).catch(() => undefined);
      return out && out.bytes.byteLength >= seen.byteLength ? out : undefined;
    }, 30_000, "the replay after the restart");
    expect(replayed.from).toBe(0);
    expect(replayed.bytes.subarray(0, seen.byteLength).equals(seen)).toBe(true);
    // The session goes on: Daytona's client (same URL) sees it, connects again, is replayed and types.
    expect((await client.getPtySession(id)).data).toMatchObject({ id, active: true, lazyStart: true, cols: 70, rows: 15 });
    const again = new DaytonaPty(edge.url, id, KEY);
    await again.connected();
    await again.waitForText("before-42\r\n");
    again.send("echo after-$((50+5))\n");
    await again.waitForText("after-55\r\n");
    expect(again.output.subarray(0, seen.byteLength).equals(seen)).toBe(true);
  });
});
