// Input exactly once (docs/protocol.md §5, "Input exactly once"), on the real stack through
// test/tcp-proxy.ts: what the SDK types while its link is dead, or is cut, or loses frames, reaches
// the process once and in the order typed. The same repro as the page's (test/input-once-web) and
// the CLI's (test/cli-input-once): keys typed before a silent drop is noticed, then after it.
import fc from "fast-check";
import WebSocket from "ws";
import { describe, expect, it } from "vitest";
import { type Pty, PtyBroker } from "../client/index.js";
import { TENANTS } from "./global-setup.js";
import { type Api, TermClient, onSharedStack, until } from "./harness.js";
import { startProxy, type TcpProxy } from "./tcp-proxy.js";

const suite = onSharedStack();
const { url, api, cleanup } = suite;
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };
/** The end of a prompt drawn by the login shell's integration (OSC 133 B). */
const PROMPT = "\x1b]133;B\x07";

async function proxied(): Promise<TcpProxy> {
  const proxy = await startProxy(Number(new URL(url).port));
  cleanup.proxy(proxy);
  return proxy;
}

/** A terminal on `id` through `proxy`, its output text kept. */
async function attach(proxy: TcpProxy, id: string, options: Parameters<PtyBroker["connect"]>[1] = {}): Promise<{ pty: Pty; text: () => string }> {
  const broker = new PtyBroker({ url: proxy.url, apiKey: TENANTS.acme, timeoutMs: 2000 });
  const chunks: Buffer[] = [];
  const pty = await broker.connect(id, {
    from: 0,
    heartbeatMs: 500,
    reconnect: { baseMs: 50, maxMs: 300 },
    onData: (bytes) => chunks.push(Buffer.from(bytes)),
    ...options,
  });
  cleanup.first(() => pty.close());
  return { pty, text: () => Buffer.concat(chunks).toString("utf8") };
}

/** The file's bytes, read by a one-shot exec in the tenant's workspace. */
async function fileBytes(on: Api, name: string): Promise<Buffer> {
  const res = await on.request<{ stdout: string; exitCode: number; id: string }>("POST", "/v1/exec", { command: "base64", args: ["-w0", name] });
  expect(res.status).toBe(200);
  cleanup.session(on, res.body.id);
  expect(res.body.exitCode).toBe(0);
  return Buffer.from(res.body.stdout, "base64");
}

const KEYS = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:-_=+/()[]{}<>!?@#%^&*~'\"|", "é", "ß", "ж", "中", "文", "🙂", "𝄞", "\r", "\t"];

describe("SDK: what is typed around a silent drop runs once, in order", () => {
  it("keys typed before the drop is noticed and after it: the shell runs exactly `echo sdk-early-late`", async () => {
    const proxy = await proxied();
    const session = await suite.session();
    const { pty, text } = await attach(proxy, session.id);
    await until(() => text().includes(PROMPT), 15_000, "the first prompt");

    proxy.blackhole(true);
    const early = pty.sendInput("echo sdk-early-");
    await until(() => pty.state === "reconnecting", 5_000, "the heartbeat to notice the silence");
    const late = pty.sendInput("late\r");
    expect(pty.pendingInput).toBe("echo sdk-early-late\r".length);
    proxy.blackhole(false);
    await Promise.all([early, late]);
    expect(pty.pendingInput).toBe(0);
    const commands = await api.commandsWhen(session.id);
    expect(commands.map((c) => [c.command, c.exitCode])).toEqual([["echo sdk-early-late", 0]]);
  });
});

describe("SDK: 2,000 random keys through blackholes, resets and lost frames", () => {
  it("the file equals exactly the typed bytes", { timeout: 240_000 }, async () => {
    const seed = Number(process.env.INPUT_SEED ?? Date.now() % 1_000_000);
    console.log(`input-once: seed ${seed} (INPUT_SEED=${seed} repeats this run)`);
    // Each key with what happens before it (a fault, or none) and the pause after it; seeded.
    const FAULTS = ["blackhole", "cut", "swallow"] as const;
    const step = fc.record({
      key: fc.constantFrom(...KEYS),
      pauseMs: fc.oneof({ weight: 7, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.integer({ min: 0, max: 7 }) }),
      faultMs: fc.integer({ min: 200, max: 1500 }),
    });
    const steps = fc.sample(step, { seed, numRuns: 2000 });
    const faultAt = fc.sample(fc.tuple(fc.integer({ min: 50, max: 1950 }), fc.constantFrom(...FAULTS)), { seed: seed + 1, numRuns: 40 });
    // At least 10 faults, at distinct keys: a blackhole (noticed or not), a reset, lost frames.
    const faults = new Map(faultAt.slice(0, 12));
    if (faults.size < 10) throw new Error(`seed ${seed}: only ${faults.size} distinct fault positions`);
    const typed = Buffer.from(steps.map((s) => s.key).join(""), "utf8");
    const file = `input-once-${seed}-${Date.now()}.txt`;

    const proxy = await proxied();
    const session = await suite.session(BASH);
    const { pty, text } = await attach(proxy, session.id);
    await pty.sendInput(`stty raw -echo; echo raw-$((1+1)); head -c ${typed.byteLength} > ${file}; stty sane; echo wrote-$?\n`);
    await until(() => text().includes("raw-2"), 10_000, "the terminal in raw mode");

    const sent: Promise<void>[] = [];
    const ended: Promise<void>[] = [];
    const happened: string[] = [];
    for (const [i, { key, pauseMs, faultMs }] of steps.entries()) {
      const fault = faults.get(i);
      if (fault === "cut") proxy.cutAll();
      if (fault === "blackhole" || fault === "swallow") {
        if (fault === "blackhole") proxy.blackhole(true);
        else proxy.swallow(true);
        ended.push(
          new Promise((resolve) =>
            setTimeout(() => resolve(fault === "blackhole" ? proxy.blackhole(false) : proxy.swallow(false)), faultMs),
          ),
        );
      }
      if (fault) happened.push(`${fault}@${i}`);
      sent.push(pty.sendInput(key));
      // A typist's pauses (not a wait for anything).
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
    console.log(`input-once: faults ${happened.join(" ")}`);
    await Promise.all(ended);
    await Promise.all(sent);
    await until(() => /wrote-0\r\n/.test(text()), 60_000, "head to have every byte");
    const written = await fileBytes(api, file);
    expect(written.byteLength).toBe(typed.byteLength);
    expect(written.equals(typed)).toBe(true);
  });
});

describe("SDK: input that cannot arrive is refused, never resolved", () => {
  it("sendInput past inputQueueBytes rejects at once with the bound; input pending at the exit, and after it, rejects", async () => {
    const proxy = await proxied();
    const session = await suite.session(BASH);
    const { pty, text } = await attach(proxy, session.id, { inputQueueBytes: 16 });
    await pty.sendInput("echo ready\n");
    await until(() => text().includes("ready\r\n"), 10_000, "the shell");
    proxy.blackhole(true);
    const held = pty.sendInput("0123456789");
    await expect(pty.sendInput("abcdefghij")).rejects.toMatchObject({ code: "QUOTA_EXCEEDED", message: expect.stringContaining("bound of 16 bytes") });
    expect(pty.pendingInput).toBe(10);
    proxy.blackhole(false);
    await held;
    // Typed, and the session ends before it is written: rejected with the exit, as is what follows.
    await api.destroy(session.id);
    await expect(pty.wait()).resolves.toMatchObject({ status: "exited" });
    await expect(pty.sendInput("x")).rejects.toMatchObject({ code: "SESSION_EXITED" });
  });

  it("a viewer's numbered frame is refused (FORBIDDEN), and a writer id gives it none; nothing reaches the process", async () => {
    const session = await suite.session(BASH);
    const viewerToken = (await api.request<{ token: string }>("POST", `/v1/sessions/${session.id}/tokens`, { role: "viewer" })).body.token;
    const viewer = new WebSocket(`${url.replace(/^http/, "ws")}/v1/sessions/${session.id}/connect?writer=viewer-writer-id&token=${viewerToken}`);
    cleanup.first(() => viewer.terminate());
    const messages: Record<string, unknown>[] = [];
    viewer.on("message", (data, binary) => {
      if (!binary) messages.push(JSON.parse(String(data)) as Record<string, unknown>);
    });
    await new Promise((resolve) => viewer.once("open", resolve));
    const { encodeNumberedInput } = await import("../shared/protocol.js");
    viewer.send(encodeNumberedInput(0, Buffer.from("echo viewer-typed\n")));
    const refused = await until(() => messages.find((m) => m.type === "error"), 5_000, "the refusal");
    expect(refused).toMatchObject({ code: "FORBIDDEN" });
    // The hello names no writer: a viewer has none.
    expect(messages[0]).toMatchObject({ type: "hello" });
    expect(messages[0]).not.toHaveProperty("input");
    const owner = cleanup.client(new TermClient(url, session.id, TENANTS.acme));
    await owner.opened;
    owner.send("echo owner-\\typed\n");
    await owner.waitForOutput(/owner-typed/);
    expect(owner.text).not.toContain("viewer-typed");
  });

  it("another key's socket with the same writer id neither stops nor speaks for the writer", async () => {
    // The impostor: a second key of the same tenant (it may type into the session; it may not
    // make the writer's own bytes count as already written).
    const minted = await api.request<{ key: string; keyId: string }>("POST", "/v1/keys", { name: "impostor" });
    expect(minted.status).toBe(201);
    cleanup.first(async () => void (await api.request("DELETE", `/v1/keys/${minted.body.keyId}`)));
    const session = await suite.session(BASH);
    const file = `impostor-${Date.now()}.txt`;
    const writerId = "shared-writer-id";
    const socket = async (key: string) => {
      const ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/sessions/${session.id}/connect?writer=${writerId}`, { headers: { authorization: `Bearer ${key}` } });
      cleanup.first(() => ws.terminate());
      const acks: number[] = [];
      ws.on("message", (data, binary) => {
        const message = binary ? undefined : (JSON.parse(String(data)) as { type: string; offset?: number });
        if (message?.type === "input_ack" && message.offset !== undefined) acks.push(message.offset);
      });
      await new Promise((resolve) => ws.once("open", resolve));
      return { ws, acks };
    };
    const { encodeNumberedInput } = await import("../shared/protocol.js");
    const victim = await socket(TENANTS.acme);
    const shell = cleanup.client(new TermClient(url, session.id, TENANTS.acme));
    await shell.opened;
    shell.send(`stty raw -echo; echo raw-$((1+1)); head -c 16 > ${file}; stty sane; echo wrote-$?\n`);
    await shell.waitForOutput("raw-2");
    const impostor = await socket(minted.body.key);
    impostor.ws.send(encodeNumberedInput(0, Buffer.from("XXXX")));
    impostor.ws.send(encodeNumberedInput(4, Buffer.from("YYYY")));
    await until(() => impostor.acks.includes(8), 5_000, "the impostor's bytes written");
    // Under one count, these would be dropped as bytes already written.
    victim.ws.send(encodeNumberedInput(0, Buffer.from("abcd")));
    victim.ws.send(encodeNumberedInput(4, Buffer.from("efgh")));
    await until(() => victim.acks.includes(8), 5_000, "the writer's own bytes acknowledged");
    await shell.waitForOutput("wrote-0");
    expect((await fileBytes(api, file)).toString()).toBe("XXXXYYYYabcdefgh");
  });

  it("two writers typing at once: each one's bytes arrive whole and in its own order", async () => {
    const session = await suite.session(BASH);
    const file = `two-writers-${Date.now()}.txt`;
    const proxy = await proxied();
    const a = await attach(proxy, session.id);
    const b = await attach(proxy, session.id);
    const perWriter = 300;
    const total = 2 * perWriter * 4;
    await a.pty.sendInput(`stty raw -echo; echo raw-$((1+1)); head -c ${total} > ${file}; stty sane; echo wrote-$?\n`);
    await until(() => a.text().includes("raw-2"), 10_000, "the terminal in raw mode");
    const sent: Promise<void>[] = [];
    for (let i = 0; i < perWriter; i++) {
      sent.push(a.pty.sendInput(`a${String(i).padStart(3, "0")}`.slice(0, 4)), b.pty.sendInput(`b${String(i).padStart(3, "0")}`.slice(0, 4)));
      if (i === 100) proxy.cutAll();
    }
    await Promise.all(sent);
    await until(() => /wrote-0\r\n/.test(a.text()), 30_000, "head to have every byte");
    const written = (await fileBytes(api, file)).toString("latin1");
    const words = written.match(/.{4}/g) ?? [];
    expect(words).toHaveLength(2 * perWriter);
    const expected = (w: string) => Array.from({ length: perWriter }, (_, i) => `${w}${String(i).padStart(3, "0")}`);
    expect(words.filter((word) => word.startsWith("a"))).toEqual(expected("a"));
    expect(words.filter((word) => word.startsWith("b"))).toEqual(expected("b"));
  });

  it("REST input with an Idempotency-Key beside a writer's socket: each applied once, the socket's in its order", async () => {
    const session = await suite.session(BASH);
    const file = `rest-and-socket-${Date.now()}.txt`;
    const proxy = await proxied();
    const { pty, text } = await attach(proxy, session.id);
    await pty.sendInput(`stty raw -echo; echo raw-$((1+1)); head -c 12 > ${file}; stty sane; echo wrote-$?\n`);
    await until(() => text().includes("raw-2"), 10_000, "the terminal in raw mode");
    await pty.sendInput("s1s2");
    for (let i = 0; i < 3; i++) await api.inputAt(session.id, "RR", "same-key");
    proxy.cutAll();
    await pty.sendInput("s3s4");
    await api.inputAt(session.id, "QQ", "other-key");
    await until(() => /wrote-0\r\n/.test(text()), 15_000, "head to have 12 bytes");
    expect((await fileBytes(api, file)).toString()).toBe("s1s2RRs3s4QQ");
  });
});
