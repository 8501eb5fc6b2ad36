// Rows 13–14 (issue 16): processes without a terminal. Row 13: `POST /v1/exec` of `true`, request
// to answer, beside the floors it stands on (spawning `true` in this process; the edge's HTTP
// round trip) and the PTY `run` of row 9. Row 14: a `pty: false` session's flood at a framed
// client beside the same flood on a PTY session, and both beside this process reading the same
// command on pipes and on node-pty directly; once more with half of it on stderr.
import { spawn } from "node:child_process";
import { spawnPty } from "../runner/process/pty.js";
import type { BenchStack } from "./stack.js";
import { stackTerm } from "./terminals.js";

/**
 * `count` execs of `true` after 5 warm-ups: request → answer, ms; and the answers' durationMs.
 * `extra` goes into each request's body (row 15: `network`).
 */
export async function execTrips(stack: Pick<BenchStack, "api">, count: number, extra: Record<string, unknown> = {}): Promise<{ ms: number[]; serverMs: number[] }> {
  const ms: number[] = [];
  const serverMs: number[] = [];
  for (let i = -5; i < count; i++) {
    const started = performance.now();
    const res = await stack.api.request<{ exitCode: number | null; durationMs: number; id: string }>("POST", "/v1/exec", { ...extra, command: "true" });
    const took = performance.now() - started;
    if (res.status !== 200 || res.body.exitCode !== 0) throw new Error(`exec: ${res.status} ${JSON.stringify(res.body)}`);
    await stack.api.destroy(res.body.id);
    if (i < 0) continue;
    ms.push(took);
    serverMs.push(res.body.durationMs);
  }
  return { ms, serverMs };
}

/** `count` spawns of `true` in this process, spawn → exit, ms: the floor of starting a process. */
export async function spawnTrips(count: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = -5; i < count; i++) {
    const started = performance.now();
    await new Promise<void>((resolve, reject) => {
      const child = spawn("true", [], { stdio: ["pipe", "pipe", "pipe"] });
      child.once("error", reject);
      child.once("close", () => resolve());
    });
    if (i >= 0) ms.push(performance.now() - started);
  }
  return ms;
}

/** A flood of `bytes` of `a` (no newlines: a terminal passes them as they are), all to stdout or half to stderr. */
export function floodScript(bytes: number, split: boolean): string {
  const half = Math.floor(bytes / 2);
  return split
    ? `(head -c ${half} /dev/zero | tr '\\0' a) & (head -c ${bytes - half} /dev/zero | tr '\\0' b >&2); wait`
    : `head -c ${bytes} /dev/zero | tr '\\0' a`;
}

/**
 * MB/s of a flood at a framed, acking client of a session (`pty` or pipes): the session waits on
 * a line of input, so the clock starts when the input goes and stops when the last byte is in.
 */
export async function sessionFlood(stack: BenchStack, bytes: number, pty: boolean, split = false): Promise<number> {
  // A terminal would echo the line typed to start it: echo is off there, and the script says so
  // with one byte ("#") before it reads the line, so only that byte and the flood arrive (typing
  // before it, the line could come before `stty -echo` and be echoed).
  const script = `${pty ? "stty -echo; " : ""}printf '#'; read go; ${floodScript(bytes, split)}`;
  const session = await stack.api.create({ pty, command: "/bin/sh", args: ["-c", script] });
  const term = await stackTerm(stack, session.id);
  try {
    // Within a deadline, so that a flood that never comes fails this row instead of the bench.
    const waitFor = (count: number, deadlineMs: number) =>
      new Promise<number>((resolve, reject) => {
        if (term.received >= count) return resolve(performance.now());
        const timer = setTimeout(() => {
          off();
          reject(new Error(`${pty ? "PTY" : "pty: false"} flood: ${term.received} of ${count} bytes after ${deadlineMs} ms; the edge said: ${term.errors?.join("; ") || "nothing"}`));
        }, deadlineMs);
        const off = term.onData(() => {
          if (term.received < count) return;
          off();
          clearTimeout(timer);
          resolve(performance.now());
        });
      });
    await waitFor(1, 30_000);
    const done = waitFor(bytes + 1, 120_000);
    const started = performance.now();
    term.send("\n");
    const ended = await done;
    if (term.received !== bytes + 1) throw new Error(`received ${term.received - 1} of ${bytes}`);
    return bytes / 1e6 / ((ended - started) / 1000);
  } finally {
    await term.close();
    await stack.api.destroy(session.id);
  }
}

/** MB/s of the same flood read by this process: on pipes (child_process), or on node-pty. */
export async function localFlood(bytes: number, pty: boolean, split = false): Promise<number> {
  const script = floodScript(bytes, split);
  const started = performance.now();
  let received = 0;
  if (pty) {
    const term = spawnPty({ command: "/bin/sh", args: ["-c", script], cwd: process.cwd(), env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, cols: 80, rows: 24 });
    term.onData((chunk) => (received += chunk.byteLength));
    await new Promise<void>((resolve) => term.onExit(() => resolve()));
  } else {
    const child = spawn("/bin/sh", ["-c", script], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.on("data", (chunk: Buffer) => (received += chunk.byteLength));
    child.stderr.on("data", (chunk: Buffer) => (received += chunk.byteLength));
    await new Promise<void>((resolve) => child.once("close", () => resolve()));
  }
  if (received !== bytes) throw new Error(`read ${received} of ${bytes}`);
  return bytes / 1e6 / ((performance.now() - started) / 1000);
}
