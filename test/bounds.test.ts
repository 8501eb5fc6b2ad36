// Every queue a client can fill is bounded (docs/security.md), attacked end to end on a stack of
// its own with small limits: lying acks, clients that never ack or never read (framed and raw),
// slots held by cut or idle clients, concurrent output reads, and input to a process that does
// not read.
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { descendantsNamed } from "../bench/proc.js";
import type { Edge, ManagedProcess } from "../scripts/stack.js";
import { Api, SuiteCleanup, TermClient, line, startSuiteStack, until } from "./harness.js";

const KEY = "bounds-key";
/**
 * 512 KiB, small so that the raw flood below stays short: the flood is 200 times it (100 MB, as
 * 200 MB was against 1 MiB) and still half again workerd's 64 MiB bound, so holding it would show.
 */
const LAG = 1 << 19;
/** The default, as the issue measured it: 32 clients, one slot kept for the owner. */
const MAX_CLIENTS = 32;
const STALL_MS = 1500;
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

const cleanup = new SuiteCleanup();
let edge: Edge;
let runner: ManagedProcess;
let api: Api;

beforeAll(async () => {
  const stack = await startSuiteStack(
    {
      apiKeys: `bounded:${KEY}`,
      vars: {
        MAX_CLIENTS_PER_SESSION: String(MAX_CLIENTS),
        MAX_CLIENT_LAG_BYTES: String(LAG),
        CLIENT_STALL_MS: String(STALL_MS),
        MAX_OUTPUT_READS: "2",
      },
      redis: true,
      runners: [{ runnerId: "bounds-runner", env: { OUTPUT_RETAIN_BYTES: String(16 << 20) } }],
    },
    cleanup,
  );
  edge = stack.edge;
  [runner] = stack.runners;
  api = new Api(edge.url, KEY);
});

function connect(id: string, key: string, options: { query?: string; ack?: boolean } = {}): TermClient {
  return cleanup.client(new TermClient(edge.url, id, key, options));
}

async function viewerToken(id: string): Promise<string> {
  const res = await api.request("POST", `/v1/sessions/${id}/tokens`, { role: "viewer" });
  return res.body.token as string;
}

/** Resolves with the outcome of a connect attempt: accepted (hello) or refused (error + close). */
async function attempt(id: string, key: string): Promise<{ accepted: boolean; client: TermClient }> {
  const client = connect(id, key);
  await client.waitFor(
    () => client.messages.some((m) => m.type === "hello" || m.type === "error") || client.closeCode !== undefined,
    "hello or a refusal",
  );
  return { accepted: client.messages.some((m) => m.type === "hello"), client };
}

/** RSS of the edge's workerd processes (wrangler dev runs them as children of its own). */
function workerdRss(): number {
  return descendantsNamed(edge.pid, "workerd").reduce((sum, pid) => sum + rssBytes(pid), 0);
}

function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) * 1024;
}

describe("bounds", () => {
  it("refuses an ack beyond what was sent: error, then close 1008", async () => {
    const s = await api.create(BASH);
    const client = connect(s.id, KEY);
    await client.waitForMessage((m) => m.type === "live", "live");
    client.send("echo acked-$((1+1))\n");
    await client.waitForOutput(line("acked-2"));
    client.control({ type: "ack", offset: (client.nextOffset ?? 0) + 1_000_000 });
    const error = await client.waitForMessage((m) => m.type === "error", "an error");
    expect(error).toMatchObject({ code: "INVALID_REQUEST" });
    expect(error.message).toMatch(/beyond what was sent/);
    expect(await client.waitForClose()).toBe(1008);
    await api.destroy(s.id);
  });

  it("keeps a slot for the owner, and frees the slots of clients that never ack while behind", async () => {
    const s = await api.create(BASH);
    const token = await viewerToken(s.id);
    // Viewers that never send anything, not even the first ack, in every slot but the owner's.
    const silent = Array.from({ length: MAX_CLIENTS - 1 }, () => connect(s.id, token, { ack: false }));
    await Promise.all(silent.map((c) => c.waitForMessage((m) => m.type === "hello", "hello")));
    const fourth = await attempt(s.id, token);
    expect(fourth.accepted).toBe(false);
    expect(fourth.client.messages.find((m) => m.type === "error")).toMatchObject({ code: "QUOTA_EXCEEDED" });
    expect(await fourth.client.waitForClose()).toBe(1013);
    // The owner's key still gets in.
    const owner = connect(s.id, KEY);
    await owner.waitForMessage((m) => m.type === "live", "the owner's live");

    // Output leaves the silent viewers behind; once they have been silent for CLIENT_STALL_MS, a
    // new viewer's connect frees their slots.
    owner.send("seq 1 3000; echo behind-$((2*3))\n");
    await Promise.all(silent.map((c) => c.waitForOutput(line("behind-6"))));
    const admitted = await until(
      async () => {
        const next = await attempt(s.id, token);
        return next.accepted ? next.client : undefined;
      },
      STALL_MS + 10_000,
      "a new viewer to be admitted",
    );
    await admitted.waitForMessage((m) => m.type === "live", "the new viewer's live");
    // A slot was needed for one; the rest are cut when output reaches them once they too have
    // been silent for CLIENT_STALL_MS: output now and then until only the owner and the new
    // viewer hold slots.
    let tick = 0;
    await until(
      async () => {
        owner.send(`echo tick-$((${++tick}+0))\n`);
        await admitted.waitForOutput(line(`tick-${tick}`));
        return (await api.get(s.id)).clients === 2;
      },
      STALL_MS + 10_000,
      "the silent viewers' slots to be freed",
    );
    // (A socket that never sent a frame hears its close late under wrangler dev: docs/protocol.md §5.)
    expect(await Promise.all(silent.map((c) => c.waitForClose(30_000)))).toEqual(silent.map(() => 4008));
    await api.destroy(s.id);
  });

  it("frees the slots of 32 clients cut with 4008 while paused: a new client is in within a second", async () => {
    const s = await api.create(BASH);
    const paused = Array.from({ length: MAX_CLIENTS }, () => connect(s.id, KEY));
    await Promise.all(paused.map((c) => c.waitForMessage((m) => m.type === "live", "live")));
    for (const c of paused) c.socket.pause(); // they stop reading: the close frame never reaches them
    await api.input(s.id, "head -c 4000000 /dev/urandom | base64; echo flood-$((4*4))\n");
    const cutAt = await until(
      async () => ((await api.get(s.id)).clients === 0 ? Date.now() : undefined),
      30_000,
      "every paused client to be cut",
    );
    const next = connect(s.id, KEY);
    await next.waitForMessage((m) => m.type === "hello", "hello within a second of the cuts", 1000);
    expect(Date.now() - cutAt).toBeLessThan(1000);
    expect(next.messages.filter((m) => m.type === "error")).toEqual([]);
    for (const c of paused) c.socket.terminate();
    await api.destroy(s.id);
  });

  it("gives a client restored from hibernation every byte of the output that woke the object", async () => {
    const s = await api.create(BASH);
    const client = connect(s.id, KEY);
    await client.waitForMessage((m) => m.type === "live", "live");
    // Idle past workerd's hibernation timeout (about 10 s), then output wakes the object; once
    // the edge says it restored the client from its attachment, the wake-up has been exercised.
    let round = 0;
    while (!edge.output().includes('"event":"client.restored"')) {
      if (++round > 4) throw new Error("the session object never hibernated");
      await new Promise((r) => setTimeout(r, 11_000)); // idle time is the scenario, not a wait for a result
      await api.input(s.id, `echo woke-$((${round}+10))\n`);
      await client.waitForOutput(line(`woke-${round + 10}`));
    }
    expect(client.offsetErrors).toEqual([]);
    await until(async () => (await api.get(s.id)).offset === client.nextOffset, 5000, "every byte at the client");
    await api.destroy(s.id);
  }, 90_000);

  it("answers 20 concurrent 8 MiB output reads with 200 or 429, and the session stays up", async () => {
    const s = await api.create(BASH);
    await api.input(s.id, "head -c 6400000 /dev/urandom | base64; echo big-$((5*5))\n");
    await until(async () => (await api.get(s.id)).offset > 8_600_000, 60_000, "8.6 MB of output");
    const answers = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await fetch(`${edge.url}/v1/sessions/${s.id}/output?from=0`, {
          headers: { authorization: `Bearer ${KEY}` },
        });
        const bytes = (await res.arrayBuffer()).byteLength;
        return { status: res.status, bytes, retryAfter: res.headers.get("retry-after") };
      }),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((status) => status === 200 || status === 429)).toBe(true);
    expect(statuses).toContain(429);
    expect(answers.filter((a) => a.status === 429).every((a) => a.retryAfter === "1")).toBe(true);
    expect(answers.filter((a) => a.status === 200).every((a) => a.bytes === 8 << 20)).toBe(true);
    // Still answering, and still running.
    const client = connect(s.id, KEY, { query: "from=live" });
    await client.waitForMessage((m) => m.type === "live", "live");
    client.send("echo up-$((3+4))\n");
    await client.waitForOutput(line("up-7"));
    console.info("output reads", JSON.stringify(statuses));
    await api.destroy(s.id);
  });

  it("cuts a raw client that does not read a 100 MB flood (200 × its lag bound): workerd does not hold the flood", { timeout: 120_000 }, async () => {
    const s = await api.create({
      command: "/bin/sh",
      args: ["-c", "sleep 0.5; head -c 75000000 /dev/zero | base64; echo raw-flood-done"],
    });
    const raw = connect(s.id, KEY, { query: "mode=raw" });
    await raw.opened;
    raw.socket.pause();
    const workerdBefore = workerdRss();
    let workerdPeak = workerdBefore;
    const sampler = setInterval(() => {
      workerdPeak = Math.max(workerdPeak, workerdRss());
    }, 250);
    const waited = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=100`);
    clearInterval(sampler);
    expect(waited.body).toMatchObject({ status: "exited", exitCode: 0 });
    expect(waited.body.offset).toBeGreaterThan(100_000_000);
    raw.socket.resume();
    expect(await raw.waitForClose(20_000)).toBe(4008);
    // It got at most its budget (twice MAX_CLIENT_LAG_BYTES) and the frame that passed it, and
    // workerd held no more than that for it (the issue measured 89 → 274 MB before).
    expect(raw.output.byteLength).toBeLessThanOrEqual(2 * LAG + 256 * 1024);
    console.info(
      "raw flood",
      JSON.stringify({ workerdBeforeMiB: workerdBefore >> 20, workerdPeakMiB: workerdPeak >> 20, got: raw.output.byteLength }),
    );
    expect(workerdPeak - workerdBefore).toBeLessThan(64 * 2 ** 20);
    await api.destroy(s.id);
  });

  it("bounds input to a process that does not read: 50 MB in, runner RSS grows < 32 MiB, REST says 429", async () => {
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile", "-c", "stty raw -echo; echo ready; sleep 120"] });
    const client = connect(s.id, KEY);
    await client.waitForOutput("ready");
    const before = rssBytes(runner.pid);
    const piece = Buffer.alloc(64 * 1024, 0x61);
    for (let sent = 0; sent < 50_000_000; sent += piece.byteLength) client.send(piece);
    // Every frame is answered or applied: the refused ones each get an error.
    await client.waitFor(() => client.messages.some((m) => m.type === "error" && m.code === "QUOTA_EXCEEDED"), "input refused", 30_000);
    const rest = await api.request("POST", `/v1/sessions/${s.id}/input`, { data: "more" });
    expect(rest.status).toBe(429);
    expect(rest.headers.get("retry-after")).toBe("1");
    // A barrier: the object handles a client's messages in order, so once this resize comes
    // back, every input frame before it has been applied or refused.
    client.control({ type: "resize", cols: 81, rows: 25 });
    await client.waitForMessage((m) => m.type === "resize" && m.cols === 81, "the resize after the input", 60_000);
    const grown = rssBytes(runner.pid) - before;
    console.info("input bound", JSON.stringify({ grownMiB: +(grown / 2 ** 20).toFixed(1), errors: client.messages.length }));
    expect(grown).toBeLessThan(32 * 2 ** 20);
    expect((await api.get(s.id)).status).toBe("running");
    await api.destroy(s.id);
  });
});
