// Issue 15, the screen (docs/protocol.md §3, "Agents"; §5; §5b) on the real stack:
// `GET .../screen` as json, text and ansi (the ansi bytes drawn by @xterm/headless must show the
// json's lines) for a shell, a full-screen program (less) in the alternate screen, a title, an
// ended session and a session whose runner was SIGKILLed (rebuilt from the Redis log by another
// runner); `from=screen` over a framed and a raw WebSocket and over SSE on 4 MB of history (a
// small repaint, then output continuing exactly at its offset, compared byte for byte with
// `GET .../output`); and `onLag=screen`, a paused framed client on a flood that is moved on (gap,
// screen, live) rather than cut. The last two run on an edge, Redis and runners of this file's
// own, stopped by PID.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import type { ScreenState } from "../shared/agent.js";
import type { Session } from "../shared/session.js";
import type { Edge, ManagedProcess } from "../scripts/stack.js";
import { TENANTS } from "./global-setup.js";
import {
  Api,
  SseClient,
  type SuiteStack,
  TermClient,
  line,
  onSharedStack,
  renderScreen,
  startSuiteStack,
  until,
} from "./harness.js";

// This file's own stack (the SIGKILLed runner, onLag=screen) is the cleanup's too, stopped after
// the file, and so are the processes of the session whose runner was SIGKILLed.
const suite = onSharedStack();
const { url, api, cleanup } = suite;

function session(body: Record<string, unknown> = {}, on: Api = api): Promise<Session> {
  return suite.session(body, on);
}

function connect(id: string, query: string, on: { url: string; key: string } = { url, key: TENANTS.acme }): TermClient {
  return cleanup.client(new TermClient(on.url, id, on.key, { query }));
}

/** The screen once it has read every byte the session has produced, and `check` holds for it. */
async function settledScreen(id: string, check: (screen: ScreenState) => boolean = () => true, on: Api = api) {
  return until(
    async () => {
      const [screen, s] = await Promise.all([on.screen(id), on.get(id)]);
      return screen.offset === s.offset && check(screen) ? screen : undefined;
    },
    20_000,
    `the screen of ${id} to settle`,
  );
}

/** `format=text` and `format=ansi` of the same moment agree with the json (the session is quiet). */
async function checkFormats(id: string, json: ScreenState, on: Api = api): Promise<void> {
  const text = await on.screenRaw(id, "text");
  expect(text.status).toBe(200);
  expect(text.bytes.toString("utf8")).toBe(json.lines.join("\n"));
  const ansi = await on.screenRaw(id, "ansi");
  expect(ansi.status).toBe(200);
  expect(ansi.headers.get("x-offset")).toBe(String(json.offset));
  expect(ansi.headers.get("x-cols")).toBe(String(json.cols));
  expect(ansi.headers.get("x-rows")).toBe(String(json.rows));
  const drawn = await renderScreen(ansi.bytes, json.cols, json.rows);
  expect(drawn.lines).toEqual(json.lines);
  expect(drawn.alternate).toBe(json.alternate);
  expect(drawn.cursor).toEqual({ x: json.cursor.x, y: json.cursor.y });
}

/** Printed lines `alpha 1`..`alpha n`. */
function alpha(from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => `alpha ${from + i}`);
}

describe("a screen that a tenant cannot break", () => {
  it("a resize narrower then taller under long lines: that session's screen goes on, and a neighbour's screen and run too", { timeout: 60_000 }, async () => {
    // xterm 6.0.0 with no line above the screen threw on the next line feed; in the agent thread
    // that ended the thread, and with it every session's screen and `run` on the runner
    // (docs/architecture.md, "Text that scrolls away unseen").
    const attacker = await session({ cols: 80, rows: 24 });
    const neighbour = await session({ cols: 80, rows: 24 });
    await api.inputAt(attacker.id, "for i in 1 2 3 4 5 6; do printf 'x%.0s' $(seq 250); echo; done\r");
    await settledScreen(attacker.id, (screen) => screen.lines.some((l) => l.startsWith("xxxx")));
    for (const [cols, rows] of [[26, 29], [69, 30]]) {
      expect((await api.request("POST", `/v1/sessions/${attacker.id}/resize`, { cols, rows })).status).toBe(200);
    }
    await api.inputAt(attacker.id, "seq -f 'after %g' 1 40\r");
    const screen = await settledScreen(attacker.id, (s) => s.lines.includes("after 40"));
    expect(screen).toMatchObject({ cols: 69, rows: 30 });
    expect(screen.lines.filter((l) => /^after \d+$/.test(l)).at(-2)).toBe("after 39");
    // The neighbour's agent layer is whole: its screen follows, and `run` answers.
    await api.inputAt(neighbour.id, "echo neighbour-$((2+3))\r");
    await settledScreen(neighbour.id, (s) => s.lines.includes("neighbour-5"));
    expect(await api.run(neighbour.id, "echo ran-$((3+4))")).toMatchObject({ exitCode: 0, output: "ran-7\n" });
  });
});

describe("GET .../screen", () => {
  it("shows less in the alternate screen, and the shell's lines back after it quits", async () => {
    const s = await session({ cols: 80, rows: 24 });
    await api.inputAt(s.id, 'cd "$(mktemp -d)" && seq -f "alpha %g" 1 100 > f.txt && clear\r');
    // After `clear`: the prompt alone on the first row.
    const before = await settledScreen(
      s.id,
      // the cursor too: a CI run once caught the screen between the prompt's line and its end (y 1)
      (screen) =>
        screen.lines[0] !== "" &&
        screen.lines[0]?.includes("$") === true &&
        screen.lines.slice(1).every((l) => l === "") &&
        screen.cursor.y === 0,
    );
    expect(before).toMatchObject({ cols: 80, rows: 24, alternate: false, cursor: { y: 0, visible: true } });
    expect(before.lines).toHaveLength(24);
    await checkFormats(s.id, before);

    await api.inputAt(s.id, "less f.txt\r");
    const inLess = await settledScreen(s.id, (screen) => screen.alternate && screen.lines[0] === "alpha 1");
    expect(inLess).toMatchObject({ cols: 80, rows: 24, alternate: true });
    expect(inLess.lines).toHaveLength(24);
    expect(inLess.lines.slice(0, 23)).toEqual(alpha(1, 23));
    expect(inLess.lines[23]).toContain("f.txt");
    expect(inLess.offset).toBeGreaterThan(before.offset);
    await checkFormats(s.id, inLess);
    // A program holds the terminal: run is refused, not typed into less.
    const busy = await api.runRequest(s.id, "echo not-typed");
    expect(busy.status).toBe(409);
    expect(busy.body).toMatchObject({ error: { code: "BUSY" } });

    // A page down, then quit.
    await api.inputAt(s.id, " ");
    const paged = await settledScreen(s.id, (screen) => screen.lines[0] === "alpha 24");
    expect(paged.lines.slice(0, 23)).toEqual(alpha(24, 46));
    await api.inputAt(s.id, "q");
    const after = await settledScreen(s.id, (screen) => !screen.alternate && screen.lines[1] !== "");
    // The main screen as it was, the command on the prompt's row, a new prompt below.
    const prompt = before.lines[0] as string;
    expect(after.lines).toEqual([
      `${prompt.padEnd(before.cursor.x)}less f.txt`,
      prompt,
      ...Array.from({ length: 22 }, () => ""),
    ]);
    expect(after).toMatchObject({ alternate: false, cursor: { x: before.cursor.x, y: 1, visible: true } });
    await checkFormats(s.id, after);
  });

  it("has the title a program set", async () => {
    const s = await session({ cols: 100, rows: 30 });
    const untitled = await settledScreen(s.id, (screen) => screen.lines[0]?.includes("$") === true);
    expect(untitled.title).toBeNull();
    expect(untitled).toMatchObject({ cols: 100, rows: 30 });
    await api.inputAt(s.id, "printf '\\033]0;%s\\007' hello\r");
    const titled = await settledScreen(s.id, (screen) => screen.title === "hello");
    expect(titled.title).toBe("hello");
    // The title is not text on the screen (the echoed command line names it apart: `%s` … `hello`).
    expect(titled.lines.join("\n")).not.toContain("0;hello");
    expect(titled.cursor.visible).toBe(true);

    // A hidden cursor, and a new size (the screen follows it in the order of the stream).
    await api.inputAt(s.id, "printf '\\033[?25%s' l\r");
    const hidden = await settledScreen(s.id, (screen) => !screen.cursor.visible);
    expect(hidden).toMatchObject({ title: "hello", cols: 100, rows: 30, cursor: { visible: false } });
    const resized = await api.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 50, rows: 12 });
    expect(resized.status).toBe(200);
    await api.inputAt(s.id, "echo size-$((6*7))\r");
    const small = await settledScreen(s.id, (screen) => screen.lines.includes("size-42"));
    expect(small).toMatchObject({ cols: 50, rows: 12, title: "hello" });
    expect(small.lines).toHaveLength(12);
    expect(small.lines.every((l) => l.length <= 50)).toBe(true);
    await checkFormats(s.id, small);
  });

  it("is kept after the session exits", async () => {
    // Wide characters take two cells each, a combining accent none.
    const s = await session({
      command: "/bin/sh",
      args: ["-c", "printf 'first\\n\\346\\227\\245\\346\\234\\254 e\\314\\201!\\n\\033[1mthird\\033[0m'"],
      cols: 40,
      rows: 5,
    });
    const ended = await api.request<Session>("GET", `/v1/sessions/${s.id}/wait?timeoutSec=20`);
    expect(ended.body).toMatchObject({ status: "exited", exitCode: 0 });
    const screen = await api.screen(s.id);
    expect(screen).toEqual({
      offset: ended.body.offset,
      cols: 40,
      rows: 5,
      cursor: { x: 5, y: 2, visible: true },
      alternate: false,
      title: null,
      lines: ["first", "日本 e\u0301!", "third", "", ""],
    });
    await checkFormats(s.id, screen);
  });

  it("refuses an unknown format with 400 and another tenant's session with 404", async () => {
    const s = await session({ command: "/bin/cat" });
    const bad = await api.request("GET", `/v1/sessions/${s.id}/screen?format=png`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: "INVALID_REQUEST" } });
    const other = await new Api(url, TENANTS.globex).request("GET", `/v1/sessions/${s.id}/screen`);
    expect(other.status).toBe(404);
  });
});

describe("from=screen on 4 MB of history", () => {
  let s: Session;
  const REPAINT_LIMIT = 64 * 1024;

  beforeAll(async () => {
    s = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"], cols: 80, rows: 24 });
    const reader = connect(s.id, "from=live");
    await reader.waitForMessage((m) => m.type === "live", "live");
    reader.send("head -c 3000000 /dev/zero | base64 -w 100; echo hist-$((1+1))\r");
    await reader.waitForOutput(line("hist-2"), 60_000);
    reader.socket.terminate();
    expect((await api.get(s.id)).offset).toBeGreaterThan(4_000_000);
  }, 90_000);

  it("framed: hello, screen, a 0x04 frame under 64 KiB, then output exactly from its offset", async () => {
    const snap = await settledScreen(s.id, (screen) => screen.lines.some((l) => l.includes("hist-2")));
    const client = connect(s.id, "from=screen");
    await client.waitFor(() => client.screens.length > 0, "the screen frame");
    expect(client.timeline[0]).toMatchObject({ kind: "message", message: { type: "hello" } });
    expect(client.timeline[1]).toEqual({
      kind: "message",
      message: { type: "screen", offset: snap.offset, cols: 80, rows: 24 },
    });
    expect(client.timeline[2]).toMatchObject({ kind: "screen", offset: snap.offset });
    const frame = client.screens[0] as { offset: number; data: Buffer };
    expect(frame.data.byteLength).toBeGreaterThan(0);
    expect(frame.data.byteLength).toBeLessThan(REPAINT_LIMIT);
    const drawn = await renderScreen(frame.data, 80, 24);
    expect(drawn.lines).toEqual(snap.lines);
    expect(drawn.cursor).toEqual({ x: snap.cursor.x, y: snap.cursor.y });

    client.send("echo MARK-$((3*3))\r");
    await client.waitForOutput(line("MARK-9"));
    const end = await until(
      async () => {
        const now = (await api.get(s.id)).offset;
        return client.nextOffset === now ? now : undefined;
      },
      10_000,
      "the client to hold every byte",
    );
    expect(client.offsetErrors).toEqual([]);
    expect(client.screens).toHaveLength(1);
    expect(client.startOffset).toBe(snap.offset);
    expect(client.messages.filter((m) => m.type === "gap" || m.type === "error")).toEqual([]);
    expect(client.output.equals(await api.outputRange(s.id, snap.offset, end))).toBe(true);
    // Nothing but the output frames after the screen's.
    expect(client.timeline.slice(3).filter((e) => e.kind === "screen")).toEqual([]);
  });

  it("raw: the repaint bytes, then the output from the screen's offset, byte for byte", async () => {
    const snap = await settledScreen(s.id);
    const client = connect(s.id, "from=screen&mode=raw");
    await client.waitFor(() => client.output.byteLength > 0, "the repaint");
    const typed = await api.inputAt(s.id, "echo MARK-$((4*4))\r");
    // Nothing was output since the snapshot: what the input causes starts at the screen's offset.
    expect(typed.offset).toBe(snap.offset);
    await client.waitForOutput(line("MARK-16"));
    const live = await until(
      async () => {
        const now = (await api.get(s.id)).offset;
        const bytes = await api.outputRange(s.id, snap.offset, now);
        return client.output.byteLength > bytes.byteLength && client.output.subarray(-bytes.byteLength).equals(bytes)
          ? bytes
          : undefined;
      },
      10_000,
      "the raw client to end with the output since the screen",
    );
    const repaint = client.output.subarray(0, client.output.byteLength - live.byteLength);
    expect(repaint.byteLength).toBeLessThan(REPAINT_LIMIT);
    const drawn = await renderScreen(repaint, 80, 24);
    expect(drawn.lines).toEqual(snap.lines);
    expect(drawn.cursor).toEqual({ x: snap.cursor.x, y: snap.cursor.y });
  });

  it("SSE: a screen event (id = its offset), then data events from that offset", async () => {
    const snap = await settledScreen(s.id);
    const stream = cleanup.stream(new SseClient(url, s.id, TENANTS.acme, { query: "from=screen" }));
    await stream.waitFor(() => stream.events.length > 0, "the first event");
    const first = stream.events[0] as { event: string; id: string | undefined; data: string };
    expect(stream.status).toBe(200);
    expect(first.event).toBe("screen");
    expect(first.id).toBe(String(snap.offset));
    const payload = JSON.parse(first.data) as { offset: number; cols: number; rows: number; data: string };
    expect(Object.keys(payload).sort()).toEqual(["cols", "data", "offset", "rows"]);
    expect(payload).toMatchObject({ offset: snap.offset, cols: 80, rows: 24 });
    const repaint = Buffer.from(payload.data, "base64");
    expect(repaint.byteLength).toBeLessThan(REPAINT_LIMIT);
    expect((await renderScreen(repaint, 80, 24)).lines).toEqual(snap.lines);

    await api.inputAt(s.id, "echo MARK-$((5*5))\r");
    await stream.waitFor(() => stream.bytes.includes("MARK-25\r\n"), "MARK-25");
    const end = await until(
      async () => {
        const now = (await api.get(s.id)).offset;
        return snap.offset + stream.bytes.byteLength === now ? now : undefined;
      },
      10_000,
      "the stream to hold every byte",
    );
    expect(stream.events.filter((e) => e.event !== "data").map((e) => e.event)).toEqual(["screen"]);
    expect(stream.lastEventId).toBe(String(end));
    expect(stream.bytes.equals(await api.outputRange(s.id, snap.offset, end))).toBe(true);
    stream.close();
  });
});

describe("on a stack of this file's own", () => {
  const TENANT = "screens";
  const KEY = "screens-key";
  /** Small, so that a few MB of flood put a paused client well past it. */
  const MAX_CLIENT_LAG_BYTES = 1024 * 1024;
  let stack: SuiteStack;
  let edge: Edge;
  let own: Api;
  let first: ManagedProcess;

  function dumpOnFailure(): void {
    onTestFailed(() => {
      for (const proc of [edge, ...cleanup.runners]) console.error(`---- pid ${proc.pid} ----\n${proc.output().slice(-6000)}`);
    });
  }

  beforeAll(async () => {
    stack = await startSuiteStack(
      {
        apiKeys: `${TENANT}:${KEY}`,
        persistTo: cleanup.tempFolder("ptybroker-screen-"),
        vars: { MAX_CLIENT_LAG_BYTES: String(MAX_CLIENT_LAG_BYTES), LINK_GRACE_MS: "3000" },
        redis: true,
        runners: [{ runnerId: "screen-first" }],
      },
      cleanup,
    );
    edge = stack.edge;
    own = new Api(edge.url, KEY);
    [first] = stack.runners;
  }, 90_000);

  it("onLag=screen: a paused framed client on a flood gets gap, screen, then live, and stays connected", { timeout: 120_000 }, async () => {
    dumpOnFailure();
    const s = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"], cols: 80, rows: 24 }, own);
    const on = { url: edge.url, key: KEY };
    const paused = connect(s.id, "from=live&onLag=screen", on);
    const pausedLive = await paused.waitForMessage((m) => m.type === "live", "live");
    paused.socket.pause(); // stops reading: the edge's sends pile up, and no acknowledgements go out

    // About 4 MB, four times the lag allowed, typed and awaited through REST: a second socket
    // reading the flood in this process could itself fall 1 MiB behind on a loaded machine and be
    // cut as a slow consumer (4008), as it should be.
    await own.inputAt(s.id, "stty -echo; head -c 3000000 /dev/zero | base64 -w 200; echo flood-$((6*7))\r");
    // expect reads `\r\n` as `\n` (docs/protocol.md §3, "Agents"): a pattern with `\r\n` never
    // matched, and this wait sat out its whole 60 s before the client resumed.
    const floodEnd = await own.expectOutput(s.id, { pattern: "flood-42\n", literal: true, from: pausedLive.offset as number, timeoutSec: 60 });
    expect(floodEnd).toMatchObject({ matched: true, match: "flood-42\n" });
    paused.socket.resume();
    await paused.waitFor(() => paused.screens.length > 0, "a screen frame", 30_000);
    // Caught up (it may skip again while it drains what it had been sent): then live output reaches it.
    const flooded = (await own.get(s.id)).offset;
    await paused.waitFor(() => (paused.nextOffset ?? 0) >= flooded, "the paused client to catch up", 30_000);
    await own.inputAt(s.id, "echo after-$((1+2))\r");
    await paused.waitForOutput(line("after-3"), 30_000);
    const end = await until(
      async () => {
        const now = (await own.get(s.id)).offset;
        return paused.nextOffset === now ? now : undefined;
      },
      15_000,
      "the paused client to hold every byte",
    );

    // Never cut; still answering.
    expect(paused.closeCode).toBeUndefined();
    paused.control({ type: "ping" });
    await paused.waitForMessage((m) => m.type === "pong", "pong");
    expect(paused.offsetErrors).toEqual([]);
    expect(paused.messages.filter((m) => m.type === "error")).toEqual([]);

    // What it got, in order: output from its live offset; then, each time it was moved on, a gap
    // from where its output had reached to the screen's offset, `screen`, the 0x04 frame there,
    // and output from that offset.
    const gaps = paused.messages.filter((m) => m.type === "gap");
    expect(gaps.length).toBeGreaterThanOrEqual(1);
    let reached = pausedLive.offset as number;
    let moves = 0;
    const timeline = paused.timeline.filter((e) => !(e.kind === "message" && ["replay", "live", "pong", "hello"].includes(e.message.type)));
    for (let i = 0; i < timeline.length; i++) {
      const entry = timeline[i];
      if (entry?.kind === "output") {
        expect(entry.offset).toBe(reached);
        reached += entry.length;
      } else if (entry?.kind === "message" && entry.message.type === "gap") {
        const gap = entry.message;
        expect(gap.from).toBe(reached);
        expect(gap.to).toBeGreaterThan(gap.from);
        expect(timeline[i + 1]).toEqual({ kind: "message", message: { type: "screen", offset: gap.to, cols: 80, rows: 24 } });
        expect(timeline[i + 2]).toMatchObject({ kind: "screen", offset: gap.to });
        reached = gap.to;
        moves++;
        i += 2;
      } else {
        throw new Error(`unexpected ${JSON.stringify(entry)} at ${i} of the paused client's timeline`);
      }
    }
    expect(moves).toBe(gaps.length);
    expect(reached).toBe(end);

    // Every run of output it got is the log's, byte for byte; the last one reaches the end.
    const runs = paused.runs();
    expect(runs.length).toBe(gaps.length + 1);
    for (const run of runs) {
      if (run.to > run.from) expect(run.bytes.equals(await own.outputRange(s.id, run.from, run.to))).toBe(true);
    }
    expect(runs.at(-1)?.to).toBe(end);
    // Each repaint draws the screen at its offset: the last one, drawn and followed by the output
    // after it, is the screen now.
    const lastRepaint = paused.screens.at(-1) as { offset: number; data: Buffer };
    const now = await settledScreen(s.id, () => true, own);
    const drawn = await renderScreen(Buffer.concat([lastRepaint.data, runs.at(-1)?.bytes ?? Buffer.alloc(0)]), 80, 24);
    expect(drawn.lines).toEqual(now.lines);
  });

  it("is rebuilt from the Redis log by another runner after the hosting runner was SIGKILLed", { timeout: 90_000 }, async () => {
    dumpOnFailure();
    const s = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"], cols: 80, rows: 12 }, own);
    const sid = s.pid as number;
    cleanup.orphanSession(sid);
    // Output at one size, then another size: the rebuild must replay the resize where it happened.
    await own.inputAt(s.id, `echo ${"w".repeat(70)}\r`);
    await settledScreen(s.id, (screen) => screen.lines.includes("w".repeat(70)), own);
    expect((await own.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 60, rows: 10 })).status).toBe(200);
    await own.inputAt(s.id, "printf 'kept %s\\n' one two three; printf '\\033]0;%s\\007' killed\r");
    const snap = await settledScreen(s.id, (screen) => screen.title === "killed" && screen.lines.some((l) => l === "kept three"), own);
    expect(snap).toMatchObject({ cols: 60, rows: 10 });
    expect(snap.lines).toHaveLength(10);
    expect(snap.lines.filter((l) => l.startsWith("kept "))).toEqual(["kept one", "kept two", "kept three"]);

    first.kill("SIGKILL");
    await first.exited;
    cleanup.runners.delete(first);
    await until(async () => (await own.get(s.id)).status === "lost", 30_000, "status lost");
    expect((await own.get(s.id)).offset).toBe(snap.offset);

    stack.startRunner({ runnerId: "screen-second" });
    await stack.waitForRunner("screen-second");
    const rebuilt = await until(
      async () => {
        const res = await own.request<ScreenState>("GET", `/v1/sessions/${s.id}/screen`);
        return res.status === 200 ? res.body : undefined;
      },
      20_000,
      "the screen from the second runner",
    );
    expect(rebuilt).toEqual(snap);
    await checkFormats(s.id, rebuilt, own);
  });
});
