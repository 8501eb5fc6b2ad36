// The SDK (`client/`) against the real stack, used the way an agent platform uses it.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, describe, expect, inject, it } from "vitest";
import { type ConnectionState, type Pty, PtyBroker, PtyBrokerError } from "../client/index.js";
import { TENANTS } from "./global-setup.js";
import { Api, fetchOutput, line, sha256, until } from "./harness.js";
import { startProxy, type TcpProxy } from "./tcp-proxy.js";

const url = inject("edgeUrl");
const api = new Api(url, TENANTS.acme);
const broker = new PtyBroker({ url, apiKey: TENANTS.acme });
const ptys: Pty[] = [];
const sessions: string[] = [];
const proxies: TcpProxy[] = [];
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
  sessions.push(p.id);
  return p;
}

afterAll(async () => {
  for (const p of ptys) p.close();
  await Promise.all(sessions.map((id) => api.destroy(id)));
  await Promise.all(proxies.map((p) => p.close()));
});

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
    expect(await pty.wait()).toEqual({ status: "exited", exitCode: 3, signal: null, offset: pty.offset });
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
    expect(await watching.wait()).toEqual({ status: "exited", exitCode: null, signal: "SIGHUP", offset: watching.offset });
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
    proxies.push(proxy);
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
    const logged = await fetchOutput(api, first.id, 0);
    expect(Buffer.concat([a.bytes(), b.bytes()]).toString("utf8")).toBe(
      logged.bytes.subarray(0, again.offset).toString("utf8"),
    );
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
    sessions.push(result.id);
    expect(result).toMatchObject({ exit: { status: "exited", exitCode: 4, signal: null }, sawAnswer: true });
  });
});
