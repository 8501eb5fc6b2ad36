// Input exactly once across the edge's own faults (docs/protocol.md §5 and §7, "Input exactly
// once"): an edge restart while a writer has input not yet acknowledged, and a runner link that
// dies with a writer's frames in it. Each on a stack of its own (Durable Object state in a
// temporary folder, so it survives the restart); the bytes typed into `head -c` are compared with
// the file it wrote, byte for byte.
import WebSocket from "ws";
import { describe, expect, it } from "vitest";
import { type Pty, PtyBroker, type SocketLike } from "../client/index.js";
import { Op, encodeNumberedInput } from "../shared/protocol.js";
import { type Edge, secret, startEdge } from "../scripts/stack.js";
import { Api, SuiteCleanup, startSuiteStack, until } from "./harness.js";
import type { TcpProxy } from "./tcp-proxy.js";

const TENANT = "typist";
const KEY = "input-restart-key";
const runnerToken = secret();
const tokenSecret = secret();
const cleanup = new SuiteCleanup();
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

async function stack(name: string, viaProxy: boolean) {
  const persistTo = cleanup.tempFolder("ptybroker-input-restart-");
  const started = await startSuiteStack(
    { apiKeys: `${TENANT}:${KEY}`, runnerToken, tokenSecret, persistTo, viaProxy, runners: [{ runnerId: `${name}-runner` }] },
    cleanup,
  );
  return {
    edge: started.edge,
    proxy: started.proxy,
    persistTo,
    api: new Api(started.edge.url, KEY),
    runnerBack: () => started.waitForRunner(`${name}-runner`),
  };
}

/** Numbered input frames (0x07) the terminals of this file have sent, resends included. */
let numberedSent = 0;

/** `ws` as a browser's WebSocket (each socket's token minted first), counting what it sends. */
class CountingSocket extends WebSocket {
  override send(data: unknown): void {
    if (data instanceof Uint8Array && data[0] === Op.NumberedInput) numberedSent++;
    super.send(data as Buffer);
  }
}

/** A terminal on `id` at `url`, its output text kept. */
async function attach(url: string, id: string): Promise<{ pty: Pty; text: () => string }> {
  const chunks: Buffer[] = [];
  const broker = new PtyBroker({ url, apiKey: KEY, timeoutMs: 2000, WebSocket: CountingSocket as unknown as new (address: string) => SocketLike });
  const pty = await broker.connect(id, {
    from: 0,
    heartbeatMs: 500,
    reconnect: { baseMs: 50, maxMs: 300 },
    onData: (bytes) => chunks.push(Buffer.from(bytes)),
  });
  cleanup.first(() => pty.close());
  return { pty, text: () => Buffer.concat(chunks).toString("utf8") };
}

/** Starts `head -c bytes > file` in raw mode and waits until the terminal is raw. */
async function headInto(pty: Pty, text: () => string, bytes: number, file: string): Promise<void> {
  await pty.sendInput(`stty raw -echo; echo raw-$((1+1)); head -c ${bytes} > ${file}; stty sane; echo wrote-$?\n`);
  await until(() => text().includes("raw-2"), 10_000, "the terminal in raw mode");
}

async function fileBytes(api: Api, file: string): Promise<Buffer> {
  const res = await api.request<{ stdout: string; exitCode: number }>("POST", "/v1/exec", { command: "base64", args: ["-w0", file] });
  expect(res.status).toBe(200);
  expect(res.body.exitCode).toBe(0);
  return Buffer.from(res.body.stdout, "base64");
}

/** `count` distinct 4-byte words: a byte lost, doubled or moved shows as a word out of place. */
const words = (count: number, from = 0) => Array.from({ length: count }, (_, i) => `w${String(from + i).padStart(3, "0")}`);

describe("input exactly once across edge faults", () => {
  it("an edge restart while a writer has unacknowledged input: no byte lost, none doubled", { timeout: 120_000 }, async () => {
    const { edge: first, api, persistTo, runnerBack } = await stack("restart", false);
    let edge: Edge = first;
    const session = await api.create(BASH);
    cleanup.session(api, session.id);
    const { pty, text } = await attach(edge.url, session.id);
    const all = words(600);
    const typed = all.join("");
    await headInto(pty, text, typed.length, "restart.txt");

    // A word every 2 ms (a fast typist's cadence, not a wait for anything), while the edge stops
    // once 100 words are acknowledged: the last few typed before it are not yet.
    const sent: Promise<void>[] = [];
    let acknowledged = 0;
    const typing = (async () => {
      for (const word of all) {
        sent.push(pty.sendInput(word).then(() => void acknowledged++));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    await until(() => acknowledged >= 100, 10_000, "100 words acknowledged");
    const unacked = pty.pendingInput;
    const port = edge.port;
    await edge.stop();
    cleanup.edges.delete(edge);
    edge = cleanup.edge(await startEdge({ apiKeys: `${TENANT}:${KEY}`, runnerToken, tokenSecret, persistTo, port }));
    await typing;
    await Promise.all(sent);
    await until(() => /wrote-0\r\n/.test(text()), 30_000, "head to have every byte");
    console.log(`input-restart: ${unacked} bytes typed and not acknowledged when the edge stopped`);
    expect(unacked).toBeGreaterThan(0);
    await runnerBack(); // the exec below is placed on it
    expect((await fileBytes(api, "restart.txt")).toString()).toBe(typed);
  });

  it("a runner link that dies with a writer's frames in it, and the writer's resends after them: each byte written once", { timeout: 120_000 }, async () => {
    const { edge, api, proxy } = await stack("link", true);
    const link = proxy as TcpProxy;
    const session = await api.create(BASH);
    cleanup.session(api, session.id);
    const { pty, text } = await attach(edge.url, session.id);
    const all = words(400);
    await headInto(pty, text, all.join("").length, "link.txt");

    const sent = all.slice(0, 100).map((word) => pty.sendInput(word));
    await Promise.all(sent);
    // The runner's link stops delivering without a reset: the edge sends the next frames into it,
    // then, once no acknowledgement came for a second, the writer's copies of them too.
    link.blackhole(true);
    const before = numberedSent;
    for (const word of all.slice(100, 300)) sent.push(pty.sendInput(word));
    await until(() => numberedSent >= before + 2 * 200, 15_000, "the writer to send its unacknowledged words again");
    // The edge keeps both in its ledger and sends both again on the next link: the runner writes one.
    link.blackhole(false);
    for (const word of all.slice(300)) sent.push(pty.sendInput(word));
    await Promise.all(sent);
    await until(() => /wrote-0\r\n/.test(text()), 30_000, "head to have every byte");
    expect((await fileBytes(api, "link.txt")).toString()).toBe(all.join(""));
  });

  it("acknowledgements lost on the runner's link: the writer's resends of written words are dropped", { timeout: 120_000 }, async () => {
    const { edge, api, proxy } = await stack("acks", true);
    const link = proxy as TcpProxy;
    const session = await api.create(BASH);
    cleanup.session(api, session.id);
    const { pty, text } = await attach(edge.url, session.id);
    const all = words(300);
    await headInto(pty, text, all.join("").length, "acks.txt");

    // What the runner sends is lost (acks with it), what the edge sends arrives: the words are
    // written, the writer never hears it and sends them again.
    link.swallow(true);
    const before = numberedSent;
    const sent = all.slice(0, 200).map((word) => pty.sendInput(word));
    await until(() => numberedSent >= before + 2 * 200, 15_000, "the writer to send its unacknowledged words again");
    link.swallow(false);
    link.cutAll(); // the link's stream lost bytes mid-frame: a new one
    for (const word of all.slice(200)) sent.push(pty.sendInput(word));
    await Promise.all(sent);
    await until(() => /wrote-0\r\n/.test(text()), 30_000, "head to have every byte");
    expect((await fileBytes(api, "acks.txt")).toString()).toBe(all.join(""));
  });

  it("a writer's first keys refused while the runner's link is away: the key after them is a hole, not a start", { timeout: 120_000 }, async () => {
    const { edge, api, proxy } = await stack("refused", true);
    const link = proxy as TcpProxy;
    const session = await api.create({}); // the login shell: its commands are listed
    cleanup.session(api, session.id);
    // A writer spoken by hand, frame by frame, as the protocol says (the SDK would also send the
    // refused keys again by its timer, which could hide what the runner does).
    const typed = Buffer.from("echo early-late\r");
    const ws = new WebSocket(`${edge.url.replace(/^http/, "ws")}/v1/sessions/${session.id}/connect?writer=by-hand-writer&inputFrom=0`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    cleanup.first(() => ws.terminate());
    const said: { type: string; offset?: number; resend?: boolean; code?: string }[] = [];
    let output = "";
    ws.on("message", (data: Buffer, binary) => {
      if (binary) output += data.subarray(9).toString("utf8");
      else said.push(JSON.parse(data.toString("utf8")) as (typeof said)[number]);
    });
    await new Promise((resolve) => ws.once("open", resolve));
    ws.send(JSON.stringify({ type: "ack", offset: 0 }));
    await until(() => output.includes("\x1b]133;B\x07"), 15_000, "the first prompt");
    // An empty REST input answers whether the edge has the runner's link now (409 while it does not).
    const linked = async () => (await api.inputRequest(session.id, { data: "" })).status === 202;

    link.refuse(true);
    await until(async () => !(await linked()), 10_000, "the edge to lose the runner's link");
    ws.send(encodeNumberedInput(0, typed.subarray(0, 11))); // "echo early-"
    await until(() => said.find((m) => m.type === "input_refused"), 5_000, "the refusal");
    link.refuse(false);
    await until(linked, 30_000, "the runner's link back");
    ws.send(encodeNumberedInput(11, typed.subarray(11))); // "late\r": the first frame the runner sees
    const ask = await until(() => said.find((m) => m.type === "input_ack" && m.resend), 5_000, "the runner to ask for the hole");
    expect(ask.offset).toBe(0);
    ws.send(encodeNumberedInput(0, typed));
    await until(() => said.some((m) => m.type === "input_ack" && !m.resend && m.offset === typed.byteLength), 5_000, "every byte acknowledged");
    const commands = await api.commandsWhen(session.id);
    expect(commands.map((c) => [c.command, c.exitCode])).toEqual([["echo early-late", 0]]);
  });
});
