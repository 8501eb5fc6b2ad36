// One function per measurement of issue 6; each runs once and returns raw numbers.
// rows/terminal.ts (and knobs.ts) repeats them, takes medians and ratios, and builds the rows.
import { type Child, startChild } from "./children.js";
import type { FanOutReport, FanOutRequest, ViewerResult } from "./fan-out-viewers.js";
import type { FloodViewerReport, FloodViewerRequest } from "./flood-viewer.js";
import { cpuMs, descendantsNamed } from "./proc.js";
import { percentile } from "./stats.js";
import { type BenchTerm, BASH, type StackTermOptions, settle, stackSession, stackTerm, waitForMarker } from "./terminals.js";
import type { BenchStack } from "./stack.js";

/** Sends one printable byte at a time to `cat` in raw mode and times each echo. */
export async function echoRoundTrips(term: BenchTerm, keystrokes: number): Promise<{ p50: number; p99: number }> {
  await startCat(term);
  return catEchoes(term, keystrokes);
}

/** The shell in raw mode runs `cat`, which echoes each byte as it comes (row 16 times it twice). */
export async function startCat(term: BenchTerm): Promise<void> {
  await settle(term, "stty raw -echo");
  term.send("cat\r");
  // cat is running once a probe byte comes back.
  await roundTrip(term, "#", 10_000);
}

/** `keystrokes` echoes of single bytes from the `cat` startCat started: p50 and p99, ms. */
export async function catEchoes(term: BenchTerm, keystrokes: number): Promise<{ p50: number; p99: number }> {
  const samples: number[] = [];
  for (let i = 0; i < keystrokes; i++) {
    samples.push(await roundTrip(term, String.fromCharCode(97 + (i % 26)), 5_000));
  }
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

function roundTrip(term: BenchTerm, key: string, deadlineMs: number): Promise<number> {
  const code = key.charCodeAt(0);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const timer = setTimeout(() => {
      off();
      reject(new Error(`${term.name}: no echo of ${key} in ${deadlineMs} ms`));
    }, deadlineMs);
    const off = term.onData((bytes) => {
      if (!bytes.includes(code)) return;
      const ms = performance.now() - started;
      off();
      clearTimeout(timer);
      resolve(ms);
    });
    term.send(key);
  });
}

/**
 * The flood of rows 2 and 3: `bytes` of printable base64 in 200-column lines, then a marker.
 * Of zeros (compresses ~1000× under permessage-deflate) unless `source` says otherwise.
 */
export function floodCommand(bytes: number, marker = "BENCH-$((6*7))-END", source = "/dev/zero"): string {
  return `stty -echo; head -c ${Math.round((bytes * 3) / 4)} ${source} | base64 -w 200; echo ${marker}\r`;
}
const FLOOD_END = "BENCH-42-END";

/** Expected output bytes of floodCommand(bytes): base64 text plus CRLF after every 200 columns. */
export function floodBytes(bytes: number): number {
  const text = Math.ceil(Math.round((bytes * 3) / 4) / 3) * 4;
  return text + Math.ceil(text / 200) * 2;
}

export interface Throughput {
  /** Million bytes per second, from sending the command to seeing the end marker. */
  mbps: number;
  bytes: number;
  cuts: number;
}

/** Row 2: one reader, `bytes` of output. */
export async function throughput(term: BenchTerm, bytes: number): Promise<Throughput> {
  await settle(term);
  const started = performance.now();
  const seen = waitForMarker(term, FLOOD_END);
  term.send(floodCommand(bytes));
  const end = await seen;
  check(end.bytes, bytes, term.name);
  return { mbps: end.bytes / 1e6 / ((end.at - started) / 1000), bytes: end.bytes, cuts: term.cuts };
}

function check(received: number, bytes: number, who: string): void {
  const expected = floodBytes(bytes);
  if (received < expected || received > expected + 4096) {
    throw new Error(`${who}: received ${received} bytes, expected ${expected} and a few more`);
  }
}

export interface FanOut {
  viewers: number;
  /** PTY speed: the flood's bytes over the time until the first viewer saw its end. */
  ptyMBps: number;
  /** The last viewer's speed. */
  slowestMBps: number;
  /** Viewers that received every byte of the flood, in order (offsets are checked per frame). */
  complete: number;
  cuts: number;
  /** Socket bytes read per viewer during the flood (framing and compression included), median. */
  wirePerViewer: number;
  /** CPU used during the flood, in % of one core: workerd (every process), the runner, the bench (this process and its viewer processes). */
  cpu: { workerd: number; runner: number; bench: number };
}

/** CPU time of the stack's parts and of this process, ms. */
function cpuNow(stack: BenchStack, children: { pid: number }[] = []): { workerd: number; runner: number; bench: number } {
  const used = process.cpuUsage();
  return {
    workerd: descendantsNamed(stack.edge.pid, "workerd").reduce((sum, pid) => sum + cpuMs(pid), 0),
    runner: cpuMs(stack.runner.pid),
    bench: (used.user + used.system) / 1000 + children.reduce((sum, child) => sum + cpuMs(child.pid), 0),
  };
}

/** Row 3's viewers beyond the first are spread over this many child processes at most. */
const VIEWER_PROCESSES = 4;

/**
 * Row 3: `viewers` framed clients on one session, the flood typed by the first (in this
 * process); the others in up to VIEWER_PROCESSES children (fan-out-viewers.ts).
 */
export async function fanOut(
  stack: BenchStack,
  viewers: number,
  bytes: number,
  options: StackTermOptions = {},
  source = "/dev/zero",
): Promise<FanOut> {
  const session = await stack.api.create(BASH);
  const id = session.id;
  const writer = await stackTerm(stack, id, "live", options);
  const others = viewers - 1;
  const processes = Math.min(VIEWER_PROCESSES, others);
  const children: Child<FanOutRequest, FanOutReport>[] = [];
  let finished = false;
  try {
    for (let i = 0; i < processes; i++) {
      const count = Math.floor(others / processes) + (i < others % processes ? 1 : 0);
      const args = [stack.url, stack.apiKey, id, String(count), options.deflate ? "1" : "0", FLOOD_END];
      children.push(startChild<FanOutRequest, FanOutReport>("./fan-out-viewers.ts", args));
    }
    await Promise.all(children.map((child) => child.next("ready", 60_000)));
    await settle(writer);
    const watching = Promise.all(children.map((child) => child.next("watching", 10_000)));
    for (const child of children) child.send({ type: "watch" });
    await watching;
    const done = Promise.all(children.map((child) => child.next("done", 300_000)));
    const wireBefore = writer.wireBytes;
    const cpuBefore = cpuNow(stack, children);
    const started = performance.timeOrigin + performance.now();
    const ownEnd = waitForMarker(writer, FLOOD_END, 300_000);
    writer.send(floodCommand(bytes, undefined, source));
    const own = await ownEnd;
    const results: ViewerResult[] = [
      { bytes: own.bytes, atEpochMs: performance.timeOrigin + own.at, cuts: writer.cuts, wire: writer.wireBytes - wireBefore },
      ...(await done).flatMap((report) => report.viewers),
    ];
    const cpuAfter = cpuNow(stack, children);
    const elapsedMs = Math.max(...results.map((r) => r.atEpochMs)) - started;
    const share = (part: keyof typeof cpuBefore) => (100 * (cpuAfter[part] - cpuBefore[part])) / elapsedMs;
    const seconds = results.map((r) => (r.atEpochMs - started) / 1000);
    let complete = 0;
    for (const r of results) {
      try {
        check(r.bytes, bytes, "viewer");
        complete++;
      } catch {
        // counted as incomplete
      }
    }
    const closed = Promise.all(children.map((child) => child.next("closed", 30_000)));
    for (const child of children) child.send({ type: "close" });
    await closed;
    finished = true;
    const wire = results.map((r) => r.wire);
    return {
      viewers,
      ptyMBps: own.bytes / 1e6 / Math.min(...seconds),
      slowestMBps: own.bytes / 1e6 / Math.max(...seconds),
      complete,
      cuts: results.reduce((n, r) => n + r.cuts, 0),
      wirePerViewer: percentile(wire, 50),
      cpu: { workerd: share("workerd"), runner: share("runner"), bench: share("bench") },
    };
  } finally {
    await Promise.all(children.map((child) => child.exited(!finished)));
    await writer.close();
    await stack.api.destroy(id);
  }
}

/** Row 4: a session with `bytes` of history in Redis; a new client from=0 until `live`. */
export async function replay(stack: BenchStack, bytes: number): Promise<{ ms: number; replayed: number }> {
  const { id, term } = await stackSession(stack);
  try {
    // One unbroken base64 line of exactly `bytes` characters, then the marker.
    const seen = waitForMarker(term, FLOOD_END);
    term.send(`stty -echo; head -c ${(bytes * 3) / 4} /dev/zero | base64 -w 0; echo; echo BENCH-$((6*7))-END\r`);
    await seen;
    await term.close();
    const session = await stack.api.get(id);
    const started = performance.now();
    const client = await stackTerm(stack, id, 0);
    const ms = performance.now() - started;
    const replayed = client.received;
    await client.close();
    if (replayed !== session.offset) throw new Error(`replayed ${replayed} of ${session.offset} bytes`);
    return { ms, replayed };
  } finally {
    await stack.api.destroy(id);
  }
}

/** Row 7: `yes` floods the terminal; Ctrl+C; time until the prompt is back. */
export async function interrupt(term: BenchTerm): Promise<number> {
  await settle(term, "PS1='PROMPT-$((6*7))> '");
  const flooding = waitForMarker(term, "y\r\ny\r\ny\r\n".repeat(64));
  term.send("yes\r");
  await flooding;
  const prompt = waitForMarker(term, "PROMPT-42> ", 30_000);
  const started = performance.now();
  term.send("\x03");
  const back = await prompt;
  return back.at - started;
}

/** Row 17: one session's keystroke echo, with its neighbour on the same runner idle and then flooding. */
export interface FloodNeighbour {
  idle: { p50: number; p99: number };
  flooded: { p50: number; p99: number };
  /** The flooding session's output rate while the echoes were timed, at its viewer. */
  floodMBps: number;
}

/**
 * Row 17: session B runs `cat` (as row 1); its echo is timed with session A idle, then while A
 * floods (`yes` of 100-byte lines, a framed viewer taking every byte), in the same run; then
 * Ctrl+C ends A's flood and its prompt comes back. Both sessions are on the bench stack's one runner.
 */
export async function floodNeighbourEcho(stack: BenchStack, keystrokes: number): Promise<FloodNeighbour> {
  const a = await stack.api.create(BASH);
  const b = await stackSession(stack);
  let viewer: Child<FloodViewerRequest, FloodViewerReport> | undefined;
  let stopped = false;
  try {
    await startCat(b.term);
    const idle = await catEchoes(b.term, keystrokes);
    viewer = startChild<FloodViewerRequest, FloodViewerReport>("./flood-viewer.ts", [stack.url, stack.apiKey, a.id]);
    await viewer.next("flooding", 60_000);
    const before = await received(viewer);
    const started = performance.now();
    const flooded = await catEchoes(b.term, keystrokes);
    const floodMBps = ((await received(viewer)) - before) / 1e6 / ((performance.now() - started) / 1000);
    viewer.send({ type: "stop" });
    await viewer.next("stopped", 60_000);
    stopped = true;
    return { idle, flooded, floodMBps };
  } finally {
    await viewer?.exited(!stopped);
    await b.term.close();
    for (const id of [a.id, b.id]) await stack.api.destroy(id);
  }
}

/** A's bytes at its viewer so far. */
async function received(viewer: Child<FloodViewerRequest, FloodViewerReport>): Promise<number> {
  const answer = viewer.next("received", 10_000);
  viewer.send({ type: "mark" });
  return (await answer).bytes;
}

export { BASH };
