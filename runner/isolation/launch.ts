// The command line node-pty runs for a session. Under a root runner it is a small /bin/sh step
// that runs as root in the session's new terminal, then replaces itself with the session's
// command (the pid stays the session leader's):
//   1. joins the session's cgroup (`echo $$ > cgroup.procs`), before anything of the session
//      runs, so that everything it starts is contained;
//   2. drops root with setpriv (util-linux): real, effective and saved uid and gid, and every
//      supplementary group. node-pty's own uid/gid options call setgid()/setuid() but not
//      setgroups(), which would leave root's group 0 to the session.
// The step starts no other process (a Ctrl+C typed that early reaches only the shell, which
// catches it; exec restores the default for the session's command). The terminal is handed to
// the user by the runner itself (runner/process/pty.ts, terminalOwner).
// A `cwd` below the tenant's folder is made and entered after the switch, as the user: the
// runner never makes folders, as root, along paths a session controls (symbolic links).
import { existsSync } from "node:fs";
import type { SessionUser } from "./session-user.js";

export interface Launch {
  command: string;
  args: string[];
}

const SEARCH = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];

/** The absolute path of a system tool, from the standard folders only (not the session's PATH). */
export function systemTool(name: string): string | null {
  for (const folder of SEARCH) {
    if (existsSync(`${folder}/${name}`)) return `${folder}/${name}`;
  }
  return null;
}

export interface SwitchTools {
  setpriv: string;
}

/** The tools a root runner needs to start sessions as other users; throws a start-up error if one is missing. */
export function switchTools(): SwitchTools {
  const setpriv = systemTool("setpriv");
  if (!setpriv) {
    throw new Error("sessions cannot be started as their own users: setpriv (util-linux) is required when the runner is root");
  }
  return { setpriv };
}

// $0 = cgroup.procs to join ("-": none), $1 = uid, $2 = gid, then the command and its arguments.
// Tool paths come from systemTool() (no quoting needed: /[\w/.-]+/).
function rootStep(tools: SwitchTools): string {
  return [
    "trap : INT QUIT TSTP",
    'p=$0 u=$1 g=$2; shift 2',
    'if [ "$p" != - ]; then echo $$ > "$p" || exit 126; fi',
    `exec ${tools.setpriv} --reuid="$u" --regid="$g" --clear-groups -- "$@"`,
  ].join("\n");
}

// A command that cannot be run (command-lookup.ts) is replaced by this step, started the same way
// (as the user, in the session's cgroup): it says why, as a shell would, and exits with the
// shell's code. $0 = the message, $1 = the exit code. The terminal turns "\n" into "\r\n".
const NOT_RUNNABLE = 'printf "%s\\n" "$0"; exit "$1"';

/** The command line of a session whose command cannot be run: prints `message`, exits `exitCode`. */
export function notRunnable(message: string, exitCode: number): Launch {
  return { command: "/bin/sh", args: ["-c", NOT_RUNNABLE, message, String(exitCode)] };
}

// Run as the user: $0 = the folder to make and enter, then the command and its arguments.
const ENTER_CWD = 'mkdir -p -- "$0" && cd -- "$0" && exec "$@"';

/**
 * What node-pty runs for a session: the command itself when the runner does not switch users,
 * else the root step above (with `cwd` entered as the user when it is not the folder node-pty
 * starts in).
 */
export function launchCommand(options: {
  command: string;
  args: string[];
  user: SessionUser;
  tools: SwitchTools | null;
  /** the session's cgroup.procs, or null */
  cgroupProcs: string | null;
  /** a folder to make and enter as the user first, or null */
  enter: string | null;
}): Launch {
  const { command, args, user, tools } = options;
  if (!user.switched || !tools) return { command, args };
  for (const path of Object.values(tools)) {
    if (!/^[\w/.-]+$/.test(path)) throw new Error(`unexpected tool path ${path}`);
  }
  const session = options.enter === null ? [command, ...args] : ["/bin/sh", "-c", ENTER_CWD, options.enter, command, ...args];
  return {
    command: "/bin/sh",
    args: ["-c", rootStep(tools), options.cgroupProcs ?? "-", String(user.uid), String(user.gid), ...session],
  };
}
