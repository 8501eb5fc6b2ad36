// The limits' layouts as files: which controller is where (/proc/mounts), and what a session's
// limits write in each layout. The v2 layout runs on a folder that stands in for a cgroup2
// hierarchy (this project's machines have the controllers in v1, so a real v2 hierarchy with
// them is not to be had here); the v1 layout and the limits themselves are attacked for real,
// on real cgroups, in test/sandbox.test.ts (pids, memory, a neighbour's echo).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Limits, cgroupV1Mounts } from "./limits.js";

const dir = mkdtempSync(join(tmpdir(), "limits-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("cgroupV1Mounts", () => {
  it("finds each controller's hierarchy, also when controllers share one", () => {
    const mounts = join(dir, "mounts-v1");
    writeFileSync(
      mounts,
      [
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0",
        "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0",
        "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0",
        "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0",
        "",
      ].join("\n"),
    );
    expect(cgroupV1Mounts(mounts)).toEqual({ cpu: "/sys/fs/cgroup/cpu,cpuacct", memory: "/sys/fs/cgroup/memory", pids: "/sys/fs/cgroup/pids" });
    expect(cgroupV1Mounts(join(dir, "missing"))).toEqual({});
  });
});

describe("the v2 layout", () => {
  it("enables the controllers down to the run, writes each session's limits in its containment cgroup, and reads its oom kills", async () => {
    const root = join(dir, "unified");
    const run = join(root, "ptybroker", "run1");
    const session = join(run, "ab12");
    mkdirSync(session, { recursive: true });
    writeFileSync(join(root, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n");
    writeFileSync(join(session, "memory.swap.max"), "max\n");
    const mounts = join(dir, "mounts-v2");
    writeFileSync(mounts, `cgroup2 ${root} cgroup2 rw 0 0\n`);

    const limits = await Limits.start("run1", run, mounts);
    expect(limits.layout).toBe("v2");
    for (const folder of [root, join(root, "ptybroker"), run]) {
      expect(readFileSync(join(folder, "cgroup.subtree_control"), "utf8")).toBe("+memory +pids +cpu");
    }
    expect(limits.open("ab12", "t1", { memoryMiB: 256, pids: 64, cpus: 0.5 }, session)).toEqual([]);
    expect(readFileSync(join(session, "memory.max"), "utf8")).toBe(String(256 * 1024 * 1024));
    expect(readFileSync(join(session, "memory.swap.max"), "utf8")).toBe("0");
    expect(readFileSync(join(session, "pids.max"), "utf8")).toBe("64");
    expect(readFileSync(join(session, "cpu.max"), "utf8")).toBe("50000 100000");
    // The sessions together weigh one process's share per session against the host's others.
    const weights = () => [join(root, "ptybroker"), run].map((folder) => readFileSync(join(folder, "cpu.weight"), "utf8"));
    expect(weights()).toEqual(["100", "100"]);
    mkdirSync(join(run, "cd34"));
    limits.open("cd34", "t2", { memoryMiB: 64, pids: 8, cpus: 1 }, join(run, "cd34"));
    expect(weights()).toEqual(["200", "200"]);
    await limits.end("cd34");
    expect(weights()).toEqual(["100", "100"]);

    expect(limits.oomKilled("ab12")).toBe(false); // no memory.events yet
    writeFileSync(join(session, "memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n");
    expect(limits.oomKilled("ab12")).toBe(false);
    writeFileSync(join(session, "memory.events"), "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\n");
    expect(limits.oomKilled("ab12")).toBe(true);
  });

  it("refuses to start when neither layout has the three controllers", async () => {
    const mounts = join(dir, "mounts-none");
    writeFileSync(mounts, "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n");
    await expect(Limits.start("run2", null, mounts)).rejects.toThrow(/no cgroup pids, cpu controller/);
  });
});
