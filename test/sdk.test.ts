// The SDK (`client/`) against the real stack, used the way an agent platform uses it.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { type BrokerEvent, type ConnectionState, type Pty, PtyBroker, PtyBrokerError } from "../client/index.js";
import { TENANTS } from "./global-setup.js";
import { fetchOutput, line, onSharedStack, sha256, until } from "./harness.js";
import { startProxy } from "./tcp-proxy.js";

const suite = onSharedStack();
const { url, api, cleanup } = suite;
const broker = new PtyBroker({ url, apiKey: TENANTS.acme });
/** Closed first, before their sessions are purged. */
const ptys: Pty[] = [];
cleanup.first(() => {
  for (const p of ptys) p.close();
});
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

/** Collects a terminal's output as text, with waits driven by its data events. */
function recorder(pty: Pty) {
  const chunks: Uint8Array[] = [];
  const offsets: number[] = [];
  let text = "";
  const decoder = new TextDecoder();
  pty.on("data", (bytes, offset) => {
    chunks.push(bytes.slice());
    offsets.push(offset);
    text += decoder.decode(bytes, { stream: true });
  });
  return {
    get text() {
      return text;
    },
    bytes: () => Buffer.concat(chunks),
    offsets,
    waitFor(pattern: RegExp, deadlineMs = 15_000): Promise<void> {
      if (pattern.test(text)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          off();
          reject(new Error(`timed out waiting for ${pattern}; tail ${JSON.stringify(text.slice(-300))}`));
        }, deadlineMs);
        const off = pty.on("data", () => {
          if (!pattern.test(text)) return;
          clearTimeout(timer);
          off();
          resolve();
        });
      });
    },
  };
}

async function track(pty: Promise<Pty>): Promise<Pty> {
  const p = await pty;
  ptys.push(p);
  suite.purgeLater(p.id);
  return p;
}

describe("SDK", () => {
  it("runs the Daytona example: prompt, answer, resize, stty size, exit code", async () => {
    const pty = await track(broker.create({ cols: 120, rows: 30 }));
    const out = recorder(pty);
    expect(pty.state).toBe("open");
    expect(pty.session).toMatchObject({ id: pty.id, status: "running", cols: 120, rows: 30 });

    await pty.sendInput(
      'printf "Accept terms? (y/n): " && read confirm && if [ "$confirm" = "y" ]; then echo "Accepted"; else echo "Declined"; fi\n',
    );
    await out.waitFor(/Accept terms\? \(y\/n\): $/);
    await pty.sendInput("y\n");
    await out.waitFor(line("Accepted"));
    expect(out.text).not.toMatch(line("Declined"));

    const resized = new Promise((resolve) => pty.on("resize", resolve));
    await pty.resize({ cols: 200, rows: 50 });
    expect(await resized).toEqual({ cols: 200, rows: 50 });
    await pty.sendInput("stty size\n");
    await out.waitFor(line("50 200"));

    await pty.sendInput("exit 3\n");
    // wait() says where output ends: the SDK has every byte below it.
    expect(await pty.wait()).toEqual({ status: "exited", exitCode: 3, signal: null, reason: "exit", offset: pty.offset });
    await until(() => pty.state === "closed", 10_000, "closed after exit");
    // Every byte arrived once, in order: the pieces line up and add up to the session's offset.
    const session = await broker.get(pty.id);
    expect(pty.offset).toBe(session.offset);
    expect(out.bytes().byteLength).toBe(session.offset);
    expect(sha256(out.bytes())).toBe(sha256((await fetchOutput(api, pty.id, 0)).bytes));
  });

  it("signal, kill, token and async iteration", async () => {
    const pty = await track(broker.create({ ...BASH, label: "sdk-iterate" }));
    const seen: Uint8Array[] = [];
    const iterated = (async () => {
      for await (const chunk of pty) seen.push(chunk);
    })();
    // The child prints once it runs in the foreground, so the signal reaches it, not bash.
    await pty.sendInput("bash -c 'echo ready-$((1+1)); sleep 30'; echo after-sleep\n");
    const out = recorder(pty);
    await out.waitFor(line("ready-2"));
    await pty.signal("SIGINT");
    await pty.sendInput("echo $((40+2))-iter\n");
    const viewer = await pty.token("viewer", { ttlSec: 600 });
    const viewerBroker = new PtyBroker({ url, token: viewer });
    expect(viewerBroker.tokenRole()).toBe("viewer");
    const watching = await viewerBroker.connect(pty.id);
    ptys.push(watching);
    expect(watching.readOnly).toBe(true);
    const watched = recorder(watching);
    await watched.waitFor(line("42-iter"));
    await expect(watching.sendInput("echo nope\n")).rejects.toMatchObject({ code: "FORBIDDEN" });

    const killed = await pty.kill();
    expect(killed).toMatchObject({ status: "exited", signal: "SIGHUP" });
    await iterated; // the iterator ends when the session does
    const all = Buffer.concat(seen).toString("utf8");
    expect(all).toMatch(line("42-iter"));
    expect(all).not.toMatch(line("after-sleep"));
    expect(await watching.wait()).toEqual({
      status: "exited",
      exitCode: null,
      signal: "SIGHUP",
      reason: "deleted",
      offset: watching.offset,
    });
  });

  it("typed errors carry the API's code", async () => {
    const missing = await broker.get("no-such-session").catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(PtyBrokerError);
    expect(missing).toMatchObject({ code: "NOT_FOUND", status: 404 });
    await expect(broker.create({ cols: 0 })).rejects.toMatchObject({ code: "INVALID_REQUEST", status: 400 });
    await expect(new PtyBroker({ url, apiKey: "wrong" }).list()).rejects.toMatchObject({ code: "UNAUTHORIZED" });
    await expect(broker.connect("no-such-session")).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(() => new PtyBroker({ url })).toThrow(/apiKey or a token/);
  });

  it("reconnects through forced drops mid-output and loses and duplicates nothing", async () => {
    const proxy = await startProxy(Number(new URL(url).port));
    cleanup.proxy(proxy);
    const viaProxy = new PtyBroker({ url: `http://127.0.0.1:${proxy.port}`, apiKey: TENANTS.acme });
    const pty = await track(viaProxy.create({ ...BASH, reconnect: { baseMs: 50, maxMs: 500 } }));
    const out = recorder(pty);
    const states: ConnectionState[] = [];
    pty.on("state", (s) => states.push(s));

    await pty.sendInput("seq 1 150000; echo seq-done\n");
    // Cut every connection several times while the output streams.
    for (let cut = 0; cut < 6; cut++) {
      const before = pty.offset;
      await until(() => pty.offset > before + 64 * 1024 || /[\r\n]seq-done\r\n/.test(out.text), 20_000, "more output");
      proxy.cutAll();
      await until(() => pty.state === "open" && proxy.connections() > 0, 20_000, "reconnected");
    }
    await out.waitFor(line("seq-done"), 30_000);
    expect(states.filter((s) => s === "reconnecting").length).toBeGreaterThanOrEqual(6);

    // Offsets are contiguous: each chunk starts where the previous one ended.
    const sizes = out.offsets.map((o, i) => (out.offsets[i + 1] ?? pty.offset) - o);
    expect(sizes.every((n) => n > 0)).toBe(true);
    const received = out.bytes();
    const logged = await fetchOutput(api, pty.id, 0);
    expect(received.byteLength).toBe(pty.offset);
    expect(sha256(received)).toBe(sha256(logged.bytes.subarray(0, pty.offset)));
    const expected = `${Array.from({ length: 150000 }, (_, i) => i + 1).join("\r\n")}\r\nseq-done\r\n`;
    expect(received.toString("utf8")).toContain(expected);
  });

  it("resumes by offset on a new connection", async () => {
    const first = await track(broker.create(BASH));
    const a = recorder(first);
    await first.sendInput("echo one-$((1+1))\n");
    await a.waitFor(line("one-2"));
    const resumeAt = first.offset;
    first.close();
    expect(first.state).toBe("closed");

    await api.input(first.id, "echo two-$((2+2))\n");
    const again = await broker.connect(first.id, { from: resumeAt });
    ptys.push(again);
    const b = recorder(again);
    await b.waitFor(line("two-4"));
    expect(b.offsets[0]).toBe(resumeAt);
    // What the client holds is taken first: the prompt after two-4 may still be arriving, and the
    // log read after it holds at least every byte a client was sent (the edge logs before it sends).
    const received = Buffer.concat([a.bytes(), b.bytes()]);
    const logged = await fetchOutput(api, first.id, 0);
    expect(received.toString("utf8")).toBe(logged.bytes.subarray(0, received.byteLength).toString("utf8"));
  });

  it("is the package's `ptybroker/client` export, built, in plain Node", async () => {
    // The built module (npm run build), imported by package name the way a dependent imports it.
    const script = `
      import { PtyBroker } from "ptybroker/client";
      const broker = new PtyBroker({ url: process.env.URL, apiKey: process.env.KEY });
      const pty = await broker.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
      let text = "";
      pty.on("data", (bytes) => { text += new TextDecoder().decode(bytes); });
      await pty.sendInput("echo built-$((2+2))\\n");
      await pty.sendInput("exit 4\\n");
      const exit = await pty.wait();
      console.log(JSON.stringify({ id: pty.id, exit, sawAnswer: /[\\r\\n]built-4\\r\\n/.test(text) }));
    `;
    const { stdout } = await promisify(execFile)("node", ["--input-type=module", "-e", script], {
      env: { ...process.env, URL: url, KEY: TENANTS.acme },
    });
    const result = JSON.parse(stdout);
    suite.purgeLater(result.id);
    expect(result).toMatchObject({ exit: { status: "exited", exitCode: 4, signal: null }, sawAnswer: true });
  });
});

describe("SDK: lifecycle events, paging, update", () => {
  it("events() sees created → exited → deleted in order, and resumes across a dead network without a repeat or a miss", async () => {
    const proxy = await startProxy(Number(new URL(url).port));
    cleanup.proxy(proxy);
    // Only the event stream goes through the proxy; everything else goes straight to the edge.
    // Each request's AbortSignal is kept: aborting it is how fetch closes a request.
    const requests: AbortSignal[] = [];
    const viaProxy = new PtyBroker({
      url: proxy.url,
      apiKey: TENANTS.acme,
      fetch: (input, init) => {
        if (init?.signal) requests.push(init.signal);
        return fetch(input, init);
      },
    });
    const states: ConnectionState[] = [];
    const stream = viaProxy.events({ reconnect: { baseMs: 50, maxMs: 500 }, onState: (s) => states.push(s) });
    const seen: BrokerEvent[] = [];
    let id = "";
    const reading = (async () => {
      for await (const event of stream) {
        seen.push(event);
        if (event.type === "session.deleted" && event.session.id === id) break; // closes the request
      }
    })();
    const mine = () => seen.flatMap((e) => (e.type !== "gap" && e.session.id === id ? [e] : []));
    await until(() => states.includes("open"), 15_000, "the event stream open");

    const session = await broker.createSession({ ...BASH, label: "sdk-events" });
    id = session.id;
    suite.purgeLater(id);
    await until(() => mine().some((e) => e.type === "session.created"), 15_000, "session.created");
    await until(async () => (await api.get(id)).status === "running", 15_000, "the shell running");

    // The network dies: the stream is reset and every redial refused while the session ends
    // and is purged; the events of that time come when the network is back.
    proxy.refuse(true);
    await until(() => states.includes("reconnecting"), 15_000, "the stream noticed the drop");
    await api.input(id, "exit 5\n");
    expect(await broker.wait(id, { timeoutSec: 30 })).toMatchObject({ status: "exited", exitCode: 5, reason: "exit" });
    await api.destroy(id);
    await expect(broker.get(id)).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(mine().map((e) => e.type)).not.toContain("session.exited");
    proxy.refuse(false);
    await reading; // ends at this session's session.deleted

    const types = mine().map((e) => e.type);
    expect(types.filter((t) => t !== "session.updated")).toEqual(["session.created", "session.exited", "session.deleted"]);
    expect(types.slice(1, -2).every((t) => t === "session.updated")).toBe(true);
    expect(mine().find((e) => e.type === "session.exited")?.session).toMatchObject({
      id,
      status: "exited",
      exitCode: 5,
      reason: "exit",
    });
    // Every id once and none missed: the tenant's ids grow by one per event, with no gap.
    expect(seen.filter((e) => e.type === "gap")).toEqual([]);
    const ids = seen.map((e) => (e.type === "gap" ? -1 : e.id));
    expect(ids).toEqual(ids.map((_, i) => ids[0] + i));
    expect(states[0]).toBe("connecting");
    expect(states.at(-1)).toBe("closed");
    expect(states.filter((s) => s === "open").length).toBeGreaterThanOrEqual(2);
    // One request per connection attempt, each closed: the dropped ones on the drop, the last
    // one by the `break`.
    expect(requests.length).toBeGreaterThanOrEqual(2);
    expect(requests.filter((signal) => !signal.aborted)).toEqual([]);
  });

  it("events(): an AbortSignal ends a waiting iterator; a bad key or a session token ends it with the API's error", async () => {
    const stop = new AbortController();
    const states: ConnectionState[] = [];
    const requests: AbortSignal[] = [];
    const watching = new PtyBroker({
      url,
      apiKey: TENANTS.acme,
      fetch: (input, init) => {
        if (init?.signal) requests.push(init.signal);
        return fetch(input, init);
      },
    });
    const stream = watching.events({ signal: stop.signal, onState: (s) => states.push(s) });
    const pending = stream.next();
    await until(() => states.includes("open"), 15_000, "the event stream open");
    stop.abort();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(await stream.next()).toEqual({ done: true, value: undefined });
    expect(states).toEqual(["connecting", "open", "closed"]);
    expect(requests.map((signal) => signal.aborted)).toEqual([true]);

    await expect(new PtyBroker({ url, apiKey: "wrong" }).events().next()).rejects.toMatchObject({
      code: "UNAUTHORIZED",
      status: 401,
    });
    const pty = await track(broker.create(BASH));
    const token = await pty.token("writer", { ttlSec: 60 });
    await expect(new PtyBroker({ url, token }).events().next()).rejects.toMatchObject({ code: "FORBIDDEN", status: 403 });
  });

  it("list() follows nextCursor: 23 tagged sessions in pages of 10, each once, in creation order", async () => {
    const tag = `sdk-page-${process.pid}-${Date.now()}`;
    const created: string[] = [];
    for (let i = 0; i < 23; i++) {
      const s = await broker.createSession({ command: "/bin/true", tags: [tag] });
      created.push(s.id);
      suite.purgeLater(s.id);
    }
    const requests: string[] = [];
    const counting = new PtyBroker({
      url,
      apiKey: TENANTS.acme,
      fetch: (input, init) => {
        requests.push(String(input));
        return fetch(input, init);
      },
    });
    expect((await counting.list({ tag, pageSize: 10 })).map((s) => s.id)).toEqual(created);
    expect(requests.map((r) => new URL(r).searchParams.get("limit"))).toEqual(["10", "10", "10"]);
    expect(requests.map((r) => new URL(r).searchParams.has("cursor"))).toEqual([false, true, true]);

    // The same pages by hand.
    const first = await broker.listPage({ tag, limit: 10 });
    expect(first.sessions.map((s) => s.id)).toEqual(created.slice(0, 10));
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await broker.listPage({ tag, limit: 10, cursor: first.nextCursor ?? undefined });
    expect(second.sessions.map((s) => s.id)).toEqual(created.slice(10, 20));
    const third = await broker.listPage({ tag, limit: 10, cursor: second.nextCursor ?? undefined });
    expect(third).toEqual({ sessions: expect.any(Array), nextCursor: null });
    expect(third.sessions.map((s) => s.id)).toEqual(created.slice(20));
    // And in one page, the default page size of list().
    expect((await broker.list({ tag })).map((s) => s.id)).toEqual(created);
  });

  it("update() changes timers, label and tags; pty.update() keeps pty.session", async () => {
    const pty = await track(broker.create({ ...BASH, label: "before" }));
    const updated = await pty.update({ label: "after", tags: ["sdk-update"], idleTimeoutSec: 600, detachedTimeoutSec: 900 });
    expect(updated).toMatchObject({ id: pty.id, label: "after", tags: ["sdk-update"], idleTimeoutSec: 600, detachedTimeoutSec: 900 });
    expect(pty.session).toEqual(updated);

    const before = Date.now();
    const limited = await broker.update(pty.id, { timeoutSec: 120 });
    const after = Date.now();
    expect(limited.timeoutSec).toBe(120);
    const expiresAt = Date.parse(limited.expiresAt ?? "");
    expect(expiresAt).toBeGreaterThanOrEqual(before + 120_000 - 1000); // the server's clock, to the second
    expect(expiresAt).toBeLessThanOrEqual(after + 120_000 + 1000);
    expect(await broker.update(pty.id, { timeoutSec: 0, label: null })).toMatchObject({ timeoutSec: 0, expiresAt: null, label: null });
    expect(await broker.get(pty.id)).toMatchObject({ label: null, tags: ["sdk-update"], timeoutSec: 0, expiresAt: null });

    const writer = new PtyBroker({ url, token: await pty.token("writer", { ttlSec: 60 }) });
    await expect(writer.update(pty.id, { label: "nope" })).rejects.toMatchObject({ code: "FORBIDDEN", status: 403 });
  });

  it("exec answers exit, streams apart and an id that replays; create({pty: false}) with onStdout, onStderr and closeStdin; recording()", async () => {
    const r = await broker.exec("/bin/sh", { args: ["-c", "tr a-z A-Z; echo oops >&2; exit 3"], stdin: "hello\n" });
    suite.purgeLater(r.id);
    expect(r).toMatchObject({ exitCode: 3, signal: null, stdout: "HELLO\n", stderr: "oops\n", truncated: false, timedOut: false });
    expect((await broker.get(r.id)).pty).toBe(false);
    expect(Buffer.from((await broker.output(r.id, { stream: "stderr" })).bytes).toString()).toBe("oops\n");

    const out: string[] = [];
    const err: string[] = [];
    const p = await track(
      broker.create({
        pty: false,
        command: "/bin/sh",
        args: ["-c", "tr a-z A-Z; echo done >&2"],
        onStdout: (bytes) => out.push(Buffer.from(bytes).toString()),
        onStderr: (bytes) => err.push(Buffer.from(bytes).toString()),
      }),
    );
    await expect(broker.resize(p.id, { cols: 100, rows: 30 })).rejects.toMatchObject({ code: "NOT_A_TTY", status: 409 });
    await p.sendInput("abc\n");
    await p.closeStdin();
    expect(await p.wait()).toMatchObject({ status: "exited", exitCode: 0 });
    expect(out.join("")).toBe("ABC\n");
    expect(err.join("")).toBe("done\n");

    const cast = (await p.recording()).trimEnd().split("\n").map((text) => JSON.parse(text) as unknown);
    expect(cast[0]).toMatchObject({ version: 2, width: 80, height: 24 });
    // o events are the output as the log has it: the two pipes' bytes in the order the runner read them
    const shown = (cast.slice(1) as [number, string, string][]).filter((e) => e[1] === "o").map((e) => e[2]).join("");
    expect(shown).toBe(Buffer.from((await broker.output(p.id)).bytes).toString());
    expect(shown.length).toBe("ABC\ndone\n".length);
  });

  it("pty: false over REST: input with eof (then CONFLICT), closeStdin after close() goes by REST, cols refused, output by stream; an aborted exec rejects", async () => {
    await expect(broker.createSession({ pty: false, command: "/bin/cat", cols: 100 })).rejects.toMatchObject({ code: "INVALID_REQUEST", status: 400 });

    const cat = await broker.createSession({ pty: false, command: "/bin/sh", args: ["-c", "cat; echo bye >&2"] });
    suite.purgeLater(cat.id);
    expect(cat.pty).toBe(false);
    expect(await broker.input(cat.id, "abc", { eof: true })).toMatchObject({ bytes: 3 });
    expect(await broker.wait(cat.id, { timeoutSec: 30 })).toMatchObject({ status: "exited", exitCode: 0 });
    await expect(broker.input(cat.id, "late")).rejects.toMatchObject({ code: expect.stringMatching(/^(CONFLICT|SESSION_EXITED)$/), status: 409 });
    const text = async (stream?: "stdout" | "stderr") => Buffer.from((await broker.output(cat.id, { stream })).bytes).toString();
    expect([await text(), await text("stdout"), await text("stderr")]).toEqual(["abcbye\n", "abc", "bye\n"]);

    // the process outlives the eof: input after it is CONFLICT while it still runs
    const held = await broker.createSession({ pty: false, command: "/bin/sh", args: ["-c", "cat; sleep 30"] });
    suite.purgeLater(held.id);
    await broker.input(held.id, "", { eof: true });
    await expect(broker.input(held.id, "more")).rejects.toMatchObject({ code: "CONFLICT", status: 409 });
    await broker.kill(held.id);

    const out: string[] = [];
    const p = await track(broker.connect((await broker.createSession({ pty: false, command: "/bin/cat" })).id, { onStdout: (b) => out.push(Buffer.from(b).toString()) }));
    await p.sendInput("typed\n");
    await until(() => out.join("") === "typed\n", 15_000, "cat's echo");
    p.close();
    await p.closeStdin(); // detached: POST .../input {eof: true}
    expect(await broker.wait(p.id, { timeoutSec: 30 })).toMatchObject({ status: "exited", exitCode: 0 });
    expect(Buffer.from((await broker.output(p.id)).bytes).toString()).toBe("typed\n");

    const stop = new AbortController();
    const running = broker.exec("/bin/sleep", { args: ["2"], timeoutSec: 5, signal: stop.signal });
    stop.abort(new Error("not waiting"));
    await expect(running).rejects.toThrow("not waiting");
  });
});
