// The pure parts of the session boundaries: the command line that drops root, where cgroup2 is
// mounted, the names given to users and cgroups, and a session's environment. The boundaries
// themselves are attacked end to end in test/isolation.test.ts.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cgroup2Mount, cgroupName } from "./cgroup.js";
import { sessionEnv, sessionFolders } from "./environment.js";
import { launchCommand } from "./launch.js";
import { tenantUserName } from "./session-user.js";

const dir = mkdtempSync(join(tmpdir(), "isolation-parts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const user = { name: "ptyb-0123456789ab", uid: 1234, gid: 2345, shell: "/bin/bash", switched: true };
const tools = { setpriv: "/usr/bin/setpriv" };

describe("launchCommand", () => {
  it("runs the command itself when sessions do not switch users", () => {
    const own = { ...user, switched: false };
    expect(launchCommand({ command: "/bin/bash", args: ["-l"], user: own, tools: null, cgroupProcs: null, enter: null })).toEqual({
      command: "/bin/bash",
      args: ["-l"],
    });
  });

  it("joins the cgroup, then execs setpriv with the user's ids and no groups, the command's words untouched", () => {
    const procs = "/sys/fs/cgroup/unified/ptybroker/run/1_s/cgroup.procs";
    const launch = launchCommand({ command: "/bin/echo", args: ["$HOME", "a b", "'"], user, tools, cgroupProcs: procs, enter: null });
    expect(launch.command).toBe("/bin/sh");
    const [flag, script, ...rest] = launch.args;
    expect(flag).toBe("-c");
    expect(script).toContain('echo $$ > "$p" || exit 126');
    expect(script).toContain('exec /usr/bin/setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@"');
    expect(script).not.toContain(procs); // paths and words are arguments, never part of the script
    expect(script.indexOf("echo $$")).toBeLessThan(script.indexOf("setpriv"));
    expect(rest).toEqual([procs, "1234", "2345", "/bin/echo", "$HOME", "a b", "'"]);
  });

  it("makes and enters a cwd below the tenant's folder as the user, after the switch", () => {
    const launch = launchCommand({ command: "/bin/pwd", args: [], user, tools, cgroupProcs: null, enter: "/w/acme/b/c" });
    expect(launch.args.slice(2)).toEqual(["-", "1234", "2345", "/bin/sh", "-c", 'mkdir -p -- "$0" && cd -- "$0" && exec "$@"', "/w/acme/b/c", "/bin/pwd"]);
  });
});

describe("cgroup2Mount", () => {
  it("finds cgroup2 in a hybrid layout, unescaping /proc/mounts", () => {
    const mounts = join(dir, "mounts");
    writeFileSync(
      mounts,
      [
        "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0",
        "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0",
        "cgroup2 /sys/fs/cgroup/uni\\040fied cgroup2 rw,relatime 0 0",
        "",
      ].join("\n"),
    );
    expect(cgroup2Mount(mounts)).toBe("/sys/fs/cgroup/uni fied");
  });

  it("says null without cgroup2", () => {
    const mounts = join(dir, "v1-only");
    writeFileSync(mounts, "cgroup /sys/fs/cgroup/pids cgroup rw 0 0\n");
    expect(cgroup2Mount(mounts)).toBeNull();
    expect(cgroup2Mount(join(dir, "missing"))).toBeNull();
  });
});

describe("names", () => {
  it("gives every tenant a user name useradd takes, the same on every runner", () => {
    for (const tenant of ["acme", "ACME", "a", "x".repeat(64), "Team_1-b"]) {
      const name = tenantUserName(tenant);
      expect(name).toMatch(/^ptyb-[0-9a-f]{12}$/);
      expect(name.length).toBeLessThanOrEqual(32);
    }
    expect(tenantUserName("acme")).toBe(tenantUserName("acme"));
    expect(tenantUserName("acme")).not.toBe(tenantUserName("ACME"));
  });

  it("reduces cgroup names to letters, digits, _ and -", () => {
    expect(cgroupName("acme/s-1/inc.2")).toBe("acme_s-1_inc_2");
    expect(cgroupName("../..")).toBe("_____");
    expect(cgroupName("")).toBe("_");
    expect(cgroupName("y".repeat(200), 100)).toHaveLength(100);
  });
});

describe("sessionEnv and sessionFolders", () => {
  it("names the user and home, and carries nothing of the runner's environment", () => {
    process.env.RUNNER_TOKEN_PROBE = "secret";
    try {
      const env = sessionEnv({ EXTRA: "1", LANG: "de_DE.UTF-8" }, { user: "ptyb-x", home: "/w/acme", shell: "/bin/bash" });
      expect(env).toEqual({
        PATH: "/usr/local/bin:/usr/bin:/bin",
        LANG: "de_DE.UTF-8",
        HOME: "/w/acme",
        USER: "ptyb-x",
        LOGNAME: "ptyb-x",
        SHELL: "/bin/bash",
        TERM: "xterm-256color",
        EXTRA: "1",
      });
    } finally {
      delete process.env.RUNNER_TOKEN_PROBE;
    }
  });

  it("resolves cwd inside the tenant's folder and refuses to leave it", () => {
    expect(sessionFolders("/w", "acme", null)).toEqual({ root: "/w/acme", target: "/w/acme" });
    expect(sessionFolders("/w", "acme", "a/../b/./c")).toEqual({ root: "/w/acme", target: "/w/acme/b/c" });
    for (const cwd of ["..", "../globex", "/etc", "a/../../b"]) expect(() => sessionFolders("/w", "acme", cwd)).toThrow(/outside/);
  });
});
