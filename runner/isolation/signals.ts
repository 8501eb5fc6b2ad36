// How a signal from the edge reaches a session (docs/security.md, "Signals"; issue 38, finding 1):
// only processes that are the session's get it, never a number read back from the terminal or
// /proc as it is. The terminal's foreground group (its tpgid) is only a filter: the signal goes to
// the members of the session (its containment cgroup's `cgroup.procs`; where the runner has no
// cgroups, the processes of its terminal session) whose process group is that one, or, when none
// is, to the session's own leader (its shell) alone. A shell can make a group of its own the
// foreground one and let it die: the terminal keeps the dead number, the host may give it to one
// of its own process groups, and a `kill(-tpgid)` as root would land there.
//
// A pid read from `cgroup.procs` can be reused between the read and the kill, so each member is
// held by a pidfd (`pidfd_open`, Linux 5.3) before it is checked, and signalled through it
// (`pidfd_send_signal`): a process that is checked and then replaced is not the one signalled,
// and one that died meanwhile is not signalled at all. Node has no pidfd API, so a few lines of
// python3 (its `os.pidfd_open` and `signal.pidfd_send_signal`, Python 3.9+) do it, run with `-I -S`
// (no environment, no site, no user's folder) and the root steps' fixed environment. A member
// counts only if, read after its pidfd was opened, it is still listed in the cgroup (or, in a
// terminal session, has that session id while the session's leader, held by a pidfd of its own
// and matched by its start time, still lives) and is in the foreground group.
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { log } from "../../shared/log.js";
import { ROOT_ENV } from "./launch.js";

/** Who belongs to the session: its cgroup's `cgroup.procs`, or the terminal session led by `sid`. */
export type Membership = { kind: "cgroup"; procs: string } | { kind: "session"; sid: number; startTime: string };

export interface SignalRequest {
  /** the signal's name (SIGINT...) */
  signal: string;
  /** the foreground group to match (a filter, never signalled as such); -1: the leader only */
  group: number;
  /** the session's own leader (its shell), signalled when no member is in `group` */
  leader: number;
  membership: Membership;
}

/** What the helper did: how many of the group it signalled, and whether the leader was signalled instead. */
export interface SignalOutcome {
  sent: number;
  leader: boolean;
}

// argv: signal number, group, leader, "cgroup" <procs file> | "session" <sid> <start time>.
// Prints "sent N leader 0|1". Each round signals members not signalled before (a process the
// group forks while it is being signalled is caught by the next), at most ROUNDS rounds.
export const HELPER = String.raw`
import os, signal, sys
sig, group, leader, mode, where = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ROUNDS = 4

def stat(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split(" ")

def pidfd(pid):
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None

def listed():
    if mode == "cgroup":
        try:
            with open(where) as f:
                return {int(word) for word in f.read().split()}
        except OSError:
            return set()
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat(int(name))
            if fields is not None and fields[3] == where:
                found.add(int(name))
    return found

anchor = None
if mode == "session":
    # The leader's pid is the session id: held, and matched by start time, it cannot be reused.
    anchor = pidfd(int(where))
    fields = stat(int(where))
    if anchor is None or fields is None or fields[19] != sys.argv[6]:
        print("sent 0 leader 0")
        sys.exit(0)

def anchored():
    if anchor is None:
        return True
    try:
        signal.pidfd_send_signal(anchor, 0)
        return True
    except OSError:
        return False

def members(pids, want):
    held = {}
    for pid in pids:
        fd = pidfd(pid)
        if fd is not None:
            held[pid] = fd
    chosen = {}
    for pid, fd in held.items():
        fields = stat(pid)
        if fields is not None and want(fields) and (mode == "cgroup" or fields[3] == where):
            chosen[pid] = fd
        else:
            os.close(fd)
    # Read after the pidfds: a pid listed now whose pidfd still names a live process was that
    # process when it was read (else the send below fails with ESRCH).
    still = listed() if mode == "cgroup" else None
    for pid in list(chosen):
        if (still is not None and pid not in still) or not anchored():
            os.close(chosen.pop(pid))
    return chosen

def send(chosen):
    sent = 0
    for pid, fd in chosen.items():
        try:
            signal.pidfd_send_signal(fd, sig)
            sent += 1
        except OSError:
            pass
        os.close(fd)
    return sent

done, sent = set(), 0
if group > 0:
    for _ in range(ROUNDS):
        chosen = members(listed() - done, lambda fields: int(fields[2]) == group)
        if not chosen:
            break
        done |= set(chosen)
        sent += send(chosen)
fallback = 0
if sent == 0:
    fallback = send(members([leader], lambda fields: True))
print("sent %d leader %d" % (sent, fallback))
`;

const HELPER_TIMEOUT_MS = 5000;

/**
 * Runs the helper for `request` with `python3` (an absolute path); resolves with what it did, or
 * rejects (a helper that failed or took longer than HELPER_TIMEOUT_MS: it is killed).
 */
export function deliverSignal(python3: string, request: SignalRequest): Promise<SignalOutcome> {
  const number = (constants.signals as Record<string, number>)[request.signal];
  if (!Number.isInteger(number)) return Promise.reject(new Error(`unknown signal ${request.signal}`));
  const m = request.membership;
  const where = m.kind === "cgroup" ? [m.procs] : [String(m.sid), m.startTime];
  const args = ["-I", "-S", "-c", HELPER, String(number), String(request.group), String(request.leader), m.kind, ...where];
  return new Promise((resolve, reject) => {
    const child = spawn(python3, args, { cwd: "/", env: { ...ROOT_ENV }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (out += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (err += text.slice(0, 2000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), HELPER_TIMEOUT_MS);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const said = /^sent (\d+) leader ([01])$/m.exec(out);
      if (code === 0 && said) resolve({ sent: Number(said[1]), leader: said[2] === "1" });
      else reject(new Error(`the signal helper failed (${signal ?? `exit ${code}`}): ${err.trim() || out.trim()}`));
    });
  });
}

/**
 * Signals in the order they were asked for, per session: each waits for the one before it (a
 * SIGINT then a SIGKILL arrive in that order).
 */
export class SignalQueue {
  private readonly tails = new Map<string, Promise<void>>();

  constructor(private readonly python3: string) {}

  send(key: string, request: () => SignalRequest | null): Promise<void> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous.then(async () => {
      const asked = request(); // read when its turn comes: the foreground group as it is then
      if (!asked) return;
      try {
        const outcome = await deliverSignal(this.python3, asked);
        log.debug("session.signal", { key, signal: asked.signal, ...outcome });
      } catch (error) {
        log.warn("session.signal", { key, signal: asked.signal, outcome: "failed", error: error instanceof Error ? error.message : String(error) });
      }
    });
    this.tails.set(key, next);
    void next.finally(() => {
      if (this.tails.get(key) === next) this.tails.delete(key);
    });
    return next;
  }
}
