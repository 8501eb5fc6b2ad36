// A cgroup, the boundary that holds every process of a session (docs/architecture.md, "Traps";
// docs/security.md): a process cannot leave its cgroup without write access to another one,
// whatever it does with its session, process group or parent (`setsid`, `nohup`, double fork), and
// `cgroup.kill` ends every process in a cgroup and its descendants at once.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Where the cgroup2 hierarchy is mounted (from /proc/mounts: hybrid hosts mount it at /sys/fs/cgroup/unified), or null. */
export function cgroup2Mount(mounts = "/proc/mounts"): string | null {
  let text: string;
  try {
    text = readFileSync(mounts, "utf8");
  } catch {
    return null;
  }
  for (const row of text.split("\n")) {
    const [, mountPoint, type] = row.split(" ");
    // /proc/mounts escapes spaces and the like as octal (\040).
    if (type === "cgroup2") return mountPoint.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  }
  return null;
}

/** `name` as one cgroup folder name: letters, digits, `_` and `-` only, at most `max` characters. */
export function cgroupName(name: string, max = 64): string {
  return name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, max) || "_";
}

/** Makes the cgroup folder `path` (and its parents); an existing one is fine. */
export function makeCgroup(path: string): void {
  mkdirSync(path, { recursive: true });
}

/** The pids in `path` itself (not its descendants); [] if it is gone. */
export function cgroupPids(path: string): number[] {
  try {
    return readFileSync(join(path, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * Whether any process is left in `path` or below it: cgroup.events `populated` (v2), or the
 * `cgroup.procs` of it and its descendants (v1, which has no cgroup.events); false if it is gone.
 */
export function cgroupPopulated(path: string): boolean {
  try {
    return /^populated 1$/m.test(readFileSync(join(path, "cgroup.events"), "utf8"));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" && existsSync(path)) {
      return cgroupPids(path).length > 0 || children(path).some(cgroupPopulated);
    }
    return false;
  }
}

/** Child cgroups of `path`. */
function children(path: string): string[] {
  try {
    return readdirSync(path, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(path, entry.name));
  } catch {
    return [];
  }
}

/**
 * SIGKILL to every process in `path` and below: `cgroup.kill` (Linux 5.14+), else each pid in
 * each `cgroup.procs` (a process forking meanwhile is caught by the next round, see endCgroup).
 */
export function killCgroup(path: string): void {
  const killFile = join(path, "cgroup.kill");
  if (existsSync(killFile)) {
    try {
      writeFileSync(killFile, "1");
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return; // the cgroup is gone
      // fall back to the pids
    }
  }
  for (const pid of cgroupPids(path)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const child of children(path)) killCgroup(child);
}

/** Removes `path` and every cgroup below it, deepest first; a folder still in use stays (EBUSY). */
export function removeCgroup(path: string): void {
  for (const child of children(path)) removeCgroup(child);
  try {
    rmdirSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

export interface CgroupEnd {
  /** every process ended and the folder removed */
  ended: boolean;
  /** how long it took */
  ms: number;
}

const POLL_MS = 10;

/**
 * Ends every process in `path` and below, waits (at most `deadlineMs`) until none is left,
 * then removes the folders. Killed processes leave the cgroup when they exit, even before
 * their parent reaps them.
 */
export async function endCgroup(path: string, deadlineMs = 5000): Promise<CgroupEnd> {
  const start = performance.now();
  if (!existsSync(path)) return { ended: true, ms: 0 };
  for (;;) {
    killCgroup(path);
    if (!cgroupPopulated(path)) break;
    if (performance.now() - start > deadlineMs) return { ended: false, ms: performance.now() - start };
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  try {
    removeCgroup(path);
  } catch {
    return { ended: false, ms: performance.now() - start };
  }
  return { ended: true, ms: performance.now() - start };
}
