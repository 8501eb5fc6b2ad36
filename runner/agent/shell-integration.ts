// Shell integration (docs/protocol.md §3, "Agents"): a session whose command is bash as a login
// shell (the default, `/bin/bash -l`) starts as `bash --init-file <this runner's file>` instead.
// The file does what a login shell does (profile files), then adds OSC 133 marks around the prompt,
// the command line and each command's output, so the runner knows where every command starts and
// ends and with which exit code, whoever typed it (shell-tracker.ts). Terminals ignore OSC 133
// (xterm.js does): the prompt looks exactly as it did.
//
// The file is the same for every session on the runner, and each session's shell sources it: it
// is written at start into a folder of the runner's own (root's under a root runner), mode 0755,
// the file 0644, so that every session user reads it and none can change what another tenant's
// shell runs.
import { chmodSync, chownSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The folder under the workspace that holds the file (tenant folders never start with a dot). */
const FOLDER = ".ptybroker-shell";
const FILE = "bash-init";

/** The file's text (runner/agent/bash-init.sh, next to this module). */
export const BASH_INIT = readFileSync(fileURLToPath(new URL("./bash-init.sh", import.meta.url)), "utf8");

/** Whether a session's command is bash started as a login shell (and nothing else): it gets the integration. */
export function isLoginBash(command: string, args: readonly string[]): boolean {
  if (command !== "bash" && command !== "/bin/bash" && !command.endsWith("/bash")) return false;
  return args.length === 0 || (args.length === 1 && (args[0] === "-l" || args[0] === "--login"));
}

/** Arguments that start bash with the integration file instead of as a login shell. */
export function integratedBashArgs(initFile: string): string[] {
  return ["--init-file", initFile];
}

/**
 * Writes the integration file under `workspace` (`<workspace>/.ptybroker-shell/bash-init`) and
 * returns its path. The folder is made or taken back: a directory (never a link), owned by the
 * runner's user, 0755; the file is written beside it and renamed into place (replacing whatever
 * was there, a link included, without following it), 0644.
 */
export function installShellIntegration(workspace: string): string {
  const folder = join(workspace, FOLDER);
  mkdirSync(workspace, { recursive: true });
  let stat = lstatSync(folder, { throwIfNoEntry: false });
  if (stat && !stat.isDirectory()) {
    rmSync(folder, { force: true });
    stat = undefined;
  }
  if (!stat) mkdirSync(folder, { mode: 0o755 });
  const uid = process.getuid?.() ?? -1;
  const gid = process.getgid?.() ?? -1;
  stat = lstatSync(folder);
  if (uid >= 0 && (stat.uid !== uid || stat.gid !== gid)) chownSync(folder, uid, gid);
  if ((stat.mode & 0o7777) !== 0o755) chmodSync(folder, 0o755);
  const path = join(folder, FILE);
  const staging = `${path}.${process.pid}.tmp`;
  writeFileSync(staging, BASH_INIT, { mode: 0o644 });
  chmodSync(staging, 0o644); // whatever the umask
  renameSync(staging, path);
  return path;
}
