// Resilience: a session survives its runner's links being cut mid-output, an edge restart
// mid-output and a Redis restart, with clients receiving exactly the bytes produced; a runner
// that dies leaves its session `lost`, its output replayable by any other runner, and no
// processes behind. A scenario that restarts or kills a part of its stack starts its own edge
// (Durable Object state in a temporary folder, so it survives an edge restart), Redis and
// runner(s); the three that only fault the links (cut, swallow, refuse) share one, each reading
// the logs from its own start. All are stopped by PID.
import { describe, expect, it, onTestFailed, onTestFinished } from "vitest";
import { type Edge, type ManagedProcess, secret, startEdge, startRunner } from "../scripts/stack.js";
import {
  Api,
  SuiteCleanup,
  TermClient,
  fetchOutput,
  line,
  listRunners,
  liveSessionProcesses,
  sha256,
  startSuiteStack,
  until,
} from "./harness.js";
import type { RedisServer } from "./redis-server.js";
import type { TcpProxy } from "./tcp-proxy.js";

const TENANT = "resilient";
const KEY = "resilience-key";
const runnerToken = secret();
const tokenSecret = secret();

// Everything this file starts, stopped after it (a scenario that fails midway leaves its
// processes there too), and the PTY processes of sessions whose runner was SIGKILLed.
const cleanup = new SuiteCleanup();

interface Stack {
  edge: Edge;
  api: Api;
  redis: RedisServer;
  runner: ManagedProcess;
  proxy: TcpProxy | undefined;
  /** Between the runner and Redis, when asked for. */
  redisProxy: TcpProxy | undefined;
  persistTo: string;
  vars: Record<string, string> | undefined;
}

function edgeOptions(persistTo: string, vars: Record<string, string> | undefined, port?: number) {
  return { apiKeys: `${TENANT}:${KEY}`, runnerToken, tokenSecret, persistTo, vars, port };
}

async function launchEdge(persistTo: string, vars: Record<string, string> | undefined, port?: number): Promise<Edge> {
  return cleanup.edge(await startEdge(edgeOptions(persistTo, vars, port)));
}

async function stopEdge(edge: Edge): Promise<void> {
  await edge.stop();
  cleanup.edges.delete(edge);
}

function launchRunner(brokerUrl: string, redisUrl: string, runnerId: string): ManagedProcess {
  return cleanup.runner(startRunner({ brokerUrl, runnerToken, runnerId, env: { REDIS_URL: redisUrl } }));
}

async function waitForRunner(edge: Edge, runnerId: string): Promise<void> {
  await until(
    async () => (await listRunners(edge.url, runnerToken)).some((r) => r.runnerId === runnerId),
    30_000,
    `runner ${runnerId}`,
  );
}

/** An edge with its own Durable Object storage, a Redis, and one runner (through a proxy if asked). */
async function startStack(
  name: string,
  options: { vars?: Record<string, string>; viaProxy?: boolean; redisViaProxy?: boolean } = {},
) {
  const persistTo = cleanup.tempFolder("ptybroker-resilience-");
  const started = await startSuiteStack(
    {
      apiKeys: `${TENANT}:${KEY}`,
      runnerToken,
      tokenSecret,
      persistTo,
      vars: options.vars,
      redis: true,
      viaProxy: options.viaProxy,
      redisViaProxy: options.redisViaProxy,
      runners: [{ runnerId: `${name}-runner` }],
    },
    cleanup,
  );
  const stack: Stack = {
    edge: started.edge,
    api: new Api(started.edge.url, KEY),
    redis: started.redis,
    runner: started.runners[0],
    proxy: started.proxy,
    redisProxy: started.redisProxy,
    persistTo,
    vars: options.vars,
  };
  return stack;
}

let linkFaults: Promise<Stack> | undefined;

/**
 * The stack of the scenarios that only cut, swallow or refuse its links through its proxies (to
 * the edge and to Redis), and leave them open again: nothing in it restarts, so it is started
 * once, by the first of them, and stopped after the file.
 */
function linkFaultStack(): Promise<Stack> {
  linkFaults ??= startStack("links", { viaProxy: true, redisViaProxy: true });
  return linkFaults;
}

/** What `proc` prints from now until the test ends (its `output()` also holds earlier scenarios'). */
function logFromNow(proc: ManagedProcess): () => string {
  let text = "";
  const keep = (chunk: Buffer) => {
    text += chunk.toString("utf8");
  };
  proc.child.stdout?.on("data", keep);
  proc.child.stderr?.on("data", keep);
  onTestFinished(() => {
    proc.child.stdout?.off("data", keep);
    proc.child.stderr?.off("data", keep);
  });
  return () => text;
}

/** On failure, the tail of what the processes printed: the evidence for a diagnosis. */
function dumpOnFailure(what: () => Record<string, ManagedProcess | undefined>): void {
  onTestFailed(() => {
    for (const [name, proc] of Object.entries(what())) {
      if (proc) console.error(`---- ${name} (pid ${proc.pid}) ----\n${proc.output().slice(-6000)}`);
    }
  });
}

/** `seq from to` as a PTY prints it: every \n becomes \r\n. */
function seqOutput(from: number, to: number): Buffer {
  const lines: string[] = [];
  for (let i = from; i <= to; i++) lines.push(`${i}\r\n`);
  return Buffer.from(lines.join(""));
}

/**
 * Sends a ping and waits for the pong. Under wrangler dev, a socket that never sent a frame
 * sees its `close` event about 10 s after the server's close frame (docs/protocol.md §5).
 */
async function pinged(client: TermClient): Promise<void> {
  await client.opened;
  client.control({ type: "ping" });
  await client.waitForMessage((m) => m.type === "pong", "pong", 5000);
}

/** `seq 1 400000` in 400 steps 20 ms apart (~3 MB over ~10 s): output before, during and after a fault. */
const PACED_SEQ =
  "sleep 0.3; i=0; while [ $i -lt 400 ]; do seq $((i*1000+1)) $((i*1000+1000)); i=$((i+1)); sleep 0.02; done; echo seq-done";

/** A session running PACED_SEQ, a framed client on it from offset 0, and the bytes it must print. */
async function pacedSession(api: Api, edge: Edge) {
  const expected = Buffer.concat([seqOutput(1, 400000), Buffer.from("seq-done\r\n")]);
  const s = await api.create({ command: "/bin/sh", args: ["-c", PACED_SEQ] });
  const client = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
  await client.opened;
  return { expected, s, client };
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/**
 * A framed client that reconnects by itself whenever its socket closes (other than after the
 * session's `exit`), from the offset it has reached, and pieces the output together.
 */
class ResumingClient {
  private readonly pieces: Buffer[] = [];
  private cursor: number;
  current: TermClient | undefined;
  /** Close codes of connections that were open and ended without `exit`. */
  readonly interruptions: number[] = [];
  readonly offsetErrors: string[] = [];
  readonly gaps: unknown[] = [];
  /** `error` messages, each with the close code that followed it. */
  readonly errors: { message: any; close: number }[] = [];
  exit: any;
  finalClose: number | undefined;
  attempts = 0;
  readonly done: Promise<void>;
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly id: string,
    from: number,
    deadlineMs: number,
  ) {
    this.cursor = from;
    this.done = this.run(deadlineMs);
    this.done.catch(() => {}); // awaited by the test; never an unhandled rejection
  }

  /** Offset of the next byte: everything below it has arrived. */
  get offset(): number {
    return this.current?.nextOffset ?? this.cursor;
  }

  get output(): Buffer {
    return Buffer.concat(this.pieces);
  }

  stop(): void {
    this.stopped = true;
    this.current?.socket.terminate();
  }

  private async run(deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    while (!this.stopped) {
      this.attempts++;
      const client = new TermClient(this.url, this.id, KEY, { query: `from=${this.cursor}` });
      this.current = client;
      let opened = false;
      client.opened.then(
        () => {
          opened = true;
          // A socket that has sent nothing sees the server's close late (docs/protocol.md §5).
          if (client.socket.readyState === client.socket.OPEN) client.control({ type: "ping" });
        },
        () => {},
      );
      const code = await client.closed;
      this.offsetErrors.push(...client.offsetErrors);
      if (client.startOffset !== undefined && client.startOffset !== this.cursor) {
        this.offsetErrors.push(`resumed from ${this.cursor} but the first frame was at ${client.startOffset}`);
      }
      this.gaps.push(...client.messages.filter((m) => m.type === "gap"));
      for (const message of client.messages.filter((m) => m.type === "error")) this.errors.push({ message, close: code });
      this.pieces.push(client.output);
      this.cursor = client.nextOffset ?? this.cursor;
      const exit = client.messages.find((m) => m.type === "exit");
      if (exit) {
        this.exit = exit;
        this.finalClose = code;
        return;
      }
      if (opened) this.interruptions.push(code);
      if (this.stopped) return;
      if (Date.now() > deadline) throw new Error(`no exit within ${deadlineMs} ms (at offset ${this.cursor})`);
      // Refused, or closed before any byte (the edge is down, or up without a runner yet): try
      // again shortly, as a client's redial would (not a synchronisation point).
      if (!opened || client.nextOffset === undefined) await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe("resilience", () => {
  it("loses and repeats nothing when the runner's links are cut several times mid-output", async () => {
    const stack = await linkFaultStack();
    const runnerLog = logFromNow(stack.runner);
    dumpOnFailure(() => ({ runner: stack.runner, edge: stack.edge }));
    const { api, edge } = stack;
    const proxy = stack.proxy as TcpProxy;
    const expected = Buffer.concat([seqOutput(1, 300000), Buffer.from("seq-done\r\n")]);

    const s = await api.create({ command: "/bin/sh", args: ["-c", "sleep 0.3; seq 1 300000; echo seq-done"] });
    expect(s.status).toBe("running");
    // The client talks to the edge directly; only the runner's sockets go through the proxy.
    const client = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    await client.opened;

    // Cut every runner connection (control and link) when the client has got this far.
    const thresholds = [150_000, 450_000, 750_000, 1_050_000].map((t) => t + Math.floor(Math.random() * 50_000));
    const cuts: { at: number; connections: number; status: string; offset: number }[] = [];
    let edgeHadAtCut = 0;
    for (const threshold of thresholds) {
      // Past the threshold, and past what the edge held at the previous cut: the bytes came
      // through a link dialled after that cut.
      const at = Math.max(threshold, edgeHadAtCut + 1);
      await client.waitFor(() => (client.nextOffset ?? 0) >= at, `${at} bytes before cut ${cuts.length + 1}`, 20_000);
      const connections = proxy.connections();
      proxy.cutAll();
      const now = await api.get(s.id);
      cuts.push({ at: client.nextOffset ?? 0, connections, status: now.status, offset: now.offset });
      edgeHadAtCut = now.offset;
      // Still running (or, if the client lags, already exited with everything): never lost.
      const state = { status: now.status, complete: now.offset === expected.byteLength };
      if (state.status !== "running") expect(state).toEqual({ status: "exited", complete: true });
    }

    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 40_000);
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: expected.byteLength });
    expect(await client.waitForClose(15_000)).toBe(4010);
    expect(client.offsetErrors).toEqual([]);
    expect(client.messages.filter((m) => m.type === "gap" || m.type === "error")).toEqual([]);
    expect(client.startOffset).toBe(0);
    expect(client.output.byteLength).toBe(expected.byteLength);
    expect(client.output.equals(expected)).toBe(true);

    const final = await api.get(s.id);
    expect(final).toMatchObject({ status: "exited", exitCode: 0, signal: null, reason: "exit", offset: expected.byteLength });
    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.from).toBe(0);
    expect(sha256(rest.bytes)).toBe(sha256(expected));
    expect(rest.bytes.equals(expected)).toBe(true);

    console.info("link cuts", JSON.stringify(cuts), count(runnerLog(), '"event":"link.open"'));
    // Every cut found the runner connected, and its session link came back after each of them.
    expect(cuts.every((c) => c.connections >= 1)).toBe(true);
    const cutsWhileRunning = cuts.filter((c) => c.status === "running").length;
    expect(cutsWhileRunning).toBeGreaterThanOrEqual(3);
    expect(count(runnerLog(), '"event":"link.open"')).toBeGreaterThanOrEqual(1 + cutsWhileRunning);
  });

  it("resumes clients and the runner across an edge restart mid-output, byte for byte", async () => {
    const stack = await startStack("restart");
    let edge = stack.edge;
    dumpOnFailure(() => ({ runner: stack.runner, edge }));
    const { api } = stack;
    const expected = Buffer.concat([seqOutput(1, 400000), Buffer.from("seq-done\r\n")]);

    const s = await api.create({ command: "/bin/sh", args: ["-c", "sleep 0.3; seq 1 400000; echo seq-done"] });
    const client = new ResumingClient(edge.url, s.id, 0, 50_000);
    const restartAt = 250_000 + Math.floor(Math.random() * 100_000);
    await until(() => client.offset >= restartAt, 20_000, "output before the restart");
    const beforeRestart = client.offset;

    // Same port, same Durable Object storage, same secrets: a restart, as a deploy would be.
    const port = edge.port;
    const t0 = Date.now();
    await stopEdge(edge);
    const stoppedMs = Date.now() - t0;
    edge = await launchEdge(stack.persistTo, stack.vars, port);
    const upMs = Date.now() - t0;
    const heldBefore = client.offset;
    await until(() => client.offset > heldBefore || client.exit, 30_000, "output to flow again after the restart");
    const flowingMs = Date.now() - t0;

    await client.done;
    const doneMs = Date.now() - t0;
    expect(client.exit).toEqual({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: expected.byteLength });
    expect(client.finalClose).toBe(4010);
    expect(client.offsetErrors).toEqual([]);
    expect(client.gaps).toEqual([]);
    expect(client.interruptions.length).toBeGreaterThanOrEqual(1);
    // The restart drops the socket (1001 or 1006). A client back before the runner's link
    // waits for it: its replay is held, not failed.
    for (const code of client.interruptions) expect([1001, 1006]).toContain(code);
    expect(client.errors).toEqual([]);
    expect(beforeRestart).toBeLessThan(expected.byteLength);
    const pieced = client.output;
    expect(pieced.byteLength).toBe(expected.byteLength);
    expect(pieced.equals(expected)).toBe(true);

    expect(await api.get(s.id)).toMatchObject({ status: "exited", exitCode: 0, offset: expected.byteLength });
    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.from).toBe(0);
    expect(rest.bytes.equals(pieced)).toBe(true);
    console.info(
      "edge restart",
      JSON.stringify({
        beforeRestart,
        stoppedMs,
        upMs,
        flowingMs,
        doneMs,
        interruptions: Object.fromEntries(
          [...new Set(client.interruptions)].map((c) => [c, client.interruptions.filter((x) => x === c).length]),
        ),
        errors: [...new Set(client.errors.map((e) => e.message.code))],
        attempts: client.attempts,
      }),
    );
  });

  it("lets a client wait past the offset of a restarted edge until the runner has resent, then refuses what lies beyond", async () => {
    const stack = await startStack("ahead", { viaProxy: true });
    let edge = stack.edge;
    dumpOnFailure(() => ({ runner: stack.runner, edge }));
    const proxy = stack.proxy as TcpProxy;
    const s = await stack.api.create({ command: "/bin/sh", args: ["-c", "printf 'ready\\n'; exec cat"] });
    const end = (await until(async () => ((await stack.api.get(s.id)).offset === 7 ? 7 : null), 15_000, "ready")) as number;

    // The runner cannot reach the restarted edge: it cannot know yet whether its offset is complete.
    proxy.refuse(true);
    const port = edge.port;
    await stopEdge(edge);
    edge = await launchEdge(stack.persistTo, stack.vars, port);
    const ahead = end + 100;
    const client = cleanup.client(new TermClient(edge.url, s.id, KEY, { query: `from=${ahead}` }));
    await client.waitForMessage((m) => m.type === "live", "live past the edge's offset");
    expect(client.messages.map((m) => m.type)).toEqual(["hello", "live"]);
    expect(client.messages[1]).toEqual({ type: "live", offset: ahead });

    // The runner's link resumes and resends what the edge lacked: nothing reaches `ahead`, so
    // no client can hold it, and the waiting one is told so.
    proxy.refuse(false);
    expect(await client.waitForClose(60_000)).toBe(1008);
    const refusal = `offset ${ahead} is past the session's output (its offset is ${end})`;
    expect(client.messages.slice(2)).toEqual([{ type: "error", code: "INVALID_OFFSET", message: refusal }]);
    expect(client.output.byteLength).toBe(0);
    // Now the edge knows: the same offset is refused at once, and the session's own still works.
    const again = cleanup.client(new TermClient(edge.url, s.id, KEY, { query: `from=${ahead}` }));
    expect(await again.waitForClose(20_000)).toBe(1008);
    expect(again.messages).toEqual([{ type: "error", code: "INVALID_OFFSET", message: refusal }]);
    const atEnd = cleanup.client(new TermClient(edge.url, s.id, KEY, { query: `from=${end}` }));
    await atEnd.waitForMessage((m) => m.type === "live", "live at the offset");
    atEnd.send("x\n");
    await atEnd.waitForOutput("x\r\nx\r\n");
    expect(atEnd.startOffset).toBe(end);
    expect(atEnd.offsetErrors).toEqual([]);
  });

  it("marks a SIGKILLed runner's session lost, keeps its output replayable, and leaves no process", async () => {
    const stack = await startStack("killed", { vars: { LINK_GRACE_MS: "3000" } });
    const procs: Record<string, ManagedProcess | undefined> = { first: stack.runner, edge: stack.edge };
    dumpOnFailure(() => procs);
    const { api, edge } = stack;
    const expected = Buffer.concat([seqOutput(1, 1000), Buffer.from("printed\r\n")]);

    // `echo never` keeps bash from exec'ing sleep: bash stays the session leader, sleep its child.
    const s = await api.create({
      command: "/bin/bash",
      args: ["--norc", "--noprofile", "-c", "seq 1 1000; echo printed; sleep 600; echo never"],
    });
    const sid = s.pid as number;
    expect(sid).toBeGreaterThan(0);
    const client = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    await pinged(client);
    await client.waitForOutput(line("printed"));
    await until(() => liveSessionProcesses(sid).length >= 2, 5000, "bash and its sleep");
    cleanup.orphanSession(sid);
    const seen = Buffer.from(client.output);
    expect(seen.equals(expected)).toBe(true);
    await until(async () => (await api.get(s.id)).offset === seen.byteLength, 5000, "the edge to hold every byte");

    stack.runner.kill("SIGKILL");
    await stack.runner.exited;
    cleanup.runners.delete(stack.runner);
    const killedAt = Date.now();

    const lost = await until(
      async () => {
        const now = await api.get(s.id);
        return now.status === "lost" ? now : undefined;
      },
      20_000,
      "status lost",
    );
    const lostAfterMs = Date.now() - killedAt;
    expect(lost).toMatchObject({ status: "lost", offset: seen.byteLength });
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 15_000);
    expect(exit).toEqual({ type: "exit", status: "lost", exitCode: null, signal: null, reason: "runner_lost", offset: seen.byteLength });
    expect(await client.waitForClose(15_000)).toBe(4010);
    expect(client.offsetErrors).toEqual([]);
    expect(client.output.equals(seen)).toBe(true);

    // The PTY's processes get SIGHUP when the master closes with the runner; none may linger.
    let lingering: number[] = [];
    try {
      await until(() => liveSessionProcesses(sid).length === 0, 10_000, "the session's processes to end");
    } catch {
      lingering = liveSessionProcesses(sid);
    }

    // Any runner can serve the log from Redis.
    procs.second = launchRunner(edge.url, stack.redis.url, "killed-second-runner");
    await waitForRunner(edge, "killed-second-runner");
    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.from).toBe(0);
    expect(rest.to).toBe(seen.byteLength);
    expect(rest.bytes.equals(seen)).toBe(true);
    const replay = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    // The replay ends at once with `exit`: the ping may find the socket closing (no pong then).
    await replay.opened;
    replay.control({ type: "ping" });
    const replayExit = await replay.waitForMessage((m) => m.type === "exit", "replay exit", 15_000);
    expect(replayExit).toEqual({ type: "exit", status: "lost", exitCode: null, signal: null, reason: "runner_lost", offset: seen.byteLength });
    expect(await replay.waitForClose(15_000)).toBe(4010);
    expect(replay.offsetErrors).toEqual([]);
    expect(replay.messages.filter((m) => m.type === "gap" || m.type === "error")).toEqual([]);
    expect(replay.output.equals(seen)).toBe(true);

    console.info("runner killed", JSON.stringify({ lostAfterMs, lingering }));
    expect(lingering, `processes of session ${sid} still alive after the runner died`).toEqual([]);
  });

  it("skips no byte when links die with their last frames unsent: each new link resumes first", async () => {
    const stack = await linkFaultStack();
    const edgeLog = logFromNow(stack.edge);
    dumpOnFailure(() => ({ runner: stack.runner, edge: stack.edge }));
    const { api, edge } = stack;
    const proxy = stack.proxy as TcpProxy;
    const { expected, s, client } = await pacedSession(api, edge);

    // Four times: the link's frames stop reaching the edge (the runner believes them sent),
    // then the link dies; the next link must start where the edge is, not where the runner was.
    const outages: { swallowed: number; edgeAt: number }[] = [];
    for (const threshold of [100_000, 600_000, 1_100_000, 1_600_000]) {
      const at = Math.max(threshold, (outages.at(-1)?.edgeAt ?? 0) + 1);
      await client.waitFor(() => (client.nextOffset ?? 0) >= at, `${at} bytes`, 20_000);
      const before = proxy.swallowed();
      proxy.swallow(true);
      await until(() => proxy.swallowed() - before >= 32 * 1024, 10_000, "output frames to be lost");
      const edgeAt = (await api.get(s.id)).offset;
      proxy.cutAll();
      proxy.swallow(false);
      outages.push({ swallowed: proxy.swallowed() - before, edgeAt });
    }

    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 40_000);
    expect(exit).toMatchObject({ type: "exit", status: "exited", exitCode: 0, offset: expected.byteLength });
    expect(client.offsetErrors).toEqual([]);
    expect(client.messages.filter((m) => m.type === "gap" || m.type === "error")).toEqual([]);
    expect(client.output.equals(expected)).toBe(true);
    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.bytes.equals(expected)).toBe(true);
    // The edge saw no hole to accept (it would close the link, and log it, if one came).
    expect(edgeLog()).not.toContain("offset_gap");
    console.info("swallowed outages", JSON.stringify(outages));
  });

  it("loses no input, and its eof, when the link dies with them: the next link sends them again, once", async () => {
    const stack = await linkFaultStack();
    const edgeLog = logFromNow(stack.edge);
    dumpOnFailure(() => ({ runner: stack.runner, edge: stack.edge }));
    const { api, edge } = stack;
    const proxy = stack.proxy as TcpProxy;
    const s = await api.create({
      pty: false,
      command: "/bin/sh",
      args: ["-c", "printf '#'; read a; printf 'a=%s;' \"$a\"; cat; printf 'end'"],
    });
    const client = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    await client.waitFor(() => client.output.toString() === "#", "the prompt");

    // The link stops delivering without a reset (the edge believes it open): REST input and its
    // eof go into it and are lost there, as in the lost keystroke of docs/benchmarks.md's row 14.
    proxy.blackhole(true);
    const before = proxy.blackholed();
    const answer = await api.inputRequest(s.id, { data: "one\ntail", eof: true });
    expect(answer.status).toBe(202);
    await until(() => proxy.blackholed() - before >= "one\ntail".length, 10_000, "the input to be lost in the link");
    // The network comes back: the stalled link is reset and the runner dials a new one.
    proxy.blackhole(false);

    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 30_000);
    expect(exit).toMatchObject({ status: "exited", exitCode: 0 });
    expect(client.output.toString()).toBe("#a=one;tailend");
    expect((await fetchOutput(api, s.id, 0)).bytes.toString()).toBe("#a=one;tailend");
    expect(edgeLog()).toContain('"outcome":"resent"');
    client.close();
  });

  it("keeps in the log every byte a client saw across a 7 s Redis outage, with no gap", async () => {
    const stack = await linkFaultStack();
    const runnerLog = logFromNow(stack.runner);
    dumpOnFailure(() => ({ runner: stack.runner, edge: stack.edge }));
    const { api, edge } = stack;
    const redisProxy = stack.redisProxy as TcpProxy;
    const { expected, s, client } = await pacedSession(api, edge);
    await client.waitFor(() => (client.nextOffset ?? 0) >= 100_000, "output before the outage", 20_000);

    // Redis goes away: connections reset, new ones refused, for 7 s.
    redisProxy.refuse(true);
    const outageStart = Date.now();
    await until(() => runnerLog().includes('"outcome":"failed"'), 10_000, "an append to fail");
    const atOutage = client.nextOffset ?? 0;
    await new Promise((r) => setTimeout(r, 7000 - (Date.now() - outageStart))); // the outage itself
    const duringOutage = (client.nextOffset ?? 0) - atOutage;
    redisProxy.refuse(false);

    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 40_000);
    expect(exit).toMatchObject({ type: "exit", status: "exited", exitCode: 0, offset: expected.byteLength });
    expect(client.offsetErrors).toEqual([]);
    expect(client.output.equals(expected)).toBe(true);
    // Everything the live client saw is in the log, byte for byte, with no gap.
    const replay = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    await replay.waitForMessage((m) => m.type === "exit", "the replay's exit", 20_000);
    expect(replay.messages.filter((m) => m.type === "gap" || m.type === "error")).toEqual([]);
    expect(replay.output.equals(client.output)).toBe(true);
    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.from).toBe(0);
    expect(rest.bytes.equals(client.output)).toBe(true);
    console.info("redis outage", JSON.stringify({ atOutage, duringOutage, total: expected.byteLength }));
  });

  it("keeps a session running across a Redis restart and reports what the log lost as a gap", async () => {
    const stack = await startStack("redis");
    dumpOnFailure(() => ({ runner: stack.runner, edge: stack.edge }));
    const { api, edge, redis } = stack;
    const blockA = Buffer.concat([seqOutput(1, 20000), Buffer.from("A-DONE-42\r\n")]);
    const blockB = Buffer.concat([seqOutput(20001, 40000), Buffer.from("B-DONE-48\r\n")]);

    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const client = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    await client.opened;
    /** Absolute offset where `bytes` first occurs in what the live client received. */
    const offsetOf = (bytes: Buffer, after = 0): number => {
      const start = client.startOffset ?? 0;
      const at = client.output.indexOf(bytes, Math.max(0, after - start));
      return at < 0 ? -1 : start + at;
    };

    await api.input(s.id, "seq 1 20000; echo A-DONE-$((6*7))\n");
    await client.waitFor(() => offsetOf(blockA) >= 0, "output A", 15_000);
    const endOfA = offsetOf(blockA) + blockA.byteLength;
    await until(async () => (await fetchOutput(api, s.id, 0)).to >= endOfA, 5000, "output A in the log");

    await redis.restart(); // a fresh, empty Redis on the same port: output A is gone from the log

    // Probe until an appended line is readable from the log again (the runner has reconnected).
    let probe = 0;
    const logBackAt = await until(
      async () => {
        probe++;
        const marker = Buffer.from(`probe-${probe}\r\n`);
        const sentAt = client.nextOffset ?? 0;
        await api.input(s.id, `echo probe-$((${probe}+0))\n`);
        await client.waitFor(() => offsetOf(marker, sentAt) >= 0, `probe ${probe}`, 5000);
        const at = offsetOf(marker, sentAt);
        const res = await fetch(`${edge.url}/v1/sessions/${s.id}/output?from=${at}&to=${at + marker.byteLength}`, {
          headers: { authorization: `Bearer ${KEY}` },
        });
        const body = Buffer.from(await res.arrayBuffer());
        return res.status === 200 && Number(res.headers.get("x-offset-from")) === at && body.equals(marker)
          ? at
          : undefined;
      },
      20_000,
      "the output log to accept appends again",
    );

    await api.input(s.id, "seq 20001 40000; echo B-DONE-$((6*8))\n");
    await client.waitFor(() => offsetOf(blockB, logBackAt) >= 0, "output B", 15_000);
    const startOfB = offsetOf(blockB, logBackAt);
    const inLog = await until(
      async () => {
        const got = await fetchOutput(api, s.id, startOfB);
        return got.from === startOfB && got.bytes.subarray(0, blockB.byteLength).equals(blockB) ? got : undefined;
      },
      10_000,
      "output B in the log",
    );
    expect(inLog.from).toBe(startOfB);

    // Still running, and input still works.
    expect((await api.get(s.id)).status).toBe("running");
    await api.input(s.id, "echo still-$((2+3))\n");
    await client.waitForOutput(line("still-5"));
    // The prompt may come in a later frame than the line: wait until the client holds all of it.
    const end = await until(
      async () => {
        const { offset } = await api.get(s.id);
        return offset === client.nextOffset ? offset : undefined;
      },
      5000,
      "the client to hold every byte the edge has",
    );

    // The live client got A and B whole and in order, with no gap.
    expect(client.offsetErrors).toEqual([]);
    expect(client.startOffset).toBe(0);
    expect(client.messages.filter((m) => m.type === "gap" || m.type === "error" || m.type === "exit")).toEqual([]);
    expect(offsetOf(blockA)).toBeGreaterThanOrEqual(0);
    expect(startOfB).toBeGreaterThan(endOfA);

    // A replay from 0 is told what the log lost, then gets exactly the bytes from there on.
    const replay = new TermClient(edge.url, s.id, KEY, { query: "from=0" });
    await replay.waitFor(() => (replay.nextOffset ?? 0) >= end, "replay to reach the end", 15_000);
    expect(replay.offsetErrors).toEqual([]);
    const gaps = replay.messages.filter((m) => m.type === "gap");
    const resumedAt = replay.startOffset as number;
    expect(gaps).toEqual([{ type: "gap", from: 0, to: resumedAt }]);
    expect(resumedAt).toBeGreaterThanOrEqual(endOfA);
    expect(resumedAt).toBeLessThanOrEqual(logBackAt);
    expect(resumedAt).toBeLessThanOrEqual(startOfB);
    expect(replay.output.equals(client.bytesFrom(resumedAt).subarray(0, end - resumedAt))).toBe(true);

    const rest = await fetchOutput(api, s.id, 0);
    expect(rest.from).toBe(resumedAt);
    expect(rest.to).toBe(end);
    expect(rest.bytes.equals(client.bytesFrom(resumedAt).subarray(0, end - resumedAt))).toBe(true);

    replay.socket.terminate();
    await api.input(s.id, "exit 0\n");
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 10_000);
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: client.nextOffset });
    const { retainedFrom } = await api.get(s.id);
    console.info(
      "redis restart",
      JSON.stringify({ endOfA, probes: probe, logBackAt, resumedAt, startOfB, end, retainedFrom }),
    );
  });
});
