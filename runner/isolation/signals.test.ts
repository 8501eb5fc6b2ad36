// The signal helper (signals.ts) run for real, without root: which processes it signals. A plain
// file listing pids stands in for a cgroup's `cgroup.procs`; a process group of the test's own
// stands in for the host's process that a dead foreground group's number was given to. The attack
// itself (a dead foreground group, a host process given its number) is played end to end, on a
// root runner with its sandbox, in test/signals.test.ts.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { statFields } from "../process/proc.js";
import { systemTool } from "./launch.js";
import { processStartTime } from "./run-record.js";
import { type Membership, SignalHelper } from "./signals.js";

// The system's python3 is the helper's interpreter; a root runner does not start without it.
const python3 = systemTool("python3");
if (!python3) throw new Error("the signal helper's tests need the system's python3 (/usr/bin/python3)");
const dir = mkdtempSync(join(tmpdir(), "signals-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) {
    try {
      process.kill(-(child.pid as number), "SIGKILL"); // each is a group (and session) the test made
    } catch {
      // gone
    }
  }
});

/** A shell in a terminal session of its own (pid = sid = its group) with two `sleep`s in its group; resolves once they run. */
async function session(): Promise<{ leader: number; sleeps: number[] }> {
  const child = spawn("/bin/sh", ["-c", "sleep 101 & sleep 102 & echo $!; wait"], { detached: true, stdio: ["ignore", "pipe", "ignore"] });
  started.push(child);
  await new Promise((resolve) => child.stdout?.once("data", resolve));
  const leader = child.pid as number;
  const sleeps = readFileSync(`/proc/${leader}/task/${leader}/children`, "utf8").trim().split(" ").map(Number);
  return { leader, sleeps };
}

/** A process in a group of its own, outside every session the test makes. */
function outsider(): number {
  const child = spawn("/bin/sleep", ["103"], { detached: true, stdio: "ignore" });
  started.push(child);
  return child.pid as number;
}

const alive = (pid: number) => {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== "Z";
};
const stopped = (pid: number) => statFields(pid)?.[0] === "T";

/** The terminal session led by `leader` (no cgroup). */
function bySession(leader: number): Membership {
  return { first: leader, startTime: processStartTime(leader) as string, procs: null };
}

/** A cgroup listing `pids`, of the session whose first process is `first`. */
function listed(first: number, ...pids: number[]): Membership {
  const procs = join(dir, `procs-${first}-${pids.join("-")}`);
  writeFileSync(procs, pids.map((pid) => `${pid}\n`).join(""));
  return { first, startTime: processStartTime(first) as string, procs };
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 3000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("the signal helper", () => {
  const helper = new SignalHelper(python3);
  afterAll(() => helper.close());

  it("signals every member of the foreground group, and nothing else", async () => {
    const { leader, sleeps } = await session();
    const other = outsider();
    // SIGSTOP: it leaves each process there to be looked at.
    expect(await helper.send({ signal: "SIGSTOP", group: leader, leader, membership: bySession(leader) })).toEqual({ sent: 3, leader: false });
    await until(() => [leader, ...sleeps].every(stopped), "the group to stop");
    expect(stopped(other)).toBe(false);
    // The same through a cgroup's list: the first process and the listed members of the group only.
    expect(await helper.send({ signal: "SIGCONT", group: leader, leader, membership: listed(leader, sleeps[0]) })).toEqual({ sent: 2, leader: false });
    await until(() => !stopped(leader) && !stopped(sleeps[0]), "the listed two to go on");
    expect(stopped(sleeps[1])).toBe(true);
    // The first process counts before it joined its cgroup (a signal right after the spawn).
    expect(await helper.send({ signal: "SIGCONT", group: leader, leader, membership: listed(leader) })).toEqual({ sent: 1, leader: false });
    await until(() => !stopped(leader), "the first to go on");
    expect(stopped(sleeps[1])).toBe(true);
  });

  it("never signals a group that is not the session's: the leader alone gets it", async () => {
    const { leader, sleeps } = await session();
    const other = outsider();
    // The foreground group's number is another process's group (a dead group, reused).
    for (const membership of [bySession(leader), listed(leader, ...sleeps)]) {
      expect(await helper.send({ signal: "SIGSTOP", group: other, leader, membership })).toEqual({ sent: 0, leader: true });
      await until(() => stopped(leader), "the leader to stop");
      expect(stopped(other) || sleeps.some(stopped)).toBe(false);
      process.kill(leader, "SIGCONT");
      await until(() => !stopped(leader), "the leader to go on");
    }
    // Listed, the outsider would be a member: the list is what decides.
    expect(await helper.send({ signal: "SIGKILL", group: other, leader, membership: listed(leader, other) })).toEqual({ sent: 1, leader: false });
    await until(() => !alive(other), "the listed outsider to end");
  });

  it("signals nothing when the leader is not a member, or the session's leader is not the one it was", async () => {
    const { leader, sleeps } = await session();
    const other = outsider();
    expect(await helper.send({ signal: "SIGKILL", group: -1, leader: other, membership: bySession(leader) })).toEqual({ sent: 0, leader: false });
    expect(await helper.send({ signal: "SIGKILL", group: -1, leader: other, membership: listed(leader, leader) })).toEqual({ sent: 0, leader: false });
    // A first process that is not the one it was (another start time): not a member.
    expect(await helper.send({ signal: "SIGKILL", group: leader, leader, membership: { ...bySession(leader), startTime: "1" } })).toEqual({ sent: 0, leader: false });
    expect(await helper.send({ signal: "SIGKILL", group: leader, leader, membership: { ...listed(leader), startTime: "1" } })).toEqual({ sent: 0, leader: false });
    expect([leader, ...sleeps, other].every(alive)).toBe(true);
  });

  it("answers signals in the order asked", async () => {
    const { leader, sleeps } = await session();
    const membership = bySession(leader);
    const outcomes = await Promise.all(["SIGSTOP", "SIGCONT", "SIGSTOP"].map((signal) => helper.send({ signal, group: leader, leader, membership })));
    expect(outcomes).toEqual([1, 2, 3].map(() => ({ sent: 3, leader: false })));
    await until(() => [leader, ...sleeps].every(stopped), "the group to stop");
  });

  it("is started again after it died, and a closed one refuses", async () => {
    const { leader } = await session();
    const own = new SignalHelper(python3 as string);
    const request = { signal: "SIGSTOP", group: -1, leader, membership: bySession(leader) };
    expect(await own.send(request)).toEqual({ sent: 0, leader: true });
    const child = (own as unknown as { child: { pid: number } }).child;
    process.kill(child.pid, "SIGKILL"); // the helper this test's SignalHelper started
    await until(() => (own as unknown as { child: unknown }).child === null, "the helper's end to be seen");
    expect(await own.send({ ...request, signal: "SIGCONT" })).toEqual({ sent: 0, leader: true });
    own.close();
    await expect(own.send(request)).rejects.toThrow(/closed/);
  });

  it("refuses an unknown signal", async () => {
    await expect(helper.send({ signal: "SIGNOPE", group: -1, leader: 1, membership: listed(process.pid) })).rejects.toThrow(/unknown signal/);
  });
});
