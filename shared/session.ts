// The public Session record (DESIGN §4) and its forward-only lifecycle.

export const SESSION_STATUSES = ["starting", "running", "exited", "lost", "failed"] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** starting → running → one of the terminal states; a terminal state never changes. */
const RANK: Record<SessionStatus, number> = {
  starting: 0,
  running: 1,
  exited: 2,
  lost: 2,
  failed: 2,
};

export function isTerminal(status: SessionStatus): boolean {
  return RANK[status] === 2;
}

/** Whether a session in `from` may move to `to`: only forward, never out of a terminal state. */
export function canMove(from: SessionStatus, to: SessionStatus): boolean {
  return !isTerminal(from) && RANK[to] > RANK[from];
}

export interface Session {
  id: string;
  status: SessionStatus;
  command: string;
  args: string[];
  cwd: string | null;
  cols: number;
  rows: number;
  pid: number | null;
  tags: string[];
  label: string | null;
  createdAt: string;
  exitedAt: string | null;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  offset: number;
  retainedFrom: number;
  clients: number;
}

/** What a runner needs to start a session's process. */
export interface SpawnSpec {
  command: string;
  args: string[];
  cwd: string | null;
  env: Record<string, string>;
  cols: number;
  rows: number;
}

export const DEFAULT_COMMAND = "/bin/bash";
export const DEFAULT_ARGS = ["-l"];
export const DEFAULT_COLS = 80;
export const DEFAULT_ROWS = 24;
/** Grace between SIGHUP and SIGKILL when a session is deleted. */
export const KILL_GRACE_MS = 2000;

/** Signals a client may send (DESIGN §4 lists the common ones, "..." the rest of these). */
export const SIGNALS = [
  "SIGINT",
  "SIGTERM",
  "SIGKILL",
  "SIGHUP",
  "SIGQUIT",
  "SIGUSR1",
  "SIGUSR2",
  "SIGSTOP",
  "SIGCONT",
  "SIGTSTP",
  "SIGWINCH",
  "SIGALRM",
  "SIGPIPE",
] as const;
export type SignalName = (typeof SIGNALS)[number];
