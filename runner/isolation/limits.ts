// What a session may use, enforced by cgroups (docs/security.md, "The sandbox"): memory (a
// process past it is killed by the kernel, and the session ends with reason "oom"), pids (fork
// fails past it) and CPU (a quota of `cpus` cores, and shares by weight: every tenant's group
// weighs the same, so one tenant's spinning sessions take from each other, not from the others).
//
// Two layouts, chosen once at start and said in the log (`runner.limits`):
// - "v2": the cgroup2 hierarchy has the memory, pids and cpu controllers. The limits are written
//   into each session's containment cgroup (containment.ts), with the controllers enabled on the
//   way down to it.
// - "v1": the controllers are cgroup v1 hierarchies, each mounted on its own (hybrid hosts, as
//   this project's machines and CI are). Each session gets a group in each of them,
//   `<mount>/ptybroker/<run>/<tenant group>/<session group>`, that its first process joins
//   before anything of the session runs (launch.ts), beside its containment cgroup.
// Group names are opaque (sandbox.ts's ids): nothing in them names a tenant or a session.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SessionLimits } from "../../shared/session.js";
import { cgroup2Mount, endCgroup, makeCgroup } from "./cgroup.js";
import { deadRunFolders } from "./run-record.js";

export type { SessionLimits };

export type LimitsLayout = "v2" | "v1";

const CONTROLLERS = ["memory", "pids", "cpu"] as const;
type Controller = (typeof CONTROLLERS)[number];
const CPU_PERIOD_US = 100_000;

/** Where each cgroup v1 controller is mounted (from /proc/mounts), for those that are. */
export function cgroupV1Mounts(mounts = "/proc/mounts"): Partial<Record<Controller, string>> {
  const found: Partial<Record<Controller, string>> = {};
  let text = "";
  try {
    text = readFileSync(mounts, "utf8");
  } catch {
    return found;
  }
  for (const row of text.split("\n")) {
    const [, mountPoint, type, options = ""] = row.split(" ");
    if (type !== "cgroup") continue;
    const names = options.split(",");
    for (const controller of CONTROLLERS) if (names.includes(controller)) found[controller] ??= mountPoint;
  }
  return found;
}

/** The controllers the cgroup2 hierarchy at `mount` offers. */
function v2Controllers(mount: string): string[] {
  try {
    return readFileSync(join(mount, "cgroup.controllers"), "utf8").trim().split(/\s+/);
  } catch {
    return [];
  }
}

function write(path: string, value: string): void {
  writeFileSync(path, value);
}

function readCounter(file: string, name: string): number {
  try {
    const match = new RegExp(`^${name} (\\d+)$`, "m").exec(readFileSync(file, "utf8"));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

interface Group {
  /** v1: one group per controller; v2: the containment cgroup */
  paths: string[];
  /** the file that counts the memory controller's kills */
  oomFile: string;
  oomName: string;
}

/** Where the run's CPU weight is written, per layout: the file, its default per session, its range. */
const WEIGHT = {
  v1: { file: "cpu.shares", perSession: 1024, min: 2, max: 262_144 },
  v2: { file: "cpu.weight", perSession: 100, min: 1, max: 10_000 },
} as const;

export class Limits {
  private readonly groups = new Map<string, Group>();
  /** The cpu folders whose weight follows the number of sessions: `ptybroker` and this run's. */
  private readonly weighted: string[];

  private constructor(
    readonly layout: LimitsLayout,
    /** v1: this run's folder in each controller's hierarchy */
    private readonly v1Runs: Record<Controller, string> | null,
    v2Run: string | null,
  ) {
    const run = v1Runs ? v1Runs.cpu : (v2Run as string);
    this.weighted = [join(run, ".."), run];
  }

  /**
   * The sessions, together, weigh against the host's other processes (the runner, its log, any
   * service) what their processes would without cgroups, one process each: a session's share
   * times the number of sessions. Left at one share, every session of the host shared one
   * process's CPU under load (300 printing sessions took 5× as long). Inside, tenants weigh the
   * same, and a tenant's forks add nothing to its weight.
   */
  private weigh(): void {
    const { file, perSession, min, max } = WEIGHT[this.layout];
    const weight = String(Math.min(max, Math.max(min, perSession * Math.max(1, this.groups.size))));
    for (const folder of this.weighted) {
      try {
        write(join(folder, file), weight);
      } catch {
        // A hierarchy that does not let us (delegated, read-only): the default weight stays.
      }
    }
  }

  /**
   * The layout this host offers, or throws saying what is missing (a sandboxed runner does not
   * start without limits). `v2Run` is this run's containment cgroup (null: none).
   */
  static async start(runName: string, v2Run: string | null, mounts = "/proc/mounts"): Promise<Limits> {
    const mount = cgroup2Mount(mounts);
    if (mount && v2Run && CONTROLLERS.every((c) => v2Controllers(mount).includes(c))) {
      // Enable the controllers from the root down to the run's cgroup, whose children are the sessions.
      const parts = v2Run.slice(mount.length).split("/").filter(Boolean);
      let folder = mount;
      for (const part of ["", ...parts]) {
        folder = part ? join(folder, part) : folder;
        write(join(folder, "cgroup.subtree_control"), CONTROLLERS.map((c) => `+${c}`).join(" "));
      }
      return new Limits("v2", null, v2Run);
    }
    const v1 = cgroupV1Mounts(mounts);
    const missing = CONTROLLERS.filter((c) => !v1[c]);
    if (missing.length > 0) {
      throw new Error(`no cgroup ${missing.join(", ")} controller, in cgroup v2 (${mount ?? "not mounted"}) or v1: session limits cannot be enforced`);
    }
    const runs = {} as Record<Controller, string>;
    for (const c of CONTROLLERS) {
      const root = join(v1[c] as string, "ptybroker");
      // Groups of runs whose runner is gone (a crash leaves them; their processes were ended with
      // their containment cgroups, run-record.ts).
      for (const dead of deadRunFolders(root)) await endCgroup(dead);
      runs[c] = join(root, runName);
      makeCgroup(runs[c]);
    }
    return new Limits("v1", runs, null);
  }

  /**
   * Writes `limits` for the session `id` of the tenant group `tenantGroup`; returns the
   * `cgroup.procs` files its first process must join besides its containment cgroup (v1), or []
   * (v2: `v2Cgroup`, the containment cgroup, carries them).
   */
  open(id: string, tenantGroup: string, limits: SessionLimits, v2Cgroup: string | null): string[] {
    const memory = String(limits.memoryMiB * 1024 * 1024);
    const quota = String(Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US)));
    if (this.layout === "v2") {
      if (!v2Cgroup) throw new Error("cgroup v2 limits need the session's containment cgroup");
      write(join(v2Cgroup, "memory.max"), memory);
      if (existsSync(join(v2Cgroup, "memory.swap.max"))) write(join(v2Cgroup, "memory.swap.max"), "0");
      write(join(v2Cgroup, "pids.max"), String(limits.pids));
      write(join(v2Cgroup, "cpu.max"), `${quota} ${CPU_PERIOD_US}`);
      this.groups.set(id, { paths: [], oomFile: join(v2Cgroup, "memory.events"), oomName: "oom_kill" });
      this.weigh();
      return [];
    }
    const runs = this.v1Runs as Record<Controller, string>;
    const paths = {} as Record<Controller, string>;
    for (const c of CONTROLLERS) {
      // The tenant's group: its sessions share one weight (cpu.shares default) against other tenants.
      makeCgroup(join(runs[c], tenantGroup));
      paths[c] = join(runs[c], tenantGroup, id);
      makeCgroup(paths[c]);
    }
    write(join(paths.memory, "memory.limit_in_bytes"), memory);
    // Swap counts too where the kernel accounts it, so the limit is not a way into swap.
    const memsw = join(paths.memory, "memory.memsw.limit_in_bytes");
    if (existsSync(memsw)) write(memsw, memory);
    write(join(paths.pids, "pids.max"), String(limits.pids));
    write(join(paths.cpu, "cpu.cfs_period_us"), String(CPU_PERIOD_US));
    write(join(paths.cpu, "cpu.cfs_quota_us"), quota);
    this.groups.set(id, { paths: Object.values(paths), oomFile: join(paths.memory, "memory.oom_control"), oomName: "oom_kill" });
    this.weigh();
    return CONTROLLERS.map((c) => join(paths[c], "cgroup.procs"));
  }

  /** Whether the kernel killed a process of the session `id` for memory. */
  oomKilled(id: string): boolean {
    const group = this.groups.get(id);
    return group ? readCounter(group.oomFile, group.oomName) > 0 : false;
  }

  /** Ends what is left in the session's groups and removes them (v1; v2's go with containment). */
  async end(id: string): Promise<void> {
    const group = this.groups.get(id);
    if (!group) return;
    this.groups.delete(id);
    this.weigh();
    await Promise.all(group.paths.map((path) => endCgroup(path)));
  }

  /** Removes this run's groups (after every session has ended). */
  async close(): Promise<void> {
    await Promise.all([...this.groups.keys()].map((id) => this.end(id)));
    if (this.v1Runs) await Promise.all(Object.values(this.v1Runs).map((path) => endCgroup(path)));
  }
}
