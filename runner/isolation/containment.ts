// Every process a session starts ends with the session (docs/security.md), by one of two
// mechanisms, chosen once at start and said in the log (`runner.containment`):
// - "cgroup": a root runner with a writable cgroup2 hierarchy gives each session its own cgroup,
//   `<cgroup2>/ptybroker/<run>/<opaque id>`; the session's first process joins it before anything
//   of the session runs, and nothing it starts can leave it. Ending the session ends the cgroup
//   (`cgroup.kill`), whatever left the terminal's session (`setsid`, `nohup`, double fork).
// - "session-id": elsewhere, the reaper ends every process in the session's terminal session;
//   a process that calls setsid() escapes it.
// Each run keeps a record under the state folder (run-record.ts) so that a runner starting
// after a crash ends what the dead run left.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { log } from "../../shared/log.js";
import { cgroup2Mount, cgroupName, endCgroup, makeCgroup, removeCgroup } from "./cgroup.js";
import { RunRecordFile, endLeftovers, processStartTime, stateFolder } from "./run-record.js";
import { killSessionProcesses } from "./reaper.js";
import type { Membership } from "./signals.js";

export type ContainmentMechanism = "cgroup" | "session-id";

interface Scope {
  key: string;
  /** the session's cgroup ("cgroup" mechanism) */
  cgroup: string | null;
  /** the session's first process, once spawned */
  pid: number | null;
  /** its start time (/proc/<pid>/stat field 22), read when it started */
  startTime?: string | null;
}

/**
 * Moves a throwaway process into a cgroup below `runCgroup`, as a session's first step does
 * (launch.ts): making a folder can work where moving a process into it does not (delegation,
 * read-only parts of a container's hierarchy).
 */
function probeCgroup(runCgroup: string): void {
  const probe = join(runCgroup, "probe");
  makeCgroup(probe);
  try {
    const moved = spawnSync("/bin/sh", ["-c", 'echo $$ > "$0"', join(probe, "cgroup.procs")], { encoding: "utf8", timeout: 5000 });
    if (moved.status !== 0) throw new Error(`a process cannot join a cgroup: ${(moved.stderr || moved.error?.message || "").trim()}`);
  } finally {
    removeCgroup(probe);
  }
}

export class Containment {
  private readonly scopes = new Map<string, Scope>();
  private readonly ending = new Set<Promise<void>>();

  private constructor(
    readonly mechanism: ContainmentMechanism,
    /** this run's cgroup (parent of its sessions' cgroups), or null */
    readonly runCgroup: string | null,
    private readonly record: RunRecordFile,
  ) {}

  /**
   * Picks the mechanism, writes this run's record, and ends what dead runs sharing the
   * workspace left behind (before this runner takes any session).
   */
  static async start(options: { workspace: string; runnerId: string; isRoot: boolean }): Promise<Containment> {
    const folder = stateFolder(options.workspace, options.isRoot);
    const mount = cgroup2Mount();
    const cgroupRoot = mount ? join(mount, "ptybroker") : null;
    const runName = `${cgroupName(options.runnerId, 80)}_${process.pid}_${randomBytes(3).toString("hex")}`;
    let runCgroup: string | null = null;
    let reason: string | undefined;
    if (!options.isRoot) reason = "not root";
    else if (!cgroupRoot) reason = "no cgroup2 mount in /proc/mounts";
    else {
      try {
        makeCgroup(join(cgroupRoot, runName));
        runCgroup = join(cgroupRoot, runName);
        probeCgroup(runCgroup);
      } catch (error) {
        reason = `cannot use cgroups under ${cgroupRoot}: ${(error as Error).message}`;
        if (runCgroup) removeCgroup(runCgroup);
        runCgroup = null;
      }
    }
    const mechanism: ContainmentMechanism = runCgroup ? "cgroup" : "session-id";
    // Written before any session starts: a crash from here on leaves no process unnamed.
    const record = new RunRecordFile(folder, runName, {
      runnerId: options.runnerId,
      pid: process.pid,
      startTime: processStartTime(process.pid) ?? "",
      cgroup: runCgroup,
      sessions: [],
    });
    if (mechanism === "cgroup") log.info("runner.containment", { mechanism, cgroup: runCgroup, record: record.path });
    else {
      log.warn("runner.containment", {
        mechanism,
        reason,
        record: record.path,
        note: "processes that leave the session's terminal session (setsid) are not ended with it",
      });
    }
    await endLeftovers(folder, cgroupRoot);
    return new Containment(mechanism, runCgroup, record);
  }

  /**
   * Opens the scope of the session `key` (its cgroup named by its opaque `id`) about to start; returns the `cgroup.procs` file its first
   * process must join (before it runs anything of the session), or null (session-id mechanism).
   */
  open(key: string, id: string): string | null {
    if (this.scopes.has(key)) throw new Error(`session ${key} is already contained`);
    let cgroup: string | null = null;
    if (this.runCgroup) {
      // Named by the session's opaque id: a session that reads /proc/self/cgroup learns nothing of it.
      cgroup = join(this.runCgroup, cgroupName(id));
      makeCgroup(cgroup);
    }
    this.scopes.set(key, { key, cgroup, pid: null });
    return cgroup ? join(cgroup, "cgroup.procs") : null;
  }

  /** The session's first process has started (its pid is its terminal session id). */
  started(key: string, pid: number): void {
    const scope = this.scopes.get(key);
    if (!scope) return;
    scope.pid = pid;
    scope.startTime = processStartTime(pid);
    if (!scope.cgroup) this.record.addSession({ key, pid, startTime: scope.startTime ?? "" });
  }

  /**
   * Who belongs to the session `key` (runner/isolation/signals.ts): its first process, and the
   * processes of its cgroup, else of the terminal session that process leads; null before it
   * started or after it ended.
   */
  membership(key: string): Membership | null {
    const scope = this.scopes.get(key);
    if (!scope || scope.pid === null || !scope.startTime) return null;
    return { first: scope.pid, startTime: scope.startTime, procs: scope.cgroup ? join(scope.cgroup, "cgroup.procs") : null };
  }

  /**
   * Ends every process of the session now (SIGKILL) and lets go of its scope; the cgroup is
   * removed once empty. Safe to call more than once.
   */
  end(key: string): void {
    const scope = this.scopes.get(key);
    if (!scope) return;
    this.scopes.delete(key);
    if (!scope.cgroup) {
      if (scope.pid !== null) {
        killSessionProcesses(scope.pid);
        this.record.removeSession(scope.pid);
      }
      return;
    }
    const cgroup = scope.cgroup;
    const ending = endCgroup(cgroup).then(
      ({ ended, ms }) => {
        if (ended) log.debug("session.contained", { key, outcome: "ended", ms: Math.round(ms) });
        else log.warn("session.contained", { key, cgroup, outcome: "not_empty", ms: Math.round(ms) });
      },
      (error: unknown) => log.warn("session.contained", { key, cgroup, outcome: "failed", error }),
    );
    this.ending.add(ending);
    void ending.finally(() => this.ending.delete(ending));
  }

  /**
   * The runner is stopping: ends every session still contained, waits for the ends under way,
   * removes this run's cgroup and its record. What cannot be ended stays in the record for the
   * next runner.
   */
  async close(): Promise<void> {
    for (const key of [...this.scopes.keys()]) this.end(key);
    await Promise.all(this.ending);
    if (this.runCgroup) {
      const { ended } = await endCgroup(this.runCgroup);
      if (!ended) {
        log.warn("runner.containment", { cgroup: this.runCgroup, outcome: "left_for_next_start" });
        return;
      }
    }
    this.record.remove();
  }
}
