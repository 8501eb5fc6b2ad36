// Processes on this machine, as the end-to-end tests inspect them through /proc: what is left of
// a session's terminal session, which runner owns a process, whether a pid still lives, which
// TCP ports a process listens on.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { statFields } from "../runner/process/proc.js";
import { sessionMembers } from "../runner/isolation/reaper.js";

/** Pids still alive (not zombies) in the terminal session led by `sid`. */
export function liveSessionProcesses(sid: number): number[] {
  return sessionMembers(sid).filter((pid) => {
    const state = statFields(pid)?.[0];
    return state !== undefined && state !== "Z";
  });
}

/** The parent pid of `pid` (which runner process owns a session). */
export function parentPid(pid: number): number {
  return Number(statFields(pid)?.[1]);
}

/** A live process (not a zombie). */
export function alive(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== "Z";
}

/** A process's command line, words joined with spaces; "" once it is gone. */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
  } catch {
    return ""; // gone
  }
}

/**
 * Live pids on this host whose command line (words joined with spaces) is exactly `command`: how
 * a test finds, from the host, a process a sandboxed session started and that it cannot name by
 * pid any more (its session's pid namespace is gone, or never printed host pids). Give the
 * command something unique (`sleep 1000.<random>`).
 */
export function pidsRunning(command: string): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => alive(pid) && commandOf(pid) === command);
}

/**
 * The host's pid of the process a sandboxed session knows as `innerPid` (its pid namespace's
 * numbering, as `$!` or `$$` print it): the process below `leader` (the session's pid, as the API
 * reports it) whose NSpid ends with `innerPid`; null if there is none (any more).
 */
export function hostPid(leader: number, innerPid: number): number | null {
  const below = new Set([leader]);
  // Breadth-first through /proc/<pid>/task/<pid>/children from the leader.
  const queue = [leader];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    let children: number[] = [];
    try {
      children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      continue;
    }
    for (const child of children) {
      if (below.has(child)) continue;
      below.add(child);
      queue.push(child);
      try {
        const nspid = /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${child}/status`, "utf8"))?.[1].trim().split(/\s+/);
        if (nspid && nspid.length > 1 && Number(nspid.at(-1)) === innerPid) return child;
      } catch {
        // gone meanwhile
      }
    }
  }
  return null;
}

/** A TCP socket listening, as /proc/net/tcp and tcp6 show it. */
export interface ListeningSocket {
  inode: string;
  /** Dotted IPv4 ("127.0.0.1"), or the 32 hex digits of an IPv6 address as the kernel writes them. */
  address: string;
  port: number;
}

/** Every TCP socket in LISTEN state in this network namespace, by inode. */
function listeningSockets(): Map<string, ListeningSocket> {
  const found = new Map<string, ListeningSocket>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue; // no IPv6
    }
    for (const row of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const cells = row.trim().split(/\s+/);
      if (cells[3] !== "0A") continue; // TCP_LISTEN
      const [hex, port] = (cells[1] ?? "").split(":");
      const address = hex.length === 8 ? (hex.match(/../g) ?? []).map((byte) => parseInt(byte, 16)).reverse().join(".") : hex;
      found.set(cells[9], { inode: cells[9], address, port: parseInt(port, 16) });
    }
  }
  return found;
}

/** The TCP sockets `pid` listens on: its file descriptors' socket inodes found in LISTEN rows. */
export function listeningOf(pid: number): ListeningSocket[] {
  const listening = listeningSockets();
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return []; // gone
  }
  const own: ListeningSocket[] = [];
  for (const fd of fds) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      const socket = inode === undefined ? undefined : listening.get(inode);
      if (socket) own.push(socket);
    } catch {
      // closed meanwhile
    }
  }
  return own;
}
