// Whether a session's command can be run, decided before it is spawned, so that one that
// cannot ends the way a shell says it: exit 127 and "ptybroker: <command>: command not found"
// (or "no such file or directory" for a path), exit 126 and "permission denied" for a file that
// is there but may not be executed (docs/protocol.md §3). Without this node-pty's
// child fails in execvp and the session ends with 1 and "execvp(3) failed.: ...".
//
// The search is execvp's: a command with a `/` is that path (from the session's cwd), any other
// is looked up in each folder of the session's PATH in turn (an empty entry is the cwd); the
// first regular file the session's user may execute wins; if none, a candidate that exists
// (or a folder on the way that may not be searched) makes it 126, else 127.
// The runner checks as the session's user: its own access(2) when sessions run as the runner's
// user; else from the mode bits, as that user after setpriv (its uid, its gid, no other
// groups), for the file and for every folder on the way — so a session learns nothing of a
// folder it could not search by trying a command there.
import { accessSync, constants, statSync, type Stats } from "node:fs";
import { resolve, sep } from "node:path";

export type CommandLookup =
  | { found: true }
  | { found: false; exitCode: 126 | 127; message: string };

export interface LookupOptions {
  /** the session's PATH (its environment's) */
  path: string | undefined;
  /** the session's working directory: relative commands and PATH entries start there */
  cwd: string;
  /** the user the session runs as, when it is not the runner's own; null = the runner's user */
  as: { uid: number; gid: number } | null;
}

const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

type Verdict = "ok" | "missing" | "denied";

export function lookupCommand(command: string, options: LookupOptions): CommandLookup {
  const hasSlash = command.includes("/");
  const candidates = hasSlash
    ? [resolve(options.cwd, command)]
    : (options.path ?? DEFAULT_PATH).split(":").map((folder) => resolve(options.cwd, folder || ".", command));
  let denied = false;
  if (command !== "") {
    for (const candidate of candidates) {
      const verdict = options.as ? checkAs(candidate, options.as) : checkOwn(candidate);
      if (verdict === "ok") return { found: true };
      if (verdict === "denied") denied = true;
    }
  }
  if (denied) return { found: false, exitCode: 126, message: `ptybroker: ${command}: permission denied` };
  const what = hasSlash ? "no such file or directory" : "command not found";
  return { found: false, exitCode: 127, message: `ptybroker: ${command}: ${what}` };
}

/** As the runner's own user: access(2), and a regular file (execve refuses folders). */
function checkOwn(file: string): Verdict {
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EACCES" ? "denied" : "missing";
  }
  if (!stats.isFile()) return "denied";
  try {
    accessSync(file, constants.X_OK);
    return "ok";
  } catch {
    return "denied";
  }
}

/** As another user (uid, gid, no supplementary groups), from the mode bits along the path. */
function checkAs(file: string, who: { uid: number; gid: number }): Verdict {
  const parts = file.split(sep).filter(Boolean);
  let folder: string = sep;
  for (let i = 0; i < parts.length; i++) {
    let stats: Stats;
    try {
      stats = statSync(folder);
    } catch {
      return "missing";
    }
    if (!stats.isDirectory()) return "missing";
    if (!permits(stats, who, 1)) return "denied";
    folder = resolve(folder, parts[i]);
  }
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch {
    return "missing";
  }
  return stats.isFile() && permits(stats, who, 1) ? "ok" : "denied";
}

/** Whether `bit` (1 = execute/search) is granted to `who` by the owner, group or other bits. */
function permits(stats: Stats, who: { uid: number; gid: number }, bit: number): boolean {
  const shift = stats.uid === who.uid ? 6 : stats.gid === who.gid ? 3 : 0;
  return ((stats.mode >> shift) & bit) !== 0;
}
