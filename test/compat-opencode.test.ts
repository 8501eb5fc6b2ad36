// /compat/opencode with OpenCode's own published client (`@opencode-ai/sdk`): its pty methods
// create, list, get, retitle and resize (`stty size` agrees), and remove; its event stream carries
// pty.created/updated/exited/deleted; its socket, opened as OpenCode's web terminal opens it
// (the URL the SDK builds, `cursor`, a ticket from connect-token, a cursor kept by adding each
// text frame's length), replays from a cursor with nothing missing or repeated across a dropped
// connection, non-ASCII output included. A PTY made here is a /v1 session and the reverse;
// another tenant's key is 404; an edge restart keeps a PTY's output replayable through /v1.
import { randomBytes } from "node:crypto";
import { createOpencodeClient } from "@opencode-ai/sdk/v2";
import { createClient } from "@opencode-ai/sdk/v2/gen/client";
import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { secret, startEdge } from "../scripts/stack.js";
import { TENANTS } from "./global-setup.js";
import { Api, SuiteCleanup, fetchOutput, onSharedStack, startSuiteStack, until } from "./harness.js";

const suite = onSharedStack();
const sockets = new Set<WebSocket>();
suite.cleanup.first(() => {
  for (const ws of sockets) ws.terminate();
});

type Oc = ReturnType<typeof createOpencodeClient>;

const ocBase = `${suite.url}/compat/opencode`;

function opencode(url: string, authorization?: string): Oc {
  return createOpencodeClient({ baseUrl: `${url}/compat/opencode`, headers: authorization ? { authorization } : {} });
}
/** The data of an SDK answer that must have succeeded. */
function ok<T>(res: { data?: T; error?: unknown; response?: Response }): T {
  if (res.data === undefined) throw new Error(`${res.response?.status}: ${JSON.stringify(res.error)}`);
  return res.data;
}
const bearer = (key: string) => `Bearer ${key}`;
const basic = (key: string) => `Basic ${Buffer.from(`opencode:${key}`).toString("base64")}`;

/** A bash with a known prompt, as OpenCode's create takes it. */
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile", "-i"], env: { PS1: "$ " } };

/**
 * OpenCode's web terminal, in Node: connects to the URL the SDK builds with `cursor` (and a
 * `ticket`, or the key in a header), keeps its cursor as the terminal does (a `0x00` frame sets
 * it; each text frame adds its length) and reconnects from it.
 */
class WebTerminal {
  cursor: number;
  /** Every text frame, in order, across connections. */
  text = "";
  /** Per connection: what came, in order ("cursor:N" for a cursor frame, "text" for text). */
  frames: string[][] = [];
  closes: { code: number; reason: string }[] = [];
  private ws: WebSocket | undefined;
  private closed: Promise<void> = Promise.resolve();

  constructor(
    private readonly baseUrl: string,
    readonly id: string,
    seek = 0,
    private readonly auth: { header?: string; ticket?: () => Promise<string> } = {},
  ) {
    this.cursor = seek;
  }

  async open(seek = this.cursor): Promise<void> {
    const ticket = this.auth.ticket ? await this.auth.ticket() : undefined;
    // The SDK's own URL builder, on the base URL the SDK was given.
    const url = createClient({ baseUrl: this.baseUrl }).buildUrl({
      baseUrl: this.baseUrl,
      url: "/pty/{ptyID}/connect",
      path: { ptyID: this.id },
      query: { directory: "/workspace", cursor: String(seek), ...(ticket ? { ticket } : {}) },
    });
    const ws = new WebSocket(url.replace(/^http/, "ws"), { headers: this.auth.header ? { authorization: this.auth.header } : {} });
    sockets.add(ws);
    this.ws = ws;
    const frames: string[] = [];
    this.frames.push(frames);
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        if (data[0] !== 0) return;
        const meta = JSON.parse(data.subarray(1).toString("utf8")) as { cursor: number };
        this.cursor = meta.cursor;
        frames.push(`cursor:${meta.cursor}`);
        return;
      }
      const text = data.toString("utf8");
      this.text += text;
      this.cursor += text.length;
      frames.push("text");
    });
    this.closed = new Promise((resolve) => ws.on("close", (code, reason) => (this.closes.push({ code, reason: reason.toString() }), resolve())));
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
      ws.once("close", () => resolve());
    });
  }

  type(data: string | Buffer): void {
    this.ws?.send(data);
  }

  /** The cursor and the text shown up to it, taken together (output may still be arriving). */
  snapshot(): { cursor: number; shown: string } {
    return { cursor: this.cursor, shown: this.shown };
  }

  /** The text shown, NULs (the padding) left out. */
  get shown(): string {
    return this.text.replaceAll("\0", "");
  }

  waitFor(needle: string, ms = 20_000): Promise<boolean> {
    return until(() => this.shown.includes(needle), ms, `"${needle}" on ${this.id}`);
  }

  /** Drops the connection as a network would (no close frame) and waits for it to be gone. */
  async drop(): Promise<void> {
    this.ws?.terminate();
    await this.closed;
  }

  async waitClose(ms = 20_000): Promise<{ code: number; reason: string }> {
    await Promise.race([this.closed, new Promise((_, reject) => setTimeout(() => reject(new Error("no close")), ms))]);
    return this.closes[this.closes.length - 1];
  }
}

/** The session's output bytes [0, end) through /v1, decoded as the text frames carry it. */
async function v1Text(api: Api, id: string, end: number): Promise<{ text: string; bytes: number }> {
  const out = await fetchOutput(api, id, 0);
  if (out.bytes.byteLength < end) throw new Error(`/v1 holds ${out.bytes.byteLength} bytes of ${id}, not yet ${end}`);
  const bytes = out.bytes.subarray(0, end);
  return { text: new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes), bytes: bytes.byteLength };
}

describe("the pty methods of @opencode-ai/sdk", () => {
  const oc = opencode(suite.url, bearer(TENANTS.acme));

  it("creates, gets, lists, retitles and resizes, types and removes; the PTY is a /v1 session", async () => {
    const created = await oc.pty.create({ ...BASH, title: "build" });
    expect(created.response.status).toBe(200);
    const pty = ok(created);
    suite.purgeLater(pty.id);
    expect(pty).toMatchObject({ title: "build", command: "/bin/bash", args: BASH.args, cwd: ".", status: "running" });

    const term = new WebTerminal(ocBase, pty.id, 0, { header: bearer(TENANTS.acme) });
    await term.open();
    await term.waitFor("$ ");
    const got = ok(await oc.pty.get({ ptyID: pty.id }));
    expect(got).toMatchObject({ id: pty.id, status: "running", title: "build" });
    expect(got.pid).toBeGreaterThan(0);
    expect(ok(await oc.pty.list()).map((p) => p.id)).toContain(pty.id);

    const updated = await oc.pty.update({ ptyID: pty.id, title: "renamed", size: { rows: 33, cols: 101 } });
    expect(updated.data).toMatchObject({ id: pty.id, title: "renamed" });
    const marker = randomBytes(4).toString("hex");
    term.type(`stty size; echo ${marker}-$((6*7))\r`);
    await term.waitFor(`${marker}-42`);
    expect(term.shown).toContain(`33 101\r\n${marker}-42\r\n`);

    // Exactly what /v1 holds, and the cursor is its byte offset.
    const seen = term.snapshot();
    const v1 = await v1Text(suite.api, pty.id, seen.cursor);
    expect(v1.bytes).toBe(seen.cursor);
    expect(seen.shown).toBe(v1.text);
    // One cursor frame: where the replay met live output.
    expect(term.frames[0].filter((f) => f.startsWith("cursor:"))).toHaveLength(1);
    expect(await suite.api.get(pty.id)).toMatchObject({ label: "renamed", cols: 101, rows: 33, status: "running" });
    const listed = await suite.api.request<{ sessions: { id: string }[] }>("GET", "/v1/sessions?status=running&limit=1000");
    expect(listed.body.sessions.map((x) => x.id)).toContain(pty.id);
    const viaV1 = suite.connect(pty.id, { query: "from=0" });
    await viaV1.waitForOutput(`${marker}-42\r\n`);
    // The prompt after the marker may still be on its way to this client: wait for the cursor.
    await until(() => viaV1.output.byteLength >= seen.cursor, 20_000, "the /v1 client at the web terminal's cursor");
    expect(viaV1.output.subarray(0, seen.cursor).toString("utf8")).toBe(seen.shown);

    const removed = await oc.pty.remove({ ptyID: pty.id });
    expect(removed.data).toBe(true);
    expect((await term.waitClose()).code).toBe(4404);
    const gone = await oc.pty.get({ ptyID: pty.id });
    expect(gone.response.status).toBe(404);
    expect(gone.error).toMatchObject({ _tag: "PtyNotFoundError", name: "NotFoundError" });
    expect((await suite.api.request("GET", `/v1/sessions/${pty.id}`)).status).toBe(404);
  });

  it("replays from the cursor across dropped connections with nothing missing or repeated, non-ASCII included", async () => {
    const pty = ok(await oc.pty.create(BASH));
    suite.purgeLater(pty.id);
    const term = new WebTerminal(ocBase, pty.id, 0, { ticket: async () => ok(await oc.pty.connectToken({ ptyID: pty.id })).ticket });
    await term.open();
    await term.waitFor("$ ");
    term.type(`for i in $(seq 1 4000); do echo "é€😀 $i"; done; echo all-$((2+3))\r`);
    for (const at of [4_000, 20_000, 45_000]) {
      await until(() => term.cursor >= at || term.shown.includes("all-5"), 20_000, `${at} bytes`);
      await term.drop();
      await term.open(); // from its cursor, as the web terminal reconnects
    }
    await term.waitFor("all-5\r\n");
    await until(() => term.frames[3].some((f) => f.startsWith("cursor:")), 10_000, "the last connection's cursor frame");
    const seen = term.snapshot();
    const v1 = await v1Text(suite.api, pty.id, seen.cursor);
    expect(v1.bytes).toBe(seen.cursor);
    expect(seen.shown).toBe(v1.text);
    expect(seen.shown).toContain("é€😀 4000\r\n");
    // Four connections; a drop may come mid-replay (before that connection's cursor frame).
    expect(term.frames.length).toBe(4);
  });

  it("sends live output only with cursor=-1, and closes 4404 once an exited PTY's output is sent", async () => {
    const script = "printf 'one\\n'; read x; printf 'two %s\\n' \"$x\"; exit 3";
    const pty = ok(await oc.pty.create({ command: "/bin/sh", args: ["-c", script] }));
    suite.purgeLater(pty.id);
    const first = new WebTerminal(ocBase, pty.id, 0, { header: bearer(TENANTS.acme) });
    await first.open();
    await first.waitFor("one\r\n");
    const live = new WebTerminal(ocBase, pty.id, -1, { header: bearer(TENANTS.acme) });
    await live.open();
    await until(() => live.frames[0].length > 0, 10_000, "the cursor frame");
    expect(live.frames[0][0]).toBe(`cursor:${first.cursor}`);
    live.type(Buffer.from("ok\r")); // a binary frame is input too
    await live.waitFor("two ok\r\n");
    expect(live.shown).toBe("ok\r\ntwo ok\r\n");
    for (const term of [first, live]) expect((await term.waitClose()).code).toBe(4404);
    expect((await oc.pty.get({ ptyID: pty.id })).data).toMatchObject({ status: "exited", exitCode: 3 });

    // Connecting to it now: everything from the cursor, then the cursor frame, then 4404.
    const late = new WebTerminal(ocBase, pty.id, 0, { header: basic(TENANTS.acme) });
    await late.open();
    expect((await late.waitClose()).code).toBe(4404);
    expect(late.shown).toBe(first.shown);
    expect(late.frames[0].at(-1)).toBe(`cursor:${first.cursor}`);
    // A cursor past its output: the cursor frame names where the output is, then 4404.
    const ahead = new WebTerminal(ocBase, pty.id, first.cursor + 1000, { header: bearer(TENANTS.acme) });
    await ahead.open();
    expect((await ahead.waitClose()).code).toBe(4404);
    expect(ahead.frames[0]).toEqual([`cursor:${first.cursor}`]);
    const unknown = new WebTerminal(ocBase, "no-such-pty", 0, { header: bearer(TENANTS.acme) });
    await unknown.open();
    expect((await unknown.waitClose()).code).toBe(4404);
    expect(unknown.frames[0]).toEqual([]);
  });

  it("publishes pty.created, pty.updated, pty.exited and pty.deleted on its event stream", async () => {
    const abort = new AbortController();
    const events: { type: string; properties: Record<string, any> }[] = [];
    const { stream } = await oc.event.subscribe(undefined, { signal: abort.signal });
    const reading = (async () => {
      for await (const event of stream) events.push(event as (typeof events)[number]);
    })();
    await until(() => events.some((e) => e.type === "server.connected"), 10_000, "server.connected");
    const pty = ok(await oc.pty.create({ command: "/bin/sh", args: ["-c", "read x; exit 7"], title: "ev" }));
    suite.purgeLater(pty.id);
    await until(async () => (await oc.pty.get({ ptyID: pty.id })).data?.pid, 10_000, "a pid");
    await oc.pty.update({ ptyID: pty.id, size: { rows: 10, cols: 20 } });
    await suite.api.input(pty.id, "x\n");
    await until(() => events.some((e) => e.type === "pty.exited" && e.properties.id === pty.id), 10_000, "pty.exited");
    await oc.pty.remove({ ptyID: pty.id });
    await until(() => events.some((e) => e.type === "pty.deleted" && e.properties.id === pty.id), 10_000, "pty.deleted");
    abort.abort();
    await reading.catch(() => undefined);

    const mine = events.filter((e) => (e.properties.info?.id ?? e.properties.id) === pty.id);
    expect(mine[0]).toMatchObject({ type: "pty.created", properties: { info: { id: pty.id, title: "ev" } } });
    expect(mine.at(-1)).toEqual({ id: expect.any(String), type: "pty.deleted", properties: { id: pty.id } });
    expect(mine.find((e) => e.type === "pty.exited")?.properties).toEqual({ id: pty.id, exitCode: 7 });
    expect(mine.some((e) => e.type === "pty.updated" && e.properties.info.status === "running")).toBe(true);
    expect(mine.map((e) => e.type).indexOf("pty.exited")).toBeLessThan(mine.map((e) => e.type).indexOf("pty.deleted"));
  });

  it("shows a /v1 session as a PTY and connects to it", async () => {
    const s = await suite.session({ command: "/bin/sh", args: ["-c", "echo from-v1-$((3*3)); sleep 30"], label: "v1 made" });
    const listed = ok(await oc.pty.list());
    expect(listed.find((p) => p.id === s.id)).toMatchObject({ title: "v1 made", command: "/bin/sh", status: "running" });
    const term = new WebTerminal(ocBase, s.id, 0, { header: basic(TENANTS.acme) });
    await term.open();
    await term.waitFor("from-v1-9\r\n");
    expect(term.shown).toBe("from-v1-9\r\n");
  });

  it("answers another tenant's key 404, and a missing or wrong key 401", async () => {
    const pty = ok(await oc.pty.create(BASH));
    suite.purgeLater(pty.id);
    const globex = opencode(suite.url, bearer(TENANTS.globex));
    for (const res of [
      await globex.pty.get({ ptyID: pty.id }),
      await globex.pty.update({ ptyID: pty.id, title: "x" }),
      await globex.pty.remove({ ptyID: pty.id }),
      await globex.pty.connectToken({ ptyID: pty.id }),
    ]) {
      expect(res.response.status).toBe(404);
      expect(res.error).toMatchObject({ _tag: "PtyNotFoundError", ptyID: pty.id });
    }
    expect(ok(await globex.pty.list()).map((p) => p.id)).not.toContain(pty.id);
    const theirs = new WebTerminal(ocBase, pty.id, 0, { header: bearer(TENANTS.globex) });
    await theirs.open();
    expect((await theirs.waitClose()).code).toBe(4404);

    for (const client of [opencode(suite.url), opencode(suite.url, bearer("wrong")), opencode(suite.url, basic("wrong"))]) {
      const res = await client.pty.list();
      expect(res.response.status).toBe(401);
      expect(res.response.headers.get("www-authenticate")).toMatch(/^Basic/);
    }
    const anonymous = new WebTerminal(ocBase, pty.id, 0);
    await anonymous.open();
    expect((await anonymous.waitClose()).code).toBe(4001);
    const other = ok(await oc.pty.create(BASH));
    suite.purgeLater(other.id);
    const ticket = ok(await oc.pty.connectToken({ ptyID: other.id }));
    expect(ticket.expires_in).toBe(60);
    const misused = new WebTerminal(ocBase, pty.id, 0, { ticket: async () => ticket.ticket });
    await misused.open();
    expect((await misused.waitClose()).code).toBe(4001);
    expect((await oc.pty.create({ command: "/bin/sh", cwd: "/etc" })).response.status).toBe(400);
    const malformed = await fetch(`${ocBase}/pty`, {
      method: "POST",
      headers: { authorization: bearer(TENANTS.acme), "content-type": "application/json" },
      body: "{",
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ name: "BadRequest", _tag: "InvalidRequestError" });
  });
});

describe("a /v1 viewer link used as an OpenCode ticket", () => {
  const oc = opencode(suite.url, bearer(TENANTS.acme));

  it("reads the output and types nothing", async () => {
    const pty = ok(await oc.pty.create(BASH));
    suite.purgeLater(pty.id);
    const api = new Api(suite.url, TENANTS.acme);
    const minted = await api.request<{ token: string }>("POST", `/v1/sessions/${pty.id}/tokens`, { role: "viewer" });
    const viewer = new WebTerminal(ocBase, pty.id, 0, { ticket: async () => minted.body.token });
    await viewer.open();
    // Its cursor frame: the bridge holds the session's socket, so input would reach it now.
    await until(() => viewer.frames[0]?.some((f) => f.startsWith("cursor:")) === true, 20_000, "the viewer's cursor frame");
    // The attacker types a command, then the owner prints a marker: the marker shows the
    // attacker's line had its chance to arrive first, and the output must not hold it.
    viewer.type("echo PWNED-$((6*7))\r");
    const owner = new WebTerminal(ocBase, pty.id, 0, { header: bearer(TENANTS.acme) });
    await owner.open();
    owner.type("echo MARK-$((6*7))\r");
    await viewer.waitFor("MARK-42");
    await owner.waitFor("MARK-42");
    expect(viewer.shown).not.toContain("PWNED");
    expect(owner.shown).not.toContain("PWNED");
    await viewer.drop();
    await owner.drop();
  });
});

describe("an edge restart", () => {
  const cleanup = new SuiteCleanup();

  it("keeps a PTY made through OpenCode replayed exactly by /v1 and by its socket", async () => {
    const key = "restart-key";
    const runnerToken = secret();
    const tokenSecret = secret();
    const persistTo = cleanup.tempFolder("ptybroker-compat-opencode-");
    const stack = await startSuiteStack(
      { apiKeys: `t:${key}`, runnerToken, tokenSecret, persistTo, redis: true, runners: [{ runnerId: "oc-restart" }] },
      cleanup,
    );
    let oc = opencode(stack.edge.url, bearer(key));
    const pty = ok(await oc.pty.create(BASH));
    const term = new WebTerminal(`${stack.edge.url}/compat/opencode`, pty.id, 0, { header: bearer(key) });
    await term.open();
    await term.waitFor("$ ");
    term.type("printf 'before-%s ü\\n' $((40+2))\r");
    await term.waitFor("before-42 ü\r\n");

    const port = stack.edge.port;
    await stack.edge.stop();
    cleanup.edges.delete(stack.edge);
    const edge = cleanup.edge(await startEdge({ apiKeys: `t:${key}`, runnerToken, tokenSecret, persistTo, port }));
    await term.waitClose();
    const api = new Api(edge.url, key);
    // Once the runner has linked again, /v1 has the output the socket had seen.
    const v1 = await until(
      () => v1Text(api, pty.id, term.cursor).catch(() => undefined),
      30_000,
      "/v1 output after the restart",
    );
    expect(v1.bytes).toBe(term.cursor);
    expect(v1.text).toBe(term.shown);

    // And the socket goes on from its cursor on the restarted edge.
    oc = opencode(edge.url, bearer(key));
    const before = term.shown;
    await until(async () => (await oc.pty.get({ ptyID: pty.id })).data?.status === "running", 30_000, "the pty after the restart");
    await term.open();
    term.type("echo after-$((5*5))\r");
    await term.waitFor("after-25\r\n");
    expect(term.shown.startsWith(before)).toBe(true);
    const seen = term.snapshot();
    const all = await v1Text(api, pty.id, seen.cursor);
    expect(all.text).toBe(seen.shown);
    expect((await oc.pty.remove({ ptyID: pty.id })).data).toBe(true);
  });
});
