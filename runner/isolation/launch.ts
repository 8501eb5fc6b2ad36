// The command line node-pty (or the pipe spawner) runs for a session, in three steps
// (docs/security.md, "The sandbox"; "Nothing from the request runs as root"):
//   1. The root step (a root runner only): a small /bin/bash, then /bin/sh, that run as root in
//      the session's new terminal, with a fixed environment of the runner's choosing, never the
//      request's. bash closes every descriptor above 2 that the runner inherited from whatever
//      started it (a lock, a log, a socket-activation fd, a wrapper's pipe: node-pty and Node's
//      spawn pass on every fd that is not close-on-exec), before anything else opens. sh joins
//      the session's cgroups (`echo $$ > cgroup.procs`) before anything of the session runs, so
//      that everything it starts is contained and limited, then replaces itself with bubblewrap
//      (sandbox.ts) or, without a sandbox, directly with step 2. The pid stays the session leader's.
//      Before bubblewrap, the keyring step (keyringStep) gives the session a fresh, empty session
//      keyring of its own, so that nothing of the runner's keyring is possessed inside.
//   2. The drop (inside the sandbox, still root, after the sandbox's first step: sandbox.ts): setpriv (util-linux) switches real, effective
//      and saved uid and gid, clears every supplementary group, empties the capability bounding
//      and inheritable sets and sets no_new_privs, so that no setuid program gives root back.
//      node-pty's own uid/gid options would leave root's groups and capabilities.
//   3. The session step, as the session's user: `env -i` gives it exactly the session's
//      environment (environment.ts: a fixed base plus the request's `env`), then /bin/sh enters
//      the session's cwd (made as the user), looks the command up in the session's PATH from
//      inside (126 or 127 as a shell says them, for what the user can see: no oracle about files
//      outside) and replaces itself with the command.
// Only step 3 sees the request's `env`, `command`, `args` and `cwd`. The steps start no other
// process. Steps 1 and 2 ignore Ctrl+C, Ctrl+\ and Ctrl+Z (typed while the sandbox is made, they
// end nothing); step 3 gives the session's command their default dispositions back. The terminal is handed to the user by the runner itself
// (runner/process/pty.ts, terminalOwner).
import { existsSync } from "node:fs";

export interface Launch {
  command: string;
  args: string[];
  /** the environment the first process starts with */
  env: Record<string, string>;
}

const SEARCH = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];

/** The absolute path of a system tool, from the standard folders only (not the session's PATH). */
export function systemTool(name: string): string | null {
  for (const folder of SEARCH) {
    if (existsSync(`${folder}/${name}`)) return `${folder}/${name}`;
  }
  return null;
}

/** A system tool's path, or a start-up error naming what needs it. */
export function requireTool(name: string, why: string): string {
  const path = systemTool(name);
  if (!path) throw new Error(`${why}: ${name} is required and was not found in ${SEARCH.join(", ")}`);
  if (!/^[\w/.-]+$/.test(path)) throw new Error(`unexpected tool path ${path}`);
  return path;
}

/** The environment every step that runs as root starts with: nothing of the request's. */
export const ROOT_ENV: Readonly<Record<string, string>> = Object.freeze({ PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" });

// Step 1, first part (bash: dash cannot name a descriptor above 9). Closes every fd above 2 it
// has, whatever their number, from the list in /proc/self/fd (the listing's own fd is closed by
// the time the loop runs; closing it again does nothing); refuses to go on (126) if the list
// cannot be read. Then execs the second part. Nothing is passed down on purpose: what the
// sandbox needs (fds 3 to 8) is opened after this, by the second part.
const CLOSE_STEP = [
  "trap '' INT QUIT TSTP",
  "[ -d /proc/self/fd ] || exit 126",
  "for f in /proc/self/fd/*; do",
  "  n=${f##*/}",
  '  case $n in ""|*[!0-9]*) exit 126 ;; esac',
  '  if [ "$n" -gt 2 ]; then exec {n}>&-; fi',
  "done",
  'exec "$@"',
].join("\n");

/** The shell of the root step's first part (checked at start: isolation.ts). */
export const ROOT_SHELL = "/bin/bash";

// Step 1, second part. $0 = the cgroup.procs files to join, ":"-separated ("" for none); then the command.
// Data for bubblewrap's --ro-bind-data (sandbox.ts) arrives on fds 5 to 8, opened here from
// $PTYB_DATA_<n> (heredocs: no file on disk); the seccomp filter's BPF on fd 9, from the file
// $PTYB_FILE_9 (binary, so a file: root-only, in the run's folder).
const ROOT_STEP = [
  // Ignored, not trapped: an ignored signal stays ignored across exec, so a Ctrl+C typed while
  // the sandbox is set up (an egress network takes a moment) ends neither this step nor
  // bubblewrap; the session step gives the session's command the defaults back.
  "trap '' INT QUIT TSTP",
  'IFS=:; for p in $0; do echo $$ > "$p" || exit 126; done; unset IFS',
  // An egress network's fifos (network.ts): fd 3 says the sandbox is ready, fd 4 says go.
  'if [ -n "$PTYB_INFO" ]; then exec 3>"$PTYB_INFO" 4<"$PTYB_GO" || exit 126; fi',
  'if [ -n "$PTYB_FILE_9" ]; then exec 9<"$PTYB_FILE_9" || exit 126; fi',
  'exec "$@" 5<<EOF5 6<<EOF6 7<<EOF7 8<<EOF8',
  "$PTYB_DATA_5",
  "EOF5",
  "$PTYB_DATA_6",
  "EOF6",
  "$PTYB_DATA_7",
  "EOF7",
  "$PTYB_DATA_8",
  "EOF8",
].join("\n");

// Step 3, as the user. $0 = the folder to make and enter ("" = stay), $1 = the command, then its
// arguments. The lookup is execvp's: a command with a `/` is that path, any other is searched in
// each folder of PATH in turn (an empty entry is the cwd); the first regular file the user may
// execute wins; if none, a candidate that exists makes it 126, else 127. The shell's `exec` then
// runs it by the same search. Tools are named by absolute path: PATH is the session's.
const SESSION_STEP = `exec 3>&- 4>&- 5<&- 6<&- 7<&- 8<&- 9<&-
if [ -n "$0" ]; then /bin/mkdir -p -- "$0" && cd -- "$0" || exit 1; fi
c=$1 e=127 m="command not found"
case $c in
  "") ;;
  */*) if [ -f "$c" ] && [ -x "$c" ]; then exec "$@"; fi
       if [ -e "$c" ]; then e=126 m="permission denied"; else m="no such file or directory"; fi ;;
  *) p=\${PATH-/usr/local/bin:/usr/bin:/bin}:
     while [ -n "$p" ]; do
       f=\${p%%:*}; p=\${p#*:}; f=\${f:-.}
       if [ -f "$f/$c" ] && [ -x "$f/$c" ]; then exec "$@"; fi
       if [ -e "$f/$c" ]; then e=126 m="permission denied"; fi
     done ;;
esac
printf 'ptybroker: %s: %s\\n' "$c" "$m"
exit $e`;

// The keyring step: joins a new anonymous session keyring (KEYCTL_JOIN_SESSION_KEYRING, name NULL),
// then execs the rest. Python's ctypes (the system's python3, -I -S: nothing from the environment
// or site folders), since no shell can, and seccomp refuses keyctl once inside the sandbox. Python
// ignores SIGPIPE and SIGXFSZ at its start: both get their defaults back before the exec (the
// root step has them at their defaults; INT, QUIT and TSTP stay ignored, as the root step left them).
const KEYRING_STEP = `import ctypes,os,platform,signal,sys
nr={"x86_64":250,"aarch64":219}.get(platform.machine())
if nr is None or ctypes.CDLL(None,use_errno=True).syscall(nr,1,None)<0:
  sys.stderr.write("ptybroker: no session keyring of its own\\n");sys.exit(126)
signal.signal(signal.SIGPIPE,signal.SIG_DFL);signal.signal(signal.SIGXFSZ,signal.SIG_DFL)
os.execv(sys.argv[1],sys.argv[1:])`;

/** The keyring step's command line: a fresh session keyring, then `then` (run as root, before bubblewrap). */
export function keyringStep(python: string, then: string[]): string[] {
  return [python, "-I", "-S", "-c", KEYRING_STEP, ...then];
}

/** Step 3's command line: `env -i` with exactly `env`, then the session step. */
export function sessionStep(options: { env: Record<string, string>; enter: string | null; command: string; args: string[] }): string[] {
  const assignments = Object.entries(options.env).map(([name, value]) => `${name}=${value}`);
  return ["/usr/bin/env", "-i", "--default-signal=INT,QUIT,TSTP", ...assignments, "/bin/sh", "-c", SESSION_STEP, options.enter ?? "", options.command, ...options.args];
}

/** Step 2's command line: setpriv to the user, then `then`. */
export function dropStep(setpriv: string, user: { uid: number; gid: number }, then: string[]): string[] {
  return [
    setpriv,
    `--reuid=${user.uid}`,
    `--regid=${user.gid}`,
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
    "--",
    ...then,
  ];
}

/**
 * Step 1 around `inner` (bubblewrap's command line, or the drop step): closes every inherited fd
 * above 2, joins `cgroupProcs`, opens `data` (fd → text) and `files` (fd → path: 9 only) for
 * bubblewrap, then execs `inner`; the
 * environment is ROOT_ENV.
 */
export function rootStep(
  inner: string[],
  cgroupProcs: string[],
  data: Record<number, string> = {},
  fifos: Record<string, string> = {},
  files: Record<number, string> = {},
): Launch {
  for (const path of cgroupProcs) if (path.includes(":")) throw new Error(`unexpected cgroup path ${path}`);
  const env: Record<string, string> = { ...ROOT_ENV, ...fifos };
  for (const [fd, text] of Object.entries(data)) {
    if (!["5", "6", "7", "8"].includes(fd)) throw new Error(`no data fd ${fd}`);
    env[`PTYB_DATA_${fd}`] = text;
  }
  for (const [fd, path] of Object.entries(files)) {
    if (fd !== "9") throw new Error(`no file fd ${fd}`);
    env[`PTYB_FILE_${fd}`] = path;
  }
  // --norc: bash reads ~/.bashrc (root's) even with -c when its stdin is a socket, as a pipe
  // session's is (Node's pipes are socket pairs), taking itself to be run by rshd.
  return { command: ROOT_SHELL, args: ["--norc", "--noprofile", "-c", CLOSE_STEP, "ptybroker", "/bin/sh", "-c", ROOT_STEP, cgroupProcs.join(":"), ...inner], env };
}
