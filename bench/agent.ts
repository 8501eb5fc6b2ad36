// What the agent layer costs (issue 15, docs/protocol.md §3, "Agents"): the emulator's memory per
// idle session, `run`, `expect`, `from=screen` and `onLag=screen`. One function per measurement;
// each runs once and returns raw numbers with the baseline measured beside it; rows/ repeats them,
// takes medians and ratios, and builds rows 5 (the emulator's part, rows/scale.ts), 9–11
// (rows/agent.ts) and 12 (rows/lag.ts).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { ExpectResult } from "../shared/agent.js";
import { AgentHost } from "../runner/agent/agent-host.js";
import { TerminalScreen } from "../runner/agent/screen.js";
import { BASH_INIT } from "../runner/agent/shell-integration.js";
import { FramedViewer } from "./framed-viewer.js";
import { floodBytes, floodCommand } from "./measures.js";
import { STOCK_HOME } from "./scale.js";
import type { BenchStack } from "./stack.js";
import { type BenchTerm, BASH, rawTerm, settle, waitForMarker } from "./terminals.js";

/** The shell-integration marks a default session's prompt carries (runner/agent/bash-init.sh). */
const MARK_B = "\x1b]133;B\x07";
const MARK_D_OK = "\x1b]133;D;0\x07";
/**
 * An idle login shell's output as the runner's emulator sees it (captured from a session on
 * this machine: stock dotfiles, bracketed paste on, the marks around the prompt).
 */
const IDLE_PROMPT =
  "\x1b[?2004h\x1b]133;D;0\x07\x1b]133;A\x07ptyb-0123456789ab@vm:~$ \x1b]133;B\x07" +
  "\x1b[7mtrue\x1b[27m\b\b\b\btrue\r\n\x1b[?2004l\r\x1b]133;C\x07\x1b]133;D;0\x07\x1b[?2004h\x1b]133;D;0\x07" +
  "\x1b]133;A\x07ptyb-0123456789ab@vm:~$ \x1b]133;B\x07";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- Row 5: the emulator's memory, in this process ----

export interface ScreenMemory {
  count: number;
  /** JS heap + array buffers per idle TerminalScreen (80×24, no scrollback), bytes. */
  screenBytes: number;
  /** The same per AgentHost (the screen and the shell tracker a hosted session holds). */
  hostBytes: number;
  /** The same per AgentHost once its idle screen has dropped its emulator (RUNNER_SCREEN_IDLE_MS). */
  droppedHostBytes: number;
  /** How many of the hosts' screens dropped it (the others kept theirs: their state does not round-trip). */
  dropped: number;
}

/**
 * `count` idle screens as the runner keeps one per hosted session, created beside each other in
 * this process and fed an idle login prompt; heap and buffers after full collections, before
 * and after, per screen. Then the same with AgentHost (screen + shell tracker).
 */
export async function screenMemory(count: number): Promise<ScreenMemory> {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const used = () => {
    gc();
    gc();
    const { heapUsed, arrayBuffers } = process.memoryUsage();
    return heapUsed + arrayBuffers;
  };
  const prompt = Buffer.from(IDLE_PROMPT, "latin1");

  let before = used();
  let screens = Array.from({ length: count }, () => new TerminalScreen({ cols: 80, rows: 24 }));
  for (const screen of screens) screen.write(0, prompt);
  await Promise.all(screens.map((screen) => screen.snapshot()));
  const screenBytes = (used() - before) / count;
  for (const screen of screens) screen.dispose();
  screens = [];

  const port = { send: () => undefined, type: () => undefined, screenBehind: () => undefined, failed: () => undefined };
  before = used();
  let hosts = Array.from({ length: count }, (_, i) => new AgentHost(`bench/${i}`, port, { cols: 80, rows: 24, shellIntegration: true }));
  for (const host of hosts) host.output(0, prompt);
  await Promise.all(hosts.map((host) => host.screen.snapshot()));
  const hostBytes = (used() - before) / count;
  for (const host of hosts) host.dispose();
  hosts = [];

  // The same hosts once idle: each screen drops its emulator (one at a time, as the sweep does).
  before = used();
  hosts = Array.from({ length: count }, (_, i) => new AgentHost(`bench/${i}`, port, { cols: 80, rows: 24, shellIntegration: true }));
  for (const host of hosts) host.output(0, prompt);
  await Promise.all(hosts.map((host) => host.screen.parsed()));
  let dropped = 0;
  for (const host of hosts) if (await host.screen.drop()) dropped++;
  const droppedHostBytes = (used() - before) / count;
  for (const host of hosts) host.dispose();
  hosts = [];
  return { count, screenBytes, hostBytes, droppedHostBytes, dropped };
}

/** A session of the default login shell (bash with the shell integration), at its prompt. */
async function agentSession(stack: BenchStack): Promise<string> {
  const { id } = await stack.api.create({ tags: ["bench-agent"] });
  // The harness asks again while the shell is still starting (BUSY).
  await stack.api.run(id, "true", { deadlineMs: 30_000 });
  return id;
}

// ---- Row 9: run ----

export interface RunTrips {
  /** POST …/run of `true`, request to answer, one per run. */
  runMs: number[];
  /** By the runner's clock (same machine): request sent → the command's C mark (typed, started). */
  toStartMs: number[];
  /** The command's D mark (run answered at the runner) → the answer at the client. */
  afterEndMs: number[];
  /** `true` typed over a framed socket on the same session → its D mark at that client. */
  typedMs: number[];
}

/**
 * `count` runs of `true` on one default session, each followed by the same command typed over
 * a framed socket attached to it (same session, same shell, no REST and no tracker in the way).
 */
export async function runRoundTrips(stack: BenchStack, count: number): Promise<RunTrips> {
  const id = await agentSession(stack);
  const viewer = await FramedViewer.connect(stack, id, { from: "live" });
  // Date.now() on both sides: the runner stamps startedAt with it.
  const wall = () => Date.now();
  const result: RunTrips = { runMs: [], toStartMs: [], afterEndMs: [], typedMs: [] };
  try {
    for (let i = -5; i < count; i++) {
      // Its prompt (B) is back at the client before anything is typed again.
      let prompt = waitForMarker(viewer, MARK_B, 30_000);
      const sent = wall();
      const started = performance.now();
      const res = await stack.api.runRequest(id, "true");
      const ms = performance.now() - started;
      const received = wall();
      if (res.status !== 200 || res.body.exitCode !== 0) throw new Error(`run: ${res.status} ${JSON.stringify(res.body)}`);
      await prompt;
      prompt = waitForMarker(viewer, MARK_B, 30_000);
      const ended = waitForMarker(viewer, MARK_D_OK, 30_000);
      const typed = performance.now();
      viewer.send("true\r");
      const end = await ended;
      await prompt;
      if (i < 0) continue; // warm-up
      const startedAt = Date.parse(res.body.startedAt);
      result.runMs.push(ms);
      result.toStartMs.push(startedAt - sent);
      result.afterEndMs.push(received - (startedAt + res.body.durationMs));
      result.typedMs.push(end.at - typed);
    }
    return result;
  } finally {
    await viewer.close();
    await stack.api.destroy(id);
  }
}

/** The baseline: bash on node-pty in this process, started as the runner starts a default session's; `true` → its D mark. */
export async function rawRunTrips(count: number): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), "ptybroker-bench-init-"));
  const initFile = join(dir, "bash-init");
  writeFileSync(initFile, BASH_INIT);
  const firstPrompt = (term: BenchTerm) => waitForMarker(term, MARK_B, 30_000);
  const term = rawTerm({ command: "/bin/bash", args: ["--init-file", initFile], home: STOCK_HOME });
  try {
    await firstPrompt(term);
    const ms: number[] = [];
    for (let i = -5; i < count; i++) {
      const prompt = waitForMarker(term, MARK_B, 30_000);
      const ended = waitForMarker(term, MARK_D_OK, 30_000);
      const typed = performance.now();
      term.send("true\r");
      const end = await ended;
      await prompt;
      if (i >= 0) ms.push(end.at - typed);
    }
    return ms;
  } finally {
    await term.close();
  }
}

/** The edge's HTTP floor: GET /healthz (no session object, no storage), request to answer. */
export async function restFloor(stack: BenchStack, count: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = -5; i < count; i++) {
    const started = performance.now();
    const res = await fetch(`${stack.url}/healthz`);
    await res.text();
    if (i >= 0) ms.push(performance.now() - started);
  }
  return ms;
}

// ---- Row 10: expect ----

export interface ExpectTrips {
  /** Input sent (a framed input frame) → the marker's output at a framed client. */
  socketMs: number[];
  /** Input sent → the answer of an expect for that marker, waiting since before the input. */
  expectMs: number[];
}

/** How long an expect is given to be waiting at the edge before the input goes. */
const EXPECT_PENDING_MS = 25;

/**
 * `count` times on one default session: an expect for a fresh marker is asked (from the
 * client's offset, so nothing typed earlier can match), left pending, then `echo` of the
 * marker is typed over a framed socket; the times at which that socket sees the marker and at
 * which the expect answers, both from the input.
 */
export async function expectLatency(stack: BenchStack, count: number): Promise<ExpectTrips> {
  const id = await agentSession(stack);
  const viewer = await FramedViewer.connect(stack, id, { from: "live" });
  const result: ExpectTrips = { socketMs: [], expectMs: [] };
  try {
    for (let i = -3; i < count; i++) {
      const n = i + 3;
      // Printed as EXP-42-n: the echoed command line (EXP-$((6*7))-n) never matches.
      const marker = `EXP-42-${n}`;
      const from = viewer.offset;
      const answer = stack.api
        .expectRequest(id, { pattern: marker, literal: true, from, timeoutSec: 30 })
        .then((res) => ({ res, at: performance.now() }));
      await sleep(EXPECT_PENDING_MS);
      const seen = waitForMarker(viewer, marker, 30_000);
      const prompt = waitForMarker(viewer, MARK_B, 30_000);
      const typed = performance.now();
      viewer.send(`echo EXP-$((6*7))-${n}\r`);
      const sighted = await seen;
      const { res, at } = await answer;
      const body = res.body as ExpectResult;
      if (res.status !== 200 || !body.matched) throw new Error(`expect: ${res.status} ${JSON.stringify(res.body)}`);
      await prompt;
      if (i < 0) continue;
      result.socketMs.push(sighted.at - typed);
      result.expectMs.push(at - typed);
    }
    return result;
  } finally {
    await viewer.close();
    await stack.api.destroy(id);
  }
}

// ---- Row 11: from=screen ----

export interface Attach {
  /** Dial → the first binary frame (the screen's 0x04, or the first replayed output). */
  firstFrameMs: number;
  /** Dial → `live`. */
  liveMs: number;
  /** Payload bytes received until `live` (messages and frames, as decompressed). */
  bytes: number;
  /** Bytes the socket read until `live` (the upgrade answer included; permessage-deflate applied). */
  wireBytes: number;
  screens: number;
}

/** A default session whose history is `bytes` of base64 of random bytes (one long line), then idle. */
export async function historySession(stack: BenchStack, bytes: number): Promise<{ id: string; offset: number }> {
  const id = await agentSession(stack);
  const viewer = await FramedViewer.connect(stack, id, { from: "live" });
  try {
    const end = waitForMarker(viewer, "BENCH-42-END", 120_000);
    viewer.send(`stty -echo; head -c ${Math.round((bytes * 3) / 4)} /dev/urandom | base64 -w 0; echo; echo BENCH-$((6*7))-END; stty echo\r`);
    await end;
    await settle(viewer);
  } finally {
    await viewer.close();
  }
  // The screen has read every byte (the emulator parses 8 MiB in some hundreds of ms).
  const { offset } = await stack.api.get(id);
  for (;;) {
    const res = await stack.api.request<{ offset: number }>("GET", `/v1/sessions/${id}/screen`);
    if (res.status !== 200) throw new Error(`screen: ${res.status} ${JSON.stringify(res.body)}`);
    if (res.body.offset >= offset) return { id, offset };
    await sleep(100);
  }
}

/** One attach to `id`, from its screen or with its whole history (`from` omitted), until `live`. */
export async function attach(stack: BenchStack, id: string, from: "screen" | undefined, offset: number): Promise<Attach> {
  const viewer = await FramedViewer.connect(stack, id, from ? { from } : {});
  try {
    const { dialledAt, firstFrameAt, liveAt } = viewer;
    if (firstFrameAt === undefined || liveAt === undefined) throw new Error("no frame before live");
    if (viewer.offset !== offset || viewer.offsetErrors.length > 0) {
      throw new Error(`attach ${from ?? "full"}: at ${viewer.offset} of ${offset}; ${viewer.offsetErrors.slice(0, 3).join("; ")}`);
    }
    if (from === "screen" ? viewer.screens !== 1 : viewer.received !== offset) {
      throw new Error(`attach ${from ?? "full"}: ${viewer.screens} screens, ${viewer.received} bytes of ${offset}`);
    }
    return {
      firstFrameMs: firstFrameAt - dialledAt,
      liveMs: liveAt - dialledAt,
      bytes: viewer.payloadBytes,
      wireBytes: viewer.wireBytes,
      screens: viewer.screens,
    };
  } finally {
    await viewer.close();
  }
}

// ---- Row 12: onLag=screen under a flood ----

export interface LagFanOut {
  viewers: number;
  paused: number;
  /** The flood's bytes over the time until the first reading viewer saw its end. */
  ptyMBps: number;
  /** The last reading viewer's speed. */
  slowestMBps: number;
  /** Viewers the edge closed (4008 or otherwise). */
  cuts: number;
  /** Reading viewers that got every byte (no gap). */
  readingComplete: number;
  /** Skips (`gap`s) and screens per paused viewer. */
  pausedGaps: number[];
  pausedScreens: number[];
  /** Output bytes a paused viewer received once it read again (what waited for it in buffers, and any replay under way), median. */
  pausedReceived: number;
  /** Skips among the reading viewers, in all. */
  readingGaps: number;
  /** Resume of the paused viewers → every viewer at the session's final offset. */
  drainMs: number;
  offsetErrors: string[];
  workerdBaseKiB: number;
  workerdPeakKiB: number;
}

/**
 * `viewers` framed clients with onLag=screen on one session (bash, as row 3), the last `paused`
 * of them paused (socket not read, nothing acknowledged) from before the flood to after it;
 * the flood of rows 2 and 3 typed by the first (of zeros, or of random bytes: `source`). Then
 * the paused ones read again and must reach the session's end offset, through skips, uncut.
 */
export async function lagFanOut(
  stack: BenchStack,
  viewers: number,
  paused: number,
  bytes: number,
  source: "/dev/zero" | "/dev/urandom" = "/dev/zero",
): Promise<LagFanOut> {
  const { id } = await stack.api.create({ ...BASH, tags: ["bench-agent"] });
  const all: FramedViewer[] = [];
  let sampling: NodeJS.Timeout | undefined;
  try {
    for (let i = 0; i < viewers; i++) all.push(await FramedViewer.connect(stack, id, { from: "live", onLag: "screen" }));
    const writer = all[0] as FramedViewer;
    const reading = all.slice(0, viewers - paused);
    const sleeping = all.slice(viewers - paused);
    await settle(writer);
    for (const viewer of sleeping) viewer.pause();
    const workerdBaseKiB = stack.workerdRssKiB();
    let workerdPeakKiB = workerdBaseKiB;
    sampling = setInterval(() => (workerdPeakKiB = Math.max(workerdPeakKiB, stack.workerdRssKiB())), 100);

    const started = performance.now();
    const ends = reading.map((viewer) => floodEnd(viewer, 300_000));
    writer.send(floodCommand(bytes, undefined, source));
    const endedAt = await Promise.all(ends);
    const seconds = endedAt.map((at) => (at - started) / 1000);
    const flood = floodBytes(bytes);

    // The session is idle again once the writer's offset stays put (its prompt came).
    let final = writer.offset ?? 0;
    for (;;) {
      await sleep(500);
      if (writer.offset === final) break;
      final = writer.offset ?? 0;
    }
    const before = sleeping.map((viewer) => viewer.received);
    const resumed = performance.now();
    for (const viewer of sleeping) viewer.resume();
    const deadline = Date.now() + 120_000;
    while (all.some((viewer) => (viewer.offset ?? 0) < final && !viewer.cut)) {
      if (Date.now() > deadline) throw new Error(`viewers still behind ${final} after 120 s`);
      await sleep(20);
    }
    const drainMs = performance.now() - resumed;
    clearInterval(sampling);
    sampling = undefined;
    return {
      viewers,
      paused,
      ptyMBps: flood / 1e6 / Math.min(...seconds),
      slowestMBps: flood / 1e6 / Math.max(...seconds),
      cuts: all.filter((viewer) => viewer.cut).length,
      readingComplete: reading.filter((v) => v.gaps === 0 && v.offsetErrors.length === 0 && v.offset === final).length,
      pausedGaps: sleeping.map((viewer) => viewer.gaps),
      pausedScreens: sleeping.map((viewer) => viewer.screens),
      pausedReceived: median(sleeping.map((viewer, i) => viewer.received - (before[i] ?? 0))),
      readingGaps: reading.reduce((n, viewer) => n + viewer.gaps, 0),
      drainMs,
      offsetErrors: all.flatMap((viewer) => viewer.offsetErrors),
      workerdBaseKiB,
      workerdPeakKiB,
    };
  } finally {
    if (sampling) clearInterval(sampling);
    await Promise.all(all.map((viewer) => viewer.close()));
    await stack.api.destroy(id);
  }
}

/** When `viewer` saw the flood's end marker: in its output, or drawn on a screen it skipped to. */
function floodEnd(viewer: FramedViewer, deadlineMs: number): Promise<number> {
  const needle = Buffer.from("BENCH-42-END");
  let carry = Buffer.alloc(0);
  return new Promise((resolve, reject) => {
    const done = (at: number | undefined) => {
      clearTimeout(timer);
      offOutput();
      offScreen();
      if (at === undefined) reject(new Error(`viewer: no ${needle} after ${deadlineMs} ms`));
      else resolve(at);
    };
    const offOutput = viewer.onData((chunk) => {
      const window = carry.byteLength ? Buffer.concat([carry, chunk]) : chunk;
      if (window.indexOf(needle) >= 0) return done(performance.now());
      carry = Buffer.from(window.subarray(Math.max(0, window.byteLength - needle.byteLength + 1)));
    });
    const offScreen = viewer.onScreen((repaint) => {
      if (repaint.indexOf(needle) >= 0) done(performance.now());
      carry = Buffer.alloc(0);
    });
    const timer = setTimeout(() => done(undefined), deadlineMs);
  });
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? NaN;
}
