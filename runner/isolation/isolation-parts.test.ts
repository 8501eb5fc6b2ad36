// The parts of the session boundaries that need no root: the steps that start a session (run for real), where cgroup2 is
// mounted, the names given to users and cgroups, and a session's environment. The boundaries
// themselves are attacked end to end in test/isolation.test.ts.
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cgroup2Mount, cgroupName } from "./cgroup.js";
import { sessionEnv, sessionFolders } from "./environment.js";
import { ROOT_ENV, dropStep, keyringStep, rootStep, sessionStep } from "./launch.js";
import { tenantUserName } from "./session-user.js";

const dir = mkdtempSync(join(tmpdir(), "isolation-parts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const user = { name: "ptyb-0123456789ab", uid: 1234, gid: 2345, shell: "/bin/bash", switched: true };

/** Runs a launch's command line as this process's user (the session step needs no root) and returns what it printed. */
function runStep(argv: string[], cwd = dir): { status: number | null; out: string } {
  const result = spawnSync(argv[0], argv.slice(1), { cwd, env: {}, encoding: "utf8" });
  return { status: result.status, out: `${result.stdout}${result.stderr}` };
}

describe("the root step", () => {
  it("joins every cgroup, then execs the command with a fixed environment; paths and words are arguments, never script", () => {
    const procs = ["/sys/fs/cgroup/unified/ptybroker/run/ab12/cgroup.procs", "/sys/fs/cgroup/pids/ptybroker/run/t1/ab12/cgroup.procs"];
    const launch = rootStep(["/bin/echo", "$HOME", "a b", "'"], procs, { 5: "root:x:0:0::/:/bin/sh" });
    expect(launch.command).toBe("/bin/bash");
    const [norc, noprofile, closeFlag, , name, sh, flag, script, ...rest] = launch.args;
    expect([norc, noprofile, closeFlag, name, sh, flag]).toEqual(["--norc", "--noprofile", "-c", "ptybroker", "/bin/sh", "-c"]);
    expect(script).toContain('echo $$ > "$p" || exit 126');
    expect(script.indexOf("echo $$")).toBeLessThan(script.indexOf('exec "$@"'));
    for (const path of procs) expect(script).not.toContain(path);
    expect(rest).toEqual([procs.join(":"), "/bin/echo", "$HOME", "a b", "'"]);
    expect(launch.env).toEqual({ ...ROOT_ENV, PTYB_DATA_5: "root:x:0:0::/:/bin/sh" });
  });

  it("closes every fd above 2 it inherited, whatever its number, before it opens bubblewrap's", () => {
    const held = openSync(join(dir, "inherited"), "a");
    try {
      const launch = rootStep(["/bin/sh", "-c", "ls /proc/self/fd | tr '\\n' ' '"], [], { 5: "five" });
      // Inherited on 9 (the highest fd sh can name), 10 and 200; ls lists its own listing's fd (3).
      const stdio = ["ignore", "pipe", "pipe", ...Array<"ignore">(6).fill("ignore"), held, held, ...Array<"ignore">(189).fill("ignore"), held];
      expect(stdio[200]).toBe(held);
      const result = spawnSync(launch.command, launch.args, { env: launch.env, encoding: "utf8", stdio: stdio as never });
      expect(result.stdout).toBe("0 1 2 3 5 6 7 8 ");
    } finally {
      closeSync(held);
    }
  });

  it("reads no rc file, also with a socket for stdin (bash would take itself to be run by rshd)", () => {
    const home = join(dir, "home");
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, ".bashrc"), "echo rc-ran\n");
    const launch = rootStep(["/bin/echo", "command-ran"], []);
    // spawnSync's pipes are socket pairs; HOME points bash at the rc file it must not read.
    const result = spawnSync(launch.command, launch.args, { env: { ...launch.env, HOME: home }, encoding: "utf8" });
    expect(`${result.stdout}${result.stderr}`).toBe("command-ran\n");
  });

  it("hands bubblewrap its data on fds 5 to 7 and the network's fifos on 3 and 4", () => {
    const launch = rootStep(["/bin/sh", "-c", "cat <&5; cat <&6; cat <&7"], [], { 5: "five", 6: "six", 7: "seven" });
    const result = spawnSync(launch.command, launch.args, { env: launch.env, encoding: "utf8" });
    expect(result.stdout).toBe("five\nsix\nseven\n");
  });

  it("opens the seccomp filter's file as fd 9 for bubblewrap, and no other fd from a file", () => {
    const bpf = join(dir, "filter.bpf");
    writeFileSync(bpf, "bpf bytes");
    const launch = rootStep(["/bin/sh", "-c", "cat <&9"], [], {}, {}, { 9: bpf });
    expect(spawnSync(launch.command, launch.args, { env: launch.env, encoding: "utf8" }).stdout).toBe("bpf bytes");
    expect(() => rootStep(["/bin/true"], [], {}, {}, { 5: bpf })).toThrow(/no file fd 5/);
  });

  it("the keyring step: a new session keyring, the root step's signal dispositions, then the command", () => {
    const python = "/usr/bin/python3";
    const read = "grep -E '^SigIgn' /proc/self/status; /usr/bin/python3 -c 'import ctypes;print(ctypes.CDLL(None).syscall(250,0,-3,0))'";
    const own = spawnSync(python, ["-c", "import ctypes;print(ctypes.CDLL(None).syscall(250,0,-3,0))"], { encoding: "utf8" }).stdout;
    const launch = rootStep(keyringStep(python, ["/bin/sh", "-c", read]), []);
    const result = spawnSync(launch.command, launch.args, { env: launch.env, encoding: "utf8" });
    const [sigIgn, keyring] = result.stdout.trim().split("\n");
    // INT, QUIT and TSTP as the root step left them (ignored); SIGPIPE and SIGXFSZ not (python ignores both).
    expect(sigIgn).toBe("SigIgn:\t0000000000080006");
    expect(Number(keyring)).toBeGreaterThan(0);
    expect(keyring).not.toBe(own.trim());
  });

  it("drops to the user with no groups, no capabilities and no_new_privs before anything of the session", () => {
    expect(dropStep("/usr/bin/setpriv", user, ["/bin/true"])).toEqual([
      "/usr/bin/setpriv",
      "--reuid=1234",
      "--regid=2345",
      "--clear-groups",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--no-new-privs",
      "--",
      "/bin/true",
    ]);
  });
});

describe("the session step", () => {
  const bin = join(dir, "bin");
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, "tool"), "#!/bin/sh\necho \"tool $0 $*\"\n", { mode: 0o755 });
  writeFileSync(join(bin, "plain"), "not executable", { mode: 0o644 });
  const step = (command: string, args: string[] = [], env: Record<string, string> = { PATH: `${bin}:/usr/bin:/bin` }, enter: string | null = null) =>
    runStep(sessionStep({ env, enter, command, args }));

  it("runs the command with exactly the session's environment", () => {
    // and PWD, which the shell that enters the cwd sets, as a login shell would.
    expect(step("/usr/bin/env", [], { PATH: "/usr/bin:/bin", LD_PRELOAD: "" })).toEqual({ status: 0, out: `PATH=/usr/bin:/bin\nLD_PRELOAD=\nPWD=${dir}\n` });
    expect(step("tool", ["a b", "$HOME"])).toEqual({ status: 0, out: `tool ${join(bin, "tool")} a b $HOME\n` });
  });

  it("gives the command default Ctrl+C, Ctrl+\\ and Ctrl+Z, which the root step ignores", () => {
    const launch = rootStep(sessionStep({ env: {}, enter: null, command: "/bin/sh", args: ["-c", "grep -E '^SigIgn' /proc/self/status"] }), []);
    expect(launch.args[3]).toContain("trap '' INT QUIT TSTP");
    const result = spawnSync(launch.command, launch.args, { env: launch.env, encoding: "utf8" });
    // No signal ignored (the mask is hex: bit 1 INT, 2 QUIT, 19 TSTP).
    expect(result.stdout).toBe("SigIgn:\t0000000000000000\n");
  });

  it("says 127 for a command that is not there and 126 for one that may not run, as a shell does", () => {
    expect(step("no-such-cmd")).toEqual({ status: 127, out: "ptybroker: no-such-cmd: command not found\n" });
    expect(step("")).toEqual({ status: 127, out: "ptybroker: : command not found\n" });
    expect(step("./nope")).toEqual({ status: 127, out: "ptybroker: ./nope: no such file or directory\n" });
    expect(step("plain")).toEqual({ status: 126, out: "ptybroker: plain: permission denied\n" });
    expect(step(join(bin, "plain"))).toEqual({ status: 126, out: `ptybroker: ${join(bin, "plain")}: permission denied\n` });
    expect(step(bin)).toEqual({ status: 126, out: `ptybroker: ${bin}: permission denied\n` });
    // An empty PATH entry is the cwd.
    expect(step("tool", [], { PATH: ":/usr/bin" }, bin)).toMatchObject({ status: 0 });
  });

  it("makes and enters its cwd first", () => {
    const target = join(dir, "made", "here");
    expect(step("/bin/pwd", [], {}, target)).toEqual({ status: 0, out: `${target}\n` });
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
    expect(sessionFolders("/workspace", null)).toEqual({ root: "/workspace", target: "/workspace" });
    expect(sessionFolders("/workspace", "a/../b/./c")).toEqual({ root: "/workspace", target: "/workspace/b/c" });
    for (const cwd of ["..", "../globex", "/etc", "a/../../b"]) expect(() => sessionFolders("/workspace", cwd)).toThrow(/outside/);
  });
});
