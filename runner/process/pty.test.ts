// Real node-pty, real /bin/sh: every byte a short-lived process writes arrives before its
// exit (node-pty alone loses the last KB now and then), also across pause()/resume(), and
// exit codes and signals are reported as before.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PtyExit, type PtyProcess, spawnPty } from "./pty.js";
import { statFields } from "./proc.js";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "pty-test-"));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function spawnSh(script: string): PtyProcess {
  return spawnPty({
    command: "/bin/sh",
    args: ["-c", script],
    cwd: dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TERM: "xterm-256color" },
    cols: 80,
    rows: 24,
  });
}

interface Run {
  output: () => Buffer;
  /** Resolves with the exit and the number of bytes received before it. */
  exited: Promise<{ exit: PtyExit; bytesBeforeExit: number }>;
}

function collect(pty: PtyProcess): Run {
  const chunks: Buffer[] = [];
  let bytes = 0;
  pty.onData((chunk) => {
    chunks.push(chunk);
    bytes += chunk.length;
  });
  const exited = new Promise<{ exit: PtyExit; bytesBeforeExit: number }>((resolve) =>
    pty.onExit((exit) => resolve({ exit, bytesBeforeExit: bytes })),
  );
  return { output: () => Buffer.concat(chunks), exited };
}

/** Polls `condition` until it holds; fails at the deadline. */
async function until(what: string, condition: () => boolean, deadlineMs = 5000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** This process's open pseudo-terminal master fds. */
function ptmxFds(): Set<string> {
  const fds = new Set<string>();
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === "/dev/ptmx") fds.add(fd);
    } catch {
      // closed meanwhile
    }
  }
  return fds;
}

/** Spawns and returns the terminal's master fd (to see when node-pty closes its read side). */
function spawnTracked(script: string): { pty: PtyProcess; masterFd: string } {
  const before = ptmxFds();
  const pty = spawnSh(script);
  const added = [...ptmxFds()].filter((fd) => !before.has(fd));
  expect(added).toHaveLength(1);
  return { pty, masterFd: added[0] };
}

/** The command name and state of a process, from /proc (null once it is gone). */
function procInfo(pid: number): { comm: string; state: string } | null {
  try {
    const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    const state = statFields(pid)?.[0];
    return state ? { comm, state } : null;
  } catch {
    return null;
  }
}

const crlfToLf = (bytes: Buffer) => Buffer.from(bytes.toString("latin1").replaceAll("\r\n", "\n"), "latin1");

describe("spawnPty", () => {
  it("delivers every byte of short-lived processes before their exit", async () => {
    const runs = 30;
    const concurrency = 6;
    let next = 0;
    const failures: string[] = [];
    const one = async (i: number) => {
      const copy = join(dir, `out-${i}.b64`);
      // What the process prints goes to the terminal and, through tee, to a file.
      const run = collect(spawnSh(`head -c 60000 /dev/urandom | base64 | tee ${copy}`));
      const { exit, bytesBeforeExit } = await run.exited;
      const printed = readFileSync(copy);
      const received = crlfToLf(run.output());
      expect(exit).toEqual({ exitCode: 0, signal: null });
      expect(bytesBeforeExit).toBe(run.output().length); // nothing after the exit
      if (!received.equals(printed)) failures.push(`run ${i}: ${received.length} of ${printed.length} bytes`);
    };
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < runs) await one(next++);
      }),
    );
    expect(failures).toEqual([]);
  }, 15_000);

  it("holds a paused process back and delivers all ~200 KB before the exit on resume", async () => {
    const payload = randomBytes(150_000).toString("base64"); // 200,000 bytes, no newlines
    writeFileSync(join(dir, "big.b64"), payload);
    const { pty } = spawnTracked("exec cat big.b64");
    pty.pause();
    const run = collect(pty);
    let paused = true;
    let exitedWhilePaused = false;
    void run.exited.then(() => (exitedWhilePaused = paused));
    // cat reads a regular file, so once it is cat and sleeping it is blocked writing to the
    // full terminal: what we have not read holds it back.
    await until("cat blocks on the paused terminal", () => {
      const info = procInfo(pty.pid);
      return info?.comm === "cat" && info.state === "S";
    });
    expect(run.output().length).toBe(0);
    paused = false;
    pty.resume();
    const { exit, bytesBeforeExit } = await run.exited;
    expect(exitedWhilePaused).toBe(false);
    expect(exit).toEqual({ exitCode: 0, signal: null });
    expect(bytesBeforeExit).toBe(payload.length);
    expect(run.output().toString("latin1")).toBe(payload);
  });

  it("keeps what a process wrote before exiting while paused, and reports the exit after it", async () => {
    // Small enough for the kernel and Node to hold, so the process exits while we read nothing.
    const payload = randomBytes(6000).toString("base64");
    writeFileSync(join(dir, "small.b64"), payload);
    const { pty, masterFd } = spawnTracked("exec cat small.b64");
    pty.pause();
    const run = collect(pty);
    let paused = true;
    let exitedWhilePaused = false;
    void run.exited.then(() => (exitedWhilePaused = paused));
    // node-pty closes its read side (EIO, or its timeout after the exit) while we are paused.
    await until("node-pty closes the terminal", () => !ptmxFds().has(masterFd));
    expect(run.output().length).toBe(0);
    expect(exitedWhilePaused).toBe(false); // bytes are held back, so is the exit
    paused = false;
    pty.resume();
    const { exit, bytesBeforeExit } = await run.exited;
    expect(exit).toEqual({ exitCode: 0, signal: null });
    expect(bytesBeforeExit).toBe(payload.length);
    expect(run.output().toString("latin1")).toBe(payload);
  });

  it("reports an exit code", async () => {
    const { exit } = await collect(spawnSh("exit 7")).exited;
    expect(exit).toEqual({ exitCode: 7, signal: null });
  });

  it("reports the signal that ended the process", async () => {
    const pty = spawnSh("exec sleep 30");
    const run = collect(pty);
    await until("sleep runs", () => procInfo(pty.pid)?.comm === "sleep");
    pty.signalProcess("SIGKILL");
    const { exit } = await run.exited;
    expect(exit).toEqual({ exitCode: null, signal: "SIGKILL" });
  });
});
