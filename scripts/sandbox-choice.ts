// Whether `npm start`'s runner puts each session in a sandbox (docs/security.md): bubblewrap for
// the namespaces, slirp4netns and nftables for a session's outbound network, all run by the
// runner as root (namespaces, cgroups, loop-mounted workspaces). The runner's default is
// RUNNER_SANDBOX=bwrap, and a runner started on its own refuses to start without its sandbox's
// programs or without root; `npm start` alone falls back to RUNNER_SANDBOX=none when it cannot
// sandbox (not root, or a program missing), so that a first `npm start` works, and says so
// loudly: sessions then run on the machine as they are. `chooseSandbox` is the decision (pure,
// tested in sandbox-choice.test.ts); `findProgram` and `sandboxFacts` read the machine.
import { spawnSync } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";

/**
 * The programs of the sandbox a system may lack (setpriv, nsenter and mkfifo come with every
 * Debian): bubblewrap; slirp4netns and nft for a session's network (the runner refuses to start
 * without any of them unless RUNNER_SANDBOX=none). Also missing then: python3-seccomp, the
 * system python3's libseccomp bindings (hasPythonSeccomp).
 */
export const SANDBOX_PROGRAMS = ["bwrap", "slirp4netns", "nft"] as const;

/** Where the runner takes the programs it runs as root from: the system's folders, never PATH. */
export const SYSTEM_FOLDERS = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];

/** What installs them (Debian's packages; nftables holds a session's deny list). */
export const SANDBOX_INSTALL = "sudo apt-get install bubblewrap slirp4netns nftables python3-seccomp";

export interface SandboxFacts {
  /** RUNNER_SANDBOX as set in npm start's environment; undefined or "" when not set. */
  asked: string | undefined;
  /** npm start runs as root (its runner runs as the same user). */
  root: boolean;
  /** Which of SANDBOX_PROGRAMS were not found. */
  missing: string[];
}

export interface SandboxChoice {
  /** The sandbox the runner is started with. */
  sandbox: string;
  /** What the runner's environment gets on top of npm start's own. */
  env: Record<string, string>;
  /** The warning to print before anything starts, when sessions will run unsandboxed. */
  warning: string | undefined;
}

const RULE = "!".repeat(78);

function unsandboxed(why: string[], fix: string[]): string {
  return [
    RULE,
    "!! WARNING: sessions run UNSANDBOXED (RUNNER_SANDBOX=none).",
    ...why.map((line) => `!! ${line}`),
    "!! Every session is a shell on this machine itself: it sees its processes and the files it may",
    "!! read, and reaches every service on 127.0.0.1 (the edge, Redis, databases). Local use only.",
    ...fix.map((line) => `!! ${line}`),
    RULE,
  ].join("\n");
}

/**
 * The runner's sandbox for `npm start`: an explicit RUNNER_SANDBOX is the runner's to take as it is
 * (`none` still gets the warning); otherwise bwrap when npm start is root and every sandbox program
 * is there, else `none` with a warning saying why and what to do.
 */
export function chooseSandbox(facts: SandboxFacts): SandboxChoice {
  if (facts.asked === "none") {
    const warning = unsandboxed(["RUNNER_SANDBOX=none is set."], ["Unset it to sandbox them."]);
    return { sandbox: "none", env: { RUNNER_SANDBOX: "none" }, warning };
  }
  if (facts.asked) return { sandbox: facts.asked, env: { RUNNER_SANDBOX: facts.asked }, warning: undefined };
  const why: string[] = [];
  const fix: string[] = [];
  if (facts.missing.length > 0) {
    why.push(`${facts.missing.join(", ")} not found in ${SYSTEM_FOLDERS.join(", ")}: the sandbox needs them.`);
    fix.push(`Install them: ${SANDBOX_INSTALL}`);
  }
  if (!facts.root) {
    why.push("npm start is not running as root: the sandbox needs root (namespaces, cgroups, mounts).");
    fix.push("Run npm start as root.");
  }
  if (why.length === 0) return { sandbox: "bwrap", env: {}, warning: undefined };
  return { sandbox: "none", env: { RUNNER_SANDBOX: "none" }, warning: unsandboxed(why, fix) };
}

/** Where the executable file `name` is in `folders` (the runner's: SYSTEM_FOLDERS), or undefined. */
export function findProgram(name: string, folders: string[] = SYSTEM_FOLDERS): string | undefined {
  return folders.map((dir) => join(dir, name)).find((file) => {
    try {
      accessSync(file, constants.X_OK);
      return statSync(file).isFile();
    } catch {
      return false;
    }
  });
}

/** Whether the system's python3 has libseccomp's bindings (the sandbox's seccomp filter, runner/isolation/seccomp.ts). */
export function hasPythonSeccomp(): boolean {
  const python = findProgram("python3");
  return python !== undefined && spawnSync(python, ["-I", "-c", "import seccomp"], { stdio: "ignore" }).status === 0;
}

/** The facts of this machine and this process. */
export function sandboxFacts(env: NodeJS.ProcessEnv = process.env): SandboxFacts {
  return {
    asked: env.RUNNER_SANDBOX,
    root: process.getuid?.() === 0,
    missing: [...SANDBOX_PROGRAMS.filter((name) => !findProgram(name)), ...(hasPythonSeccomp() ? [] : ["python3-seccomp"])],
  };
}
