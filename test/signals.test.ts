// Signals reach the session's processes only (docs/security.md, "Sessions and the runner host";
// issue 38, finding 1), attacked as a hostile tenant would on the shared stack's root runner with
// its sandbox: a session makes its terminal's foreground group one of its own and lets it die, the
// terminal keeps the dead number, the host reuses it for a process group of its own (the test
// steers the host's next pid with /proc/sys/kernel/ns_last_pid, as root) and a SIGKILL through
// the API must not reach it. Ctrl+C typed, and SIGINT and SIGTERM through the API, still end an
// ordinary foreground job; a session without a terminal gets its signal. The same on a root runner
// of the suite's own without a sandbox (RUNNER_SANDBOX=none: sessions as tenant users, host pids).
// This suite must run as root (CI does).
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { statFields } from "../runner/process/proc.js";
import { Api, SuiteCleanup, TermClient, alive, line, liveSessionProcesses, onSharedStack, startSuiteStack, until } from "./harness.js";

const suite = onSharedStack({ clients: "close" });

/** The prompt of `bash --norc --noprofile` (`bash-5.2$ `). */
const PROMPT = /\$ $/;

/** Where sessions are made: a stack's edge and a tenant on it. */
interface Place {
  url: string;
  api: Api;
  /** ends its clients and sessions */
  cleanup: SuiteCleanup;
}

const shared = (): Place => ({ url: suite.url, api: suite.api, cleanup: suite.cleanup });

/** A bash session with a client attached, at its prompt; purged after the file. */
async function shell(place: Place) {
  const s = await place.api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
  place.cleanup.session(place.api, s.id);
  const client = place.cleanup.client(new TermClient(place.url, s.id, place.api.key as string));
  await client.opened;
  await client.waitForOutput(PROMPT, 10_000);
  return { s, client, leader: s.pid as number };
}

/** The terminal's foreground process group as the host numbers it (tpgid of the session's first process). */
function foreground(leader: number): number {
  return Number(statFields(leader)?.[5]);
}

/** The host pid of the session's `sleep <seconds>`, once it runs; null before. */
function sleepPid(leader: number, seconds: string): number | null {
  for (const pid of liveSessionProcesses(leader)) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\0${seconds}\0`) return pid;
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

/** How long until `pid` is gone, looked at every millisecond (at most `deadlineMs`). */
async function msUntilGone(pid: number, start: number, deadlineMs = 5000): Promise<number> {
  while (alive(pid)) {
    if (performance.now() - start > deadlineMs) throw new Error(`${pid} still runs after ${deadlineMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return performance.now() - start;
}

/**
 * A `sleep 1000` on the host, started by the test, in a process group (and session) of its own
 * whose id is `pgid`: the host's next pid is steered to it through ns_last_pid, tried again when
 * another process took the number first.
 */
async function hostProcessWithGroup(pgid: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    writeFileSync("/proc/sys/kernel/ns_last_pid", String(pgid - 1));
    const child = spawn("/bin/sleep", ["1000"], { detached: true, stdio: "ignore" }); // detached: setsid(), its pid is its group
    const pid = child.pid as number;
    child.unref();
    if (pid === pgid && Number(statFields(pid)?.[2]) === pgid) {
      suite.cleanup.strayProcess(pid, "/bin/sleep 1000");
      return pid;
    }
    process.kill(pid, "SIGKILL");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`no host process could be given the group id ${pgid}`);
}

/**
 * The attack: the session's shell becomes a python3 whose child takes the terminal for a group of
 * its own and dies; a host process is given that group's number; a SIGKILL through the API.
 */
async function deadForegroundGroup(place: Place): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("test/signals.test.ts must run as root (ns_last_pid)");
  const { s, client, leader } = await shell(place);
  const shellGroup = foreground(leader);
  // The shell becomes a python3 whose child takes the terminal for a group of its own and
  // dies; the parent reaps it (freeing the number) and sleeps in the background.
  const attack = [
    "import os, signal, sys, time",
    "signal.signal(signal.SIGTTOU, signal.SIG_IGN)",
    "child = os.fork()",
    "if child == 0:",
    "    os.setpgid(0, 0)",
    "    os.tcsetpgrp(0, os.getpgrp())",
    "    os._exit(0)",
    "os.waitpid(child, 0)",
    "print('dead-group', child, flush=True)",
    "time.sleep(1000)",
  ].join("\n");
  client.send(`exec python3 -c "$(printf '%s' '${Buffer.from(attack).toString("base64")}' | base64 -d)"\n`);
  await client.waitForOutput(/dead-group \d+/, 10_000);
  let dead = 0;
  await until(() => {
    dead = foreground(leader);
    return dead > 0 && dead !== shellGroup;
  }, 5000, "the terminal's foreground group to change");
  // Dead: no process has that group any more.
  expect(liveSessionProcesses(leader).filter((pid) => Number(statFields(pid)?.[2]) === dead)).toEqual([]);

  const victim = await hostProcessWithGroup(dead);
  expect(Number(statFields(victim)?.[2])).toBe(dead);
  expect(foreground(leader)).toBe(dead);

  const res = await place.api.request("POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGKILL" });
  expect(res.status).toBe(202);
  // No foreground member is the session's: the session's own shell (the python3) gets it.
  const waited = await place.api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=5`);
  expect(alive(victim), "the host's process with the dead group's number").toBe(true);
  expect(waited.body).toMatchObject({ status: "exited", signal: "SIGKILL" });
  process.kill(victim, "SIGKILL");
}

/** Ctrl+C typed, then SIGINT and SIGTERM through the API, each to a `sleep` in the foreground. */
async function foregroundJobs(place: Place): Promise<void> {
  const { s, client, leader } = await shell(place);
  const timings: Record<string, number> = {};
  let n = 0;
  for (const how of ["typed", "SIGINT", "SIGTERM"] as const) {
    const seconds = String(100 + ++n);
    client.send(`sleep ${seconds}\n`);
    let sleep: number | null = null;
    await until(() => (sleep = sleepPid(leader, seconds)) !== null, 5000, `sleep ${seconds} to run`);
    const start = performance.now();
    const gone = msUntilGone(sleep as unknown as number, start);
    if (how === "typed") client.send("\x03");
    else expect((await place.api.request("POST", `/v1/sessions/${s.id}/signal`, { signal: how })).status).toBe(202);
    timings[how] = Math.round(await gone);
    client.send(`echo "rc${n}=$?"\n`);
    await client.waitForOutput(line(`rc${n}=${how === "SIGTERM" ? 143 : 130}`), 5000);
  }
  console.log(`signal latency (ms, request to the job's end, ${place.url === suite.url ? "sandboxed" : "RUNNER_SANDBOX=none"}): ${JSON.stringify(timings)}`);
  expect((await place.api.get(s.id)).status).toBe("running");
}

describe("signals from the API reach the session only, in a sandbox", () => {
  it("a SIGKILL for a dead foreground group whose number the host reused leaves the host's process alive", () => deadForegroundGroup(shared()));

  it("Ctrl+C typed, and SIGINT and SIGTERM through the API, still end a foreground job", () => foregroundJobs(shared()));

  it("a session without a terminal (pty: false) gets its signal", async () => {
    const s = await suite.session({ command: "/bin/sleep", args: ["300"], pty: false });
    expect((await suite.api.request("POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGTERM" })).status).toBe(202);
    const waited = await suite.api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=10`);
    expect(waited.body).toMatchObject({ status: "exited", exitCode: null, signal: "SIGTERM" });
  });
});

describe("without a sandbox (RUNNER_SANDBOX=none), on a root runner", () => {
  const key = "signals-acme-key";
  const own = new SuiteCleanup({ clients: "close" });
  const place: Partial<Place> = { cleanup: own };
  beforeAll(async () => {
    const workspace = own.tempFolder("ptybroker-signals-");
    const stack = await startSuiteStack({ apiKeys: `acme:${key}`, runners: [{ env: { RUNNER_WORKSPACE: workspace, RUNNER_SANDBOX: "none" } }] }, own);
    place.url = stack.edge.url;
    place.api = new Api(stack.edge.url, key);
  }, 120_000);

  it("a SIGKILL for a dead foreground group whose number the host reused leaves the host's process alive", () => deadForegroundGroup(place as Place));

  it("Ctrl+C typed, and SIGINT and SIGTERM through the API, still end a foreground job", () => foregroundJobs(place as Place));

  it("a session without a terminal (pty: false) gets its signal", async () => {
    const api = (place as Place).api;
    const s = await api.create({ command: "/bin/sleep", args: ["300"], pty: false });
    own.session(api, s.id);
    expect((await api.request("POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGTERM" })).status).toBe(202);
    const waited = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=10`);
    expect(waited.body).toMatchObject({ status: "exited", exitCode: null, signal: "SIGTERM" });
  });
});
