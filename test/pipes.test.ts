// Issue 16, sessions without a terminal (`pty: false`, docs/protocol.md §3, "Processes without a
// terminal") on the real stack: stdout and stderr kept apart in one offset space (0x01/0x03
// frames, `data`/`stderr` SSE events, `output?stream=`), in the order the process wrote them, the
// same live and replayed; stdin closed by `eof` (REST and WebSocket; Ctrl+D on a terminal); what
// a terminal alone has (resize, screen, run) refused with NOT_A_TTY; and the same boundaries as a
// terminal's session (tenant's user, no runner secret, roles, tenants, every process ending with
// the session).
import WebSocket from "ws";
import { describe, expect, inject, it } from "vitest";
import { lookUpUser, tenantUserName } from "../runner/isolation/session-user.js";
import type { Session } from "../shared/session.js";
import { TENANTS } from "./global-setup.js";
import {
  Api,
  type OutputFrame,
  SseClient,
  type TermClient,
  alive,
  commandOf,
  fetchOutput,
  hostPid,
  liveSessionProcesses,
  onSharedStack,
  sha256,
  until,
} from "./harness.js";

const suite = onSharedStack();
const { url, api: acme, globex } = suite;
const runnerToken = inject("runnerToken");

function session(body: Record<string, unknown>): Promise<Session> {
  return suite.session(body);
}

/** Processes sessions started here: any still running `sleep 1000` at the end gets SIGKILL (by this pid only). */
function spawned(...pids: number[]): void {
  for (const pid of pids) suite.cleanup.strayProcess(pid, "sleep 1000");
}

/** A sandboxed session's workspace, inside (runner/isolation/sandbox.ts). */
const SANDBOX_HOME = "/workspace";

/**
 * The host's pid of what the session `sessionPid` printed as `innerPid` (`$!`, `$$`: its
 * sandbox's pid numbering), for the checks and the cleanup that look at the host's /proc.
 */
function onHost(sessionPid: number, innerPid: number): number {
  const pid = hostPid(sessionPid, innerPid);
  if (pid === null) throw new Error(`no process ${innerPid} in the sandbox of session pid ${sessionPid}`);
  return pid;
}

/** A `pty: false` session of `/bin/sh -c script`. */
function pipes(script: string, extra: Record<string, unknown> = {}): Promise<Session> {
  return session({ pty: false, command: "/bin/sh", args: ["-c", script], ...extra });
}

function connect(id: string, query = "from=0", key: string = TENANTS.acme): TermClient {
  return suite.connect(id, { query }, key);
}

function sse(id: string, options: { lastEventId?: string } = {}): SseClient {
  return suite.cleanup.stream(new SseClient(url, id, TENANTS.acme, options));
}

/** The session once it has ended (waits on the server, with a deadline). */



/** Frames with adjacent frames of the same stream at contiguous offsets joined: the streams' interleaving, whatever the chunking. */
function interleaving(frames: OutputFrame[]): { op: "stdout" | "stderr"; offset: number; text: string }[] {
  const runs: { op: "stdout" | "stderr"; offset: number; bytes: Buffer[]; end: number }[] = [];
  for (const frame of frames) {
    const last = runs.at(-1);
    if (last && last.op === frame.op && last.end === frame.offset) {
      last.bytes.push(frame.data);
      last.end += frame.data.byteLength;
    } else runs.push({ op: frame.op, offset: frame.offset, bytes: [frame.data], end: frame.offset + frame.data.byteLength });
  }
  return runs.map((r) => ({ op: r.op, offset: r.offset, text: Buffer.concat(r.bytes).toString("utf8") }));
}

/** Each frame's op, offset and length: what a replay must repeat exactly. */
function shape(frames: OutputFrame[]): string[] {
  return frames.map((f) => `${f.op}@${f.offset}+${f.data.byteLength}`);
}

/** `seq 1 n` as pipes carry it. */
function seq(n: number): string {
  let out = "";
  for (let i = 1; i <= n; i++) out += `${i}\n`;
  return out;
}

const notATty = { error: { code: "NOT_A_TTY", message: expect.any(String) } };
const invalid = { error: { code: "INVALID_REQUEST", message: expect.any(String) } };

describe("stdout and stderr in one offset space", () => {
  // What the process writes, in order; after each part but the last it waits for a line of stdin
  // (`read`), which the test sends only once it has seen the part arrive: the order in which the
  // two pipes are written is then the order in which the runner reads them. The last part is
  // written right before the process exits.
  const PARTS: { op: "stdout" | "stderr"; shell: string; text: string }[] = [
    { op: "stdout", shell: "printf 'out-1\\n'", text: "out-1\n" },
    { op: "stderr", shell: "printf 'err-1\\n' >&2", text: "err-1\n" },
    { op: "stdout", shell: "printf 'out-2 '", text: "out-2 " },
    { op: "stderr", shell: "printf 'err-2\\n' >&2", text: "err-2\n" },
    { op: "stdout", shell: "seq 1 12000", text: seq(12000) },
    { op: "stderr", shell: "seq 1 3000 >&2", text: seq(3000) },
    { op: "stdout", shell: "printf 'tail-out\\n'", text: "tail-out\n" },
    { op: "stderr", shell: "seq 1 9000 >&2", text: seq(9000) },
  ];
  const SCRIPT = `${PARTS.map((p) => p.shell).join("; read _; ")}; exit 7`;
  const ends: number[] = [];
  {
    let at = 0;
    for (const part of PARTS) ends.push((at += Buffer.byteLength(part.text)));
  }
  const starts = [0, ...ends.slice(0, -1)];
  const TOTAL = ends.at(-1) as number;
  const EXPECTED = PARTS.map((p, i) => ({ op: p.op, offset: starts[i] as number, text: p.text }));
  const merged = Buffer.from(PARTS.map((p) => p.text).join(""));

  /** The expected interleaving from offset `from` on. */
  function expectedFrom(from: number) {
    return EXPECTED.filter((p) => p.offset + Buffer.byteLength(p.text) > from).map((p) =>
      p.offset >= from ? p : { ...p, offset: from, text: Buffer.from(p.text).subarray(from - p.offset).toString("utf8") },
    );
  }

  /** The bytes of `stream` in [from, to) of the merged offset space. */
  function expectedStream(stream: "stdout" | "stderr", from: number, to: number): Buffer {
    const parts = EXPECTED.flatMap((p) => {
      const bytes = Buffer.from(p.text);
      const lo = Math.max(from, p.offset);
      const hi = Math.min(to, p.offset + bytes.byteLength);
      return p.op === stream && lo < hi ? [bytes.subarray(lo - p.offset, hi - p.offset)] : [];
    });
    return Buffer.concat(parts);
  }

  const exitMessage = { type: "exit", status: "exited", exitCode: 7, signal: null, reason: "exit", offset: TOTAL };

  let id = "";
  /** The live client's frames (op, offset, length), for the replays to repeat. */
  let liveShape: string[] = [];

  it("keeps the streams apart, in the order written, live, replayed after a reconnect mid-way, over SSE and in the log", async () => {
    const s = await pipes(SCRIPT);
    id = s.id;
    expect(s).toMatchObject({ pty: false, command: "/bin/sh" });
    expect((await acme.get(s.id)).pty).toBe(false);

    // live: from the start to the exit; raw: both streams merged; early: from the start, gone
    // after part 3; sse: the whole stream.
    const live = connect(s.id);
    const raw = connect(s.id, "from=0&mode=raw");
    const early = connect(s.id);
    const events = sse(s.id);
    let late: TermClient | undefined;

    for (let i = 0; i < PARTS.length - 1; i++) {
      await live.waitFor(() => (live.nextOffset ?? 0) >= (ends[i] as number), `part ${i} to arrive`);
      if (i === 3) {
        // The early client has parts 0..3 and goes; parts 4 and 5 are written while it is away.
        await early.waitFor(() => early.nextOffset === ends[3], "the early client to have part 3");
        await early.close();
        // `expect` reads the merged output: across stdout and stderr.
        expect(await acme.expectOutput(s.id, { pattern: "out-1\nerr-1\n", literal: true, from: 0 })).toMatchObject({
          matched: true,
          start: 0,
          end: ends[1],
        });
        expect(await acme.expectOutput(s.id, { pattern: "out-2 err-(\\d)", from: 0 })).toMatchObject({
          matched: true,
          match: "out-2 err-2",
          groups: ["2"],
          start: ends[1],
          end: (ends[3] as number) - 1,
        });
        // What only a terminal has is refused, and changes nothing.
        const before = await acme.get(s.id);
        expect(await acme.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 100, rows: 30 })).toMatchObject({
          status: 409,
          body: notATty,
        });
        expect(await acme.request("GET", `/v1/sessions/${s.id}/screen`)).toMatchObject({ status: 409, body: notATty });
        expect(await acme.request("POST", `/v1/sessions/${s.id}/run`, { command: "echo hi" })).toMatchObject({
          status: 409,
          body: notATty,
        });
        live.control({ type: "resize", cols: 100, rows: 30 });
        const refused = await live.waitForMessage((m) => m.type === "error", "the socket's resize refused");
        expect(refused).toEqual({ type: "error", code: "NOT_A_TTY", message: expect.any(String) });
        const after = await acme.get(s.id);
        expect({ cols: after.cols, rows: after.rows, status: after.status }).toEqual({
          cols: before.cols,
          rows: before.rows,
          status: "running",
        });
        expect(live.messages.filter((m) => m.type === "resize")).toEqual([]);
      }
      if (i === 5) {
        // Back after parts 4 and 5: they are replayed, then output goes on live.
        late = connect(s.id, `from=${early.nextOffset}`);
        await late.waitForMessage((m) => m.type === "live", "the late client to be live");
        await late.waitFor(() => late?.nextOffset === ends[5], "the late client to have part 5");
      }
      if (i === 6) (late as TermClient).eof(); // `read` gets end-of-file: the last part follows
      else await acme.input(s.id, "\n");
    }
    await live.waitForMessage((m) => m.type === "exit", "exit");
    await (late as TermClient).waitForMessage((m) => m.type === "exit", "exit (late client)");
    await events.done;

    // Live: every frame in order, 0x01 and 0x03, offsets contiguous across both streams, and the
    // exit after the last byte, naming the offset past it.
    expect(live.offsetErrors).toEqual([]);
    expect(live.startOffset).toBe(0);
    expect(interleaving(live.frames())).toEqual(EXPECTED);
    expect(live.output.equals(merged)).toBe(true);
    expect(live.stdout.toString()).toBe(expectedStream("stdout", 0, TOTAL).toString());
    expect(live.stderr.toString()).toBe(expectedStream("stderr", 0, TOTAL).toString());
    expect(live.stderrFrames.every((f) => f.data.byteLength > 0)).toBe(true);
    const exitAt = live.timeline.findIndex((e) => e.kind === "message" && e.message.type === "exit");
    expect(live.timeline[exitAt]).toEqual({ kind: "message", message: exitMessage });
    expect(live.timeline.slice(exitAt + 1).filter((e) => e.kind !== "message")).toEqual([]);
    expect(live.messages.filter((m) => m.type === "gap" || (m.type === "error" && m.code !== "NOT_A_TTY"))).toEqual([]);
    expect(live.messages[0]).toMatchObject({ type: "hello", session: { id: s.id, pty: false } });

    // Reconnected mid-way: the two connections together are the live client's frames, op for op.
    expect(early.offsetErrors).toEqual([]);
    expect(late?.offsetErrors).toEqual([]);
    expect(late?.startOffset).toBe(ends[3]);
    expect(interleaving([...early.frames(), ...(late as TermClient).frames()])).toEqual(EXPECTED);
    liveShape = shape(live.frames());
    expect(shape([...early.frames(), ...(late as TermClient).frames()])).toEqual(liveShape);
    expect(interleaving((late as TermClient).frames())).toEqual(expectedFrom(ends[3] as number));
    expect((late as TermClient).messages.find((m) => m.type === "exit")).toEqual(exitMessage);

    // Raw mode merges both streams.
    await raw.waitFor(() => raw.output.byteLength >= TOTAL, "the raw client to have everything");
    expect(raw.output.equals(merged)).toBe(true);

    // SSE: `data` and `stderr` events in order, each `id` the offset after it, then `exit`.
    expect(events.status).toBe(200);
    const chunks = events.outputEvents();
    let reached = 0;
    for (const chunk of chunks) {
      reached += chunk.data.byteLength;
      expect(chunk.id).toBe(String(reached));
    }
    expect(reached).toBe(TOTAL);
    expect(
      interleaving(
        chunks.map((c) => ({ op: c.event === "stderr" ? "stderr" : "stdout", offset: Number(c.id) - c.data.byteLength, data: c.data })),
      ),
    ).toEqual(EXPECTED);
    expect(events.events.at(-1)?.event).toBe("exit");
    expect(JSON.parse(events.events.at(-1)?.data ?? "null")).toEqual({
      status: "exited",
      exitCode: 7,
      signal: null,
      reason: "exit",
      offset: TOTAL,
    });
    expect(events.events.filter((e) => !["data", "stderr", "exit"].includes(e.event))).toEqual([]);

    expect(await acme.get(s.id)).toMatchObject({ status: "exited", exitCode: 7, signal: null, reason: "exit", offset: TOTAL, pty: false });
  });

  it("replays the same frames after the exit: from 0, from inside a stderr chunk, and an SSE resumed by Last-Event-ID", async () => {
    expect(id).not.toBe("");
    const all = connect(id, "from=0");
    const inside = connect(id, `from=${(ends[0] as number) + 2}`);
    const atTail = connect(id, `from=${ends[5]}`);
    for (const client of [all, inside, atTail]) {
      await client.waitForMessage((m) => m.type === "exit", "exit");
      expect(client.offsetErrors).toEqual([]);
      expect(client.messages.find((m) => m.type === "exit")).toEqual(exitMessage);
      expect(client.messages.filter((m) => m.type === "gap" || m.type === "error")).toEqual([]);
    }
    expect(interleaving(all.frames())).toEqual(EXPECTED);
    expect(shape(all.frames())).toEqual(liveShape);
    expect(shape(atTail.frames())).toEqual(liveShape.slice(liveShape.findIndex((f) => f.includes(`@${ends[5]}+`))));
    expect(all.output.equals(merged)).toBe(true);
    expect(interleaving(inside.frames())).toEqual(expectedFrom((ends[0] as number) + 2));
    expect(inside.frames()[0]).toMatchObject({ op: "stderr", offset: (ends[0] as number) + 2 });
    expect(inside.frames()[0]?.data.toString()).toBe("r-1\n");
    expect(interleaving(atTail.frames())).toEqual(expectedFrom(ends[5] as number));

    const resumed = sse(id, { lastEventId: String(ends[2]) });
    await resumed.done;
    const chunks = resumed.outputEvents();
    expect(
      interleaving(
        chunks.map((c) => ({ op: c.event === "stderr" ? "stderr" : "stdout", offset: Number(c.id) - c.data.byteLength, data: c.data })),
      ),
    ).toEqual(expectedFrom(ends[2] as number));
    expect(resumed.events.at(-1)?.event).toBe("exit");
  });

  it("keeps only one stream's bytes with output?stream=, over any range of the merged offsets", async () => {
    expect(id).not.toBe("");
    expect((await fetchOutput(acme, id, 0)).bytes.equals(merged)).toBe(true);
    const ranges: [number, number][] = [
      [0, TOTAL],
      [3, 40],
      [(ends[0] as number) + 2, (ends[4] as number) + 100],
      [(ends[4] as number) - 5, (ends[6] as number) + 3],
      [ends[6] as number, TOTAL],
      [ends[1] as number, ends[2] as number],
    ];
    for (const [from, to] of ranges) {
      for (const stream of ["stdout", "stderr"] as const) {
        const got = await acme.outputStream(id, stream, from, to);
        expect(got.equals(expectedStream(stream, from, to)), `${stream} [${from}, ${to})`).toBe(true);
      }
      expect((await acme.outputRange(id, from, to)).equals(merged.subarray(from, to)), `both [${from}, ${to})`).toBe(true);
    }
    // The headers give the merged range; the body holds that stream's bytes of it.
    const res = await fetch(`${url}/v1/sessions/${id}/output?from=3&to=40&stream=stderr`, {
      headers: { authorization: `Bearer ${TENANTS.acme}` },
    });
    expect(res.status).toBe(200);
    expect([res.headers.get("x-offset-from"), res.headers.get("x-offset-to")]).toEqual(["3", "40"]);
    expect(Buffer.from(await res.arrayBuffer()).toString()).toBe("err-1\nerr-2\n");
    expect(expectedStream("stderr", 3, 40).toString()).toBe("err-1\nerr-2\n");
  });
});

describe("both streams at once", () => {
  it("keeps stdout and stderr apart when both flood together; a replay has the live client's frames, op for op", async () => {
    const lines = seq(100_000);
    const size = Buffer.byteLength(lines);
    // The floods start once both readers are live (a line of stdin), so that they get it all live.
    const s = await pipes("read _; seq 1 100000 >&2 & seq 1 100000; wait");
    const live = connect(s.id);
    const events = sse(s.id);
    await live.waitForMessage((m) => m.type === "live", "live");
    await events.waitFor(() => events.status === 200, "the stream to open");
    await acme.input(s.id, "\n");
    const exit = await live.waitForMessage((m) => m.type === "exit", "exit", 30_000);
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: 2 * size });
    expect(live.offsetErrors).toEqual([]);
    expect(live.nextOffset).toBe(2 * size);
    expect(live.stdout.toString() === lines).toBe(true);
    expect(live.stderr.toString() === lines).toBe(true);
    expect(live.stderrFrames.length).toBeGreaterThan(0);

    // Whatever interleaving the runner read, the log and every reader have that one.
    const order = interleaving(live.frames());
    const replay = connect(s.id, "from=0");
    await replay.waitForMessage((m) => m.type === "exit", "exit (replay)", 30_000);
    expect(replay.offsetErrors).toEqual([]);
    expect(interleaving(replay.frames())).toEqual(order);
    // Frame for frame: the same ops at the same offsets with the same lengths.
    expect(shape(replay.frames())).toEqual(shape(live.frames()));
    await events.done;
    const chunks = events.outputEvents();
    expect(
      interleaving(
        chunks.map((c) => ({ op: c.event === "stderr" ? "stderr" : "stdout", offset: Number(c.id) - c.data.byteLength, data: c.data })),
      ),
    ).toEqual(order);
    expect((await acme.outputStream(s.id, "stdout", 0, 2 * size)).toString() === lines).toBe(true);
    expect((await acme.outputStream(s.id, "stderr", 0, 2 * size)).toString() === lines).toBe(true);
    expect((await fetchOutput(acme, s.id, 0)).bytes.equals(live.output)).toBe(true);
  });
});

describe("the exit while a client replays", () => {
  it("sends a client replaying a long history every byte and then the exit, when the process exits meanwhile", async () => {
    const size = 8 * 1024 * 1024;
    const lineText = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV\n";
    const history = Buffer.from(lineText.repeat(Math.ceil(size / lineText.length))).subarray(0, size);
    const s = await pipes(`yes ${lineText.trimEnd()} | head -c ${size}; echo done >&2; read _; exit 5`);
    const total = size + 5;
    await until(async () => (await acme.get(s.id)).offset === total, 30_000, "the history to be written");
    // The replay of 8 MiB is under way when stdin ends and the process exits.
    const client = connect(s.id, "from=0");
    await client.waitForMessage((m) => m.type === "replay", "replay");
    expect(await acme.inputRequest(s.id, { data: "", eof: true })).toMatchObject({ status: 202 });
    const exit = await client.waitForMessage((m) => m.type === "exit" || m.type === "error", "the exit", 30_000);
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 5, signal: null, reason: "exit", offset: total });
    expect(client.offsetErrors).toEqual([]);
    expect(client.nextOffset).toBe(total);
    expect(sha256(client.stdout)).toBe(sha256(history));
    expect(client.stderr.toString()).toBe("done\n");
  });
});

describe("stdin and eof", () => {
  it("tr a-z A-Z: input, then eof on REST, exits 0 with the text transformed; resize is 409 NOT_A_TTY", async () => {
    const s = await session({ pty: false, command: "/usr/bin/tr", args: ["a-z", "A-Z"] });
    const before = await acme.get(s.id);
    expect(before.pty).toBe(false);
    expect(await acme.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 120, rows: 40 })).toMatchObject({
      status: 409,
      body: notATty,
    });
    const first = await acme.inputRequest(s.id, { data: "hello, world\n" });
    expect(first).toMatchObject({ status: 202, body: { bytes: 13 } });
    const last = await acme.inputRequest(s.id, { data: "second line", eof: true });
    expect(last).toMatchObject({ status: 202, body: { bytes: 11 } });
    const done = await acme.ended(s.id);
    expect(done).toMatchObject({ status: "exited", exitCode: 0, signal: null, reason: "exit", cols: before.cols, rows: before.rows });
    const out = await fetchOutput(acme, s.id, 0);
    expect(out.bytes.toString()).toBe("HELLO, WORLD\nSECOND LINE");
    expect(done.offset).toBe(out.bytes.byteLength);
    expect((await acme.outputStream(s.id, "stdout", 0, done.offset)).toString()).toBe("HELLO, WORLD\nSECOND LINE");
    expect((await acme.outputStream(s.id, "stderr", 0, done.offset)).toString()).toBe("");
  });

  it("closes stdin with {type: eof} over the WebSocket; eof with empty data on REST", async () => {
    const s = await session({ pty: false, command: "/usr/bin/tr", args: ["a-z", "A-Z"] });
    const client = connect(s.id);
    await client.opened;
    // tr's stdout is a pipe: it prints nothing before its stdin ends.
    client.send("abc\n");
    client.send("def");
    client.eof();
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit");
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: 7 });
    expect(client.offsetErrors).toEqual([]);
    expect(client.frames().map((f) => f.op)).toEqual(client.frames().map(() => "stdout"));
    expect(client.text).toBe("ABC\nDEF");
    expect(client.messages.filter((m) => m.type === "error")).toEqual([]);

    // A writer token may close stdin too.
    const w = await session({ pty: false, command: "/usr/bin/tr", args: ["a-z", "A-Z"] });
    const minted = await acme.request("POST", `/v1/sessions/${w.id}/tokens`, { role: "writer" });
    expect(minted.status).toBe(201);
    const writer = connect(w.id, "from=0", minted.body.token as string);
    await writer.opened;
    writer.send("by writer");
    writer.eof();
    expect(await writer.waitForMessage((m) => m.type === "exit", "exit")).toMatchObject({ exitCode: 0, offset: 9 });
    expect(writer.text).toBe("BY WRITER");
    expect(writer.messages.filter((m) => m.type === "error")).toEqual([]);

    const empty = await session({ pty: false, command: "/usr/bin/wc", args: ["-c"] });
    expect(await acme.inputRequest(empty.id, { data: "", eof: true })).toMatchObject({ status: 202, body: { bytes: 0 } });
    expect(await acme.ended(empty.id)).toMatchObject({ status: "exited", exitCode: 0 });
    expect((await fetchOutput(acme, empty.id, 0)).bytes.toString()).toBe("0\n");
  });

  it("types Ctrl+D for eof on a terminal: cat gets end-of-file on an empty line, a line's text before it", async () => {
    // WebSocket: a line, then eof at the start of the next: cat ends.
    const s = await session({ command: "/bin/cat" });
    const client = connect(s.id);
    await client.opened;
    client.send("abc\n");
    await client.waitForOutput("abc\r\nabc\r\n");
    client.eof();
    expect(await client.waitForMessage((m) => m.type === "exit", "exit")).toMatchObject({ status: "exited", exitCode: 0 });
    expect(client.text).toBe("abc\r\nabc\r\n");

    // REST: Ctrl+D after text hands the text to cat without a newline (cat goes on); a second one
    // on the empty line is end-of-file. Input after eof is fine on a terminal.
    const t = await session({ command: "/bin/cat" });
    const watch = connect(t.id);
    await watch.opened;
    expect(await acme.inputRequest(t.id, { data: "xyz", eof: true })).toMatchObject({ status: 202 });
    await watch.waitForOutput("xyzxyz");
    expect((await acme.get(t.id)).status).toBe("running");
    expect(await acme.inputRequest(t.id, { data: "", eof: true })).toMatchObject({ status: 202 });
    expect(await watch.waitForMessage((m) => m.type === "exit", "exit")).toMatchObject({ status: "exited", exitCode: 0, offset: 6 });
    expect(watch.text).toBe("xyzxyz");
  });
});

describe("bad input", () => {
  it("refuses cols or rows with pty: false (400) and creates nothing", async () => {
    for (const body of [
      { pty: false, cols: 100 },
      { pty: false, rows: 30 },
      { pty: false, cols: 80, rows: 24 },
      { pty: false, command: "/bin/cat", cols: 80 },
      { pty: "false", command: "/bin/cat" },
      { pty: 0, command: "/bin/cat" },
    ]) {
      const res = await acme.request("POST", "/v1/sessions", { ...body, tags: ["pipes-bad"] });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toEqual(invalid);
    }
    expect((await acme.request("GET", "/v1/sessions?tag=pipes-bad")).body.sessions).toEqual([]);
  });

  it("refuses a bad stream with 400; input after eof with 409 CONFLICT, and the process sees none of it", async () => {
    const s = await pipes("tr a-z A-Z; echo stdin-closed >&2; exec sleep 1000");
    for (const stream of ["both", "stdin", "STDERR", "0x03", ""]) {
      const res = await acme.request("GET", `/v1/sessions/${s.id}/output?stream=${stream}`);
      expect(res.status, `stream=${stream}`).toBe(400);
      expect(res.body).toEqual(invalid);
    }
    const client = connect(s.id);
    expect(await acme.inputRequest(s.id, { data: "one\n", eof: true })).toMatchObject({ status: 202 });
    await client.waitForOutput("ONE\nstdin-closed\n");
    const conflict = { status: 409, body: { error: { code: "CONFLICT", message: expect.any(String) } } };
    expect(await acme.inputRequest(s.id, { data: "two\n" })).toMatchObject(conflict);
    expect(await acme.inputRequest(s.id, { data: "three\n", eof: true })).toMatchObject(conflict);
    expect(await acme.inputRequest(s.id, { data: "", eof: true })).toMatchObject(conflict);
    // Over the WebSocket: an error message for each, and the socket stays open.
    client.send("four\n");
    client.eof();
    await client.waitFor(() => client.messages.filter((m) => m.type === "error").length === 2, "two refusals");
    expect(client.messages.filter((m) => m.type === "error")).toEqual([
      { type: "error", code: "CONFLICT", message: expect.any(String) },
      { type: "error", code: "CONFLICT", message: expect.any(String) },
    ]);
    expect(client.closeCode).toBeUndefined();
    const now = await acme.get(s.id);
    expect(now.status).toBe("running");
    expect((await fetchOutput(acme, s.id, 0)).bytes.toString()).toBe("ONE\nstdin-closed\n");
    expect(client.stderr.toString()).toBe("stdin-closed\n");
    expect(client.stdout.toString()).toBe("ONE\n");
  });
});

describe("attacker", () => {
  it("runs as the tenant's user, not root, in its workspace (/workspace in its sandbox), and sees none of the runner's environment", async () => {
    const user = lookUpUser(tenantUserName("acme"));
    expect(user).not.toBeNull();
    const { uid, name } = user as NonNullable<typeof user>;
    expect(uid).toBeGreaterThan(0);
    // Every environment the process can read: its own, and /proc's (the token typed in base64 so
    // that only an environment can show it in clear).
    const encoded = Buffer.from(runnerToken).toString("base64");
    const s = await pipes(
      `id -u; id -un; pwd; env; t=$(echo ${encoded} | base64 -d); ` +
        `for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' 2>/dev/null < "$f"; done | ` +
        `grep -a -c -F -e "$t" -e RUNNER_TOKEN= -e REDIS_URL= -e BROKER_URL= -e OUTPUT_RETAIN_BYTES=`,
      { env: { EXTRA: "requested" } },
    );
    const done = await acme.ended(s.id);
    const out = (await acme.outputStream(s.id, "stdout", 0, done.offset)).toString();
    const lines = out.split("\n");
    expect(lines.slice(0, 3)).toEqual([String(uid), name, SANDBOX_HOME]);
    expect(lines).toContain("EXTRA=requested");
    expect(lines.at(-2)).toBe("0"); // grep -c: no line of any readable environment
    expect(done.exitCode).toBe(1); // grep found nothing
    for (const secretName of ["RUNNER_TOKEN", "REDIS_URL", "BROKER_URL", "OUTPUT_RETAIN_BYTES"]) {
      expect(out).not.toContain(secretName);
    }
    expect((await fetchOutput(acme, s.id, 0)).bytes.toString()).not.toContain(runnerToken);
  });

  it("lets a viewer token send neither eof nor input, on REST or the WebSocket", async () => {
    const s = await session({ pty: false, command: "/usr/bin/tr", args: ["a-z", "A-Z"] });
    const minted = await acme.request("POST", `/v1/sessions/${s.id}/tokens`, { role: "viewer" });
    expect(minted.status).toBe(201);
    const viewer = minted.body.token as string;
    const asViewer = new Api(url, viewer);
    const forbidden = { error: { code: "FORBIDDEN", message: expect.any(String) } };
    expect(await asViewer.inputRequest(s.id, { data: "", eof: true })).toMatchObject({ status: 403, body: forbidden });
    expect(await asViewer.inputRequest(s.id, { data: "viewer-rest\n", eof: true })).toMatchObject({ status: 403, body: forbidden });
    expect(await asViewer.inputRequest(s.id, { data: "viewer-rest\n" })).toMatchObject({ status: 403, body: forbidden });

    const watching = connect(s.id, "from=0", viewer);
    await watching.opened;
    watching.send("viewer-ws\n");
    watching.eof();
    await watching.waitFor(() => watching.messages.filter((m) => m.type === "error").length === 2, "two refusals");
    expect(watching.messages.filter((m) => m.type === "error")).toEqual([
      { type: "error", code: "FORBIDDEN", message: expect.any(String) },
      { type: "error", code: "FORBIDDEN", message: expect.any(String) },
    ]);
    expect((await acme.get(s.id)).status).toBe("running");

    // The owner's eof ends it; nothing of the viewer's reached tr.
    expect(await acme.inputRequest(s.id, { data: "owner\n", eof: true })).toMatchObject({ status: 202 });
    expect(await watching.waitForMessage((m) => m.type === "exit", "exit")).toMatchObject({ exitCode: 0, offset: 6 });
    expect(watching.text).toBe("OWNER\n");
    expect((await fetchOutput(acme, s.id, 0)).bytes.toString()).toBe("OWNER\n");
  });

  it("answers 404 to another tenant on a pty: false session's output, streams, input and socket", async () => {
    const s = await pipes("echo secret-out; echo secret-err >&2; exec sleep 1000");
    const client = connect(s.id);
    await client.waitForOutput("secret-err\n");
    for (const [method, path, body] of [
      ["GET", `/v1/sessions/${s.id}`],
      ["GET", `/v1/sessions/${s.id}/output`],
      ["GET", `/v1/sessions/${s.id}/output?stream=stdout`],
      ["GET", `/v1/sessions/${s.id}/output?stream=stderr`],
      ["POST", `/v1/sessions/${s.id}/input`, { data: "", eof: true }],
      ["POST", `/v1/sessions/${s.id}/resize`, { cols: 90, rows: 30 }],
    ] as [string, string, unknown?][]) {
      const res = await globex.request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toEqual({ error: { code: "NOT_FOUND", message: expect.any(String) } });
    }
    const foreignSse = suite.cleanup.stream(new SseClient(url, s.id, TENANTS.globex));
    await foreignSse.done;
    expect(foreignSse.status).toBe(404);
    const code = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/sessions/${s.id}/connect`, {
        headers: { authorization: `Bearer ${TENANTS.globex}` },
      });
      ws.on("message", () => {}); // an error message may come before the close
      ws.on("close", (c) => resolve(c));
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.on("error", () => {});
    });
    expect(code).toBe(4004);
    expect((await acme.get(s.id)).status).toBe("running");
  });

  it("reports the exit after every byte when a child holding stdout writes on and on", async () => {
    const s = await pipes(`(while :; do echo tick; sleep 0.01; done) & echo "ticker=$!"; read _; echo bye`);
    const client = connect(s.id);
    await client.waitForOutput(/ticker=\d+\n(tick\n)+/);
    const printed = Number(/ticker=(\d+)\n/.exec(client.text)?.[1]);
    const ticker = onHost(s.pid as number, printed);
    spawned(ticker);
    expect(await acme.inputRequest(s.id, { data: "", eof: true })).toMatchObject({ status: 202 });
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 20_000);
    expect(exit).toMatchObject({ type: "exit", status: "exited", exitCode: 0, reason: "exit" });
    // Every byte before the exit, none after it; the log holds exactly those.
    expect(exit.offset).toBe(client.nextOffset);
    const exitAt = client.timeline.findIndex((e) => e.kind === "message" && e.message.type === "exit");
    expect(client.timeline.slice(exitAt + 1).filter((e) => e.kind !== "message")).toEqual([]);
    expect(client.offsetErrors).toEqual([]);
    expect(client.text.split("\n").filter((l) => l !== "tick")).toEqual([`ticker=${printed}`, "bye", ""]);
    await until(() => !alive(ticker), 10_000, "the ticker to end");
    const done = await acme.get(s.id);
    expect(done).toMatchObject({ status: "exited", offset: exit.offset });
    expect((await fetchOutput(acme, s.id, 0)).bytes.equals(client.output)).toBe(true);
  });

  it("ends a process whose children hold stdout open: the exit is reported and the children are gone", async () => {
    // The background sleep and the setsid one keep the pipes open after sh exits. sh waits for
    // stdin's end before it exits, so that both children have printed their pids first.
    const s = await pipes(`sleep 1000 & echo "child=$!"; setsid -f sh -c 'echo "escapee=$$"; exec sleep 1000'; read _; echo hi`);
    const client = connect(s.id);
    await client.waitForOutput(/escapee=\d+\n/);
    const printed = { child: Number(/child=(\d+)\n/.exec(client.text)?.[1]), escapee: Number(/escapee=(\d+)\n/.exec(client.text)?.[1]) };
    const pid = (await acme.get(s.id)).pid as number;
    const child = onHost(pid, printed.child);
    const escapee = onHost(pid, printed.escapee);
    spawned(child, escapee);
    expect(commandOf(child)).toBe("sleep 1000");
    await until(() => commandOf(escapee) === "sleep 1000", 5000, "the escapee to run sleep");
    expect(await acme.inputRequest(s.id, { data: "", eof: true })).toMatchObject({ status: 202 });
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 20_000);
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: client.nextOffset });
    expect(client.text).toBe(`child=${printed.child}\nescapee=${printed.escapee}\nhi\n`);
    expect(client.offsetErrors).toEqual([]);
    await until(() => !alive(child) && !alive(escapee), 10_000, "the session's children to end");
    expect(alive(pid)).toBe(false);
    expect(liveSessionProcesses(pid)).toEqual([]);
    expect(await acme.get(s.id)).toMatchObject({ status: "exited", exitCode: 0, reason: "exit", offset: exit.offset });
  });
});
