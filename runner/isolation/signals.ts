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
// python3 (its `os.pidfd_open` and `signal.pidfd_send_signal`, Python 3.9+) do it: one process for
// the runner (SignalHelper), run with `-I -S` (no environment, no site, no user's folder) and the
// root steps' fixed environment, that takes a request a line (a python3 started for each signal
// made Ctrl+C through the API some 50 ms slower). A member counts only if, read after its pidfd
// was opened, it is still listed in the cgroup (or, in a terminal session, has that session id
// while the session's leader, held by a pidfd of its own, still lives) and is in the foreground
// group; the session's first process (the runner's own child) counts by its start time, also
// before it has joined its cgroup.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { constants } from "node:os";
import { log } from "../../shared/log.js";
import { ROOT_ENV } from "./launch.js";

/**
 * Who belongs to the session: its first process (the runner's own child, known by its start time,
 * /proc/<pid>/stat field 22), and the processes of its cgroup (`procs`, its `cgroup.procs`) or,
 * without one (null), of the terminal session that first process leads.
 */
export interface Membership {
  first: number;
  startTime: string;
  procs: string | null;
}

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

// One request a line, tab-separated: signal number, group, leader, first process, its start time,
// the cgroup.procs file or "-" (the first process's terminal session). Answers each with a line, "sent N leader 0|1" (or "error ...").
// Each round signals members not signalled before (a process the group forks while it is being
// signalled is caught by the next), at most ROUNDS rounds.
export const HELPER = String.raw`
import os, signal, sys
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

def handle(words):
    sig, group, leader, first, start, procs = int(words[0]), int(words[1]), int(words[2]), int(words[3]), words[4], words[5]
    cgroup = procs != "-"

    def listed():
        if cgroup:
            try:
                with open(procs) as f:
                    return {int(word) for word in f.read().split()}
            except OSError:
                return set()
        found = set()
        for name in os.listdir("/proc"):
            if name.isdigit():
                fields = stat(int(name))
                if fields is not None and fields[3] == str(first):
                    found.add(int(name))
        return found

    # The session's first process (the runner's own child), known by its start time; without a
    # cgroup its pid is the terminal session's id, and held it cannot be reused.
    anchor = pidfd(first)
    fields = stat(first)
    if anchor is None or fields is None or fields[19] != start:
        if anchor is not None:
            os.close(anchor)
        anchor = None
        if not cgroup:
            return "sent 0 leader 0"

    def anchored():
        try:
            signal.pidfd_send_signal(anchor, 0)
            return True
        except (OSError, TypeError):
            return False

    def members(pids, want):
        held = {}
        for pid in pids:
            fd = pidfd(pid)
            if fd is not None:
                held[pid] = fd
        chosen, checked = {}, set()
        for pid, fd in held.items():
            fields = stat(pid)
            ok = fields is not None and want(fields)
            if ok and pid == first:
                ok = fields[19] == start  # read after its pidfd: it is that process, or the send fails
                checked.add(pid)
            elif ok and not cgroup:
                ok = fields[3] == str(first)
            if ok:
                chosen[pid] = fd
            else:
                os.close(fd)
        # Read after the pidfds: a pid listed now whose pidfd still names a live process was that
        # process when it was read (else the send below fails with ESRCH).
        still = listed() if cgroup else None
        for pid in list(chosen):
            if pid in checked:
                continue
            if (still is not None and pid not in still) or (not cgroup and not anchored()):
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

    try:
        done, sent = set(), 0
        if group > 0:
            for _ in range(ROUNDS):
                chosen = members((listed() | {first}) - done, lambda fields: int(fields[2]) == group)
                if not chosen:
                    break
                done |= set(chosen)
                sent += send(chosen)
        fallback = 0
        if sent == 0:
            fallback = send(members([leader], lambda fields: True))
        return "sent %d leader %d" % (sent, fallback)
    finally:
        if anchor is not None:
            os.close(anchor)

while True:
    line = sys.stdin.readline()
    if not line:
        break
    try:
        reply = handle(line.rstrip("\n").split("\t"))
    except Exception as error:
        reply = "error %s" % type(error).__name__
    sys.stdout.write(reply + "\n")
    sys.stdout.flush()
`;

const HELPER_TIMEOUT_MS = 5000;

interface Waiting {
  resolve(outcome: SignalOutcome): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * The helper, one python3 for the runner (started at once, started again at the next signal if it
 * ended): a signal costs a line each way, not a process. Requests are answered in the order
 * written, so signals go in the order asked.
 */
export class SignalHelper {
  private child: ChildProcessWithoutNullStreams | null = null;
  private readonly waiting: Waiting[] = [];
  private closed = false;

  constructor(private readonly python3: string) {}

  /** Starts the helper now rather than at the first signal. */
  warm(): void {
    if (!this.child && !this.closed) this.start();
  }

  /** Signals the session's processes as `request` says; rejects if the helper fails or takes more than HELPER_TIMEOUT_MS. */
  send(request: SignalRequest): Promise<SignalOutcome> {
    const number = (constants.signals as Record<string, number>)[request.signal];
    if (!Number.isInteger(number)) return Promise.reject(new Error(`unknown signal ${request.signal}`));
    if (this.closed) return Promise.reject(new Error("the signal helper is closed"));
    const m = request.membership;
    const words = [number, request.group, request.leader, m.first, m.startTime, m.procs ?? "-"].map(String);
    if (words.some((word) => /[\t\n]/.test(word) || word === "")) return Promise.reject(new Error("a signal request with an unusable field"));
    const child = this.child ?? this.start();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.fail(child, new Error(`the signal helper gave no answer in ${HELPER_TIMEOUT_MS} ms`)), HELPER_TIMEOUT_MS);
      this.waiting.push({ resolve, reject, timer });
      child.stdin.write(`${words.join("\t")}\n`);
    });
  }

  /** Ends the helper (its input closes; it exits); signals asked after this are refused. */
  close(): void {
    this.closed = true;
    const child = this.child;
    if (child) {
      this.fail(child, new Error("the signal helper is closed"));
    }
  }

  private start(): ChildProcessWithoutNullStreams {
    const child = spawn(this.python3, ["-I", "-S", "-c", HELPER], { cwd: "/", env: { ...ROOT_ENV }, stdio: ["pipe", "pipe", "pipe"] });
    this.child = child;
    let buffer = "";
    let said = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      buffer += text;
      for (let end = buffer.indexOf("\n"); end >= 0; end = buffer.indexOf("\n")) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        const waiting = this.waiting.shift();
        if (!waiting) continue;
        clearTimeout(waiting.timer);
        const answer = /^sent (\d+) leader ([01])$/.exec(line);
        if (answer) waiting.resolve({ sent: Number(answer[1]), leader: answer[2] === "1" });
        else waiting.reject(new Error(`the signal helper answered ${JSON.stringify(line.slice(0, 200))}`));
      }
    });
    child.stderr.setEncoding("utf8").on("data", (text: string) => (said = (said + text).slice(-2000)));
    child.stdin.on("error", () => {}); // it ended: told by "exit" below
    child.on("error", (error) => this.fail(child, error));
    child.on("exit", (code, signal) => {
      if (!this.closed) log.warn("runner.signals", { outcome: "helper_exited", code, signal, said: said.trim() || undefined });
      this.fail(child, new Error(`the signal helper ended (${signal ?? `exit ${code}`})`));
    });
    // The runner's own end is not held up by it: its input closes with the runner.
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as { unref?: () => void }).unref?.();
    return child;
  }

  /** The helper `child` failed (or is closed): every signal waiting for it is refused, and it is ended. */
  private fail(child: ChildProcessWithoutNullStreams, error: Error): void {
    if (this.child !== child) return;
    this.child = null;
    child.stdin.end();
    if (child.exitCode === null && child.signalCode === null && !this.closed) child.kill("SIGKILL"); // the one started here, by its pid
    for (const waiting of this.waiting.splice(0)) {
      clearTimeout(waiting.timer);
      waiting.reject(error);
    }
  }
}
