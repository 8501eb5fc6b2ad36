// What a runner process leaves behind if it dies without cleaning up (SIGKILL, a crash, the
// host's OOM killer): one record per run under the runner's state folder,
// `<workspace>/.ptybroker/runs/<run>.json`, naming the run's pid (with its start time, so a
// reused pid is not taken for it) and what holds its sessions' processes: its cgroup, or, where
// there is none, its sessions' leaders (terminal session ids). A runner that starts ends the
// leftovers of every record whose runner is dead, and only those: runners that share a
// workspace never end each other's live sessions.
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { log } from "../../shared/log.js";
import { endCgroup } from "./cgroup.js";
import { statFields } from "../process/proc.js";
import { killSessionProcesses, sessionMembers } from "./reaper.js";

export interface SessionLeader {
  /** the session's key, for the logs */
  key: string;
  /** pid of the session's first process, which is also its terminal session id */
  pid: number;
  startTime: string;
}

export interface RunRecord {
  runnerId: string;
  pid: number;
  /** /proc/<pid>/stat field 22: tells this run from a later process with the same pid */
  startTime: string;
  /** the run's cgroup, parent of its sessions' cgroups; null where cgroups are not used */
  cgroup: string | null;
  /** sessions' leaders (used when there is no cgroup) */
  sessions: SessionLeader[];
}

/** A process's start time (clock ticks since boot), or null when it is gone. */
export function processStartTime(pid: number): string | null {
  return statFields(pid)?.[19] ?? null;
}

/** Whether the process that wrote `record` is still running. */
function alive(record: Pick<RunRecord, "pid" | "startTime">): boolean {
  const state = statFields(record.pid)?.[0];
  return state !== undefined && state !== "Z" && processStartTime(record.pid) === record.startTime;
}

/**
 * The state folder (`<workspace>/.ptybroker`, mode 0700; owned by root under a root runner) and
 * its `runs` folder. Tenants' folders are `[A-Za-z0-9_-]` names: none can be this one.
 */
export function stateFolder(workspace: string, isRoot: boolean): string {
  const folder = join(workspace, ".ptybroker");
  mkdirSync(join(folder, "runs"), { recursive: true, mode: 0o700 });
  const stat = lstatSync(folder);
  if (!stat.isDirectory()) throw new Error(`the runner's state folder ${folder} is not a directory`);
  if (isRoot && (stat.uid !== 0 || stat.gid !== 0)) chownSync(folder, 0, 0);
  if ((stat.mode & 0o7777) !== 0o700) chmodSync(folder, 0o700);
  return folder;
}

/** This run's record file: rewritten whole (write, then rename) so a reader never sees half of it. */
export class RunRecordFile {
  readonly path: string;

  constructor(
    folder: string,
    readonly runName: string,
    private readonly record: RunRecord,
  ) {
    this.path = join(folder, "runs", `${runName}.json`);
    this.write();
  }

  addSession(leader: SessionLeader): void {
    this.record.sessions.push(leader);
    this.write();
  }

  removeSession(pid: number): void {
    const before = this.record.sessions.length;
    this.record.sessions = this.record.sessions.filter((s) => s.pid !== pid);
    if (this.record.sessions.length !== before) this.write();
  }

  /** The run ended cleanly: nothing of it is left to end. */
  remove(): void {
    rmSync(this.path, { force: true });
  }

  private write(): void {
    const temporary = `${this.path}.tmp`;
    writeFileSync(temporary, JSON.stringify(this.record), { mode: 0o600 });
    renameSync(temporary, this.path);
  }
}

/**
 * Ends what dead runs left: every process in a dead run's cgroup, or in its sessions' terminal
 * sessions; then removes their records. `cgroupRoot` bounds where a record's cgroup may be.
 */
export async function endLeftovers(folder: string, cgroupRoot: string | null): Promise<void> {
  const runs = join(folder, "runs");
  let names: string[];
  try {
    names = readdirSync(runs).filter((name) => name.endsWith(".json"));
  } catch {
    return;
  }
  for (const name of names) {
    const path = join(runs, name);
    let record: RunRecord;
    try {
      record = JSON.parse(readFileSync(path, "utf8")) as RunRecord;
    } catch (error) {
      // Another runner removed it meanwhile, or it is not ours to read: leave it.
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") log.warn("runner.leftovers", { record: name, outcome: "unreadable", error });
      continue;
    }
    if (alive(record)) continue;
    let ended = true;
    if (record.cgroup) {
      if (cgroupRoot && record.cgroup.startsWith(`${cgroupRoot}/`) && !record.cgroup.includes("/..")) {
        const result = await endCgroup(record.cgroup);
        ended = result.ended;
        log.info("runner.leftovers", { runnerId: record.runnerId, pid: record.pid, cgroup: record.cgroup, outcome: result.ended ? "ended" : "failed", ms: Math.round(result.ms) });
      } else {
        // This runner cannot reach that cgroup (not root, say): keep the record for one that can.
        ended = false;
        log.warn("runner.leftovers", { runnerId: record.runnerId, cgroup: record.cgroup, outcome: "cgroup_unavailable" });
      }
    }
    for (const leader of record.sessions ?? []) {
      // A terminal session id is not reused while any process is in that session, and a
      // leader's pid reused by another process shows another start time.
      const started = processStartTime(leader.pid);
      if (started !== null && started !== leader.startTime) continue;
      const members = sessionMembers(leader.pid);
      killSessionProcesses(leader.pid);
      if (members.length > 0) log.info("runner.leftovers", { runnerId: record.runnerId, pid: record.pid, key: leader.key, processes: members.length, outcome: "ended" });
    }
    if (ended) {
      rmSync(path, { force: true });
      rmSync(`${path}.tmp`, { force: true }); // a write the dead run did not finish
    }
  }
}

/**
 * The folders in `folder` named after a run of a runner that is gone (`<runner pid>_<random hex>`,
 * as the sandbox names its per-run folders and cgroups) and whose pid no longer runs.
 */
export function deadRunFolders(folder: string): string[] {
  let names: string[] = [];
  try {
    names = readdirSync(folder);
  } catch {
    return [];
  }
  return names.filter((name) => {
    const pid = /^(\d+)_[0-9a-f]+$/.exec(name)?.[1];
    return pid !== undefined && !existsSync(`/proc/${pid}`);
  }).map((name) => join(folder, name));
}

