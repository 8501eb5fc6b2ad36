// The public Session record (docs/protocol.md §4) and its forward-only lifecycle.

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

/** Why a session ended (docs/protocol.md §4); null while it runs. */
export const END_REASONS = ["exit", "deleted", "timeout", "idle", "detached", "drain", "oom", "runner_lost", "failed"] as const;
export type EndReason = (typeof END_REASONS)[number];

/** The three timers of a session, in seconds; 0 = off (docs/protocol.md §4, "Timers"). */
export interface SessionTimers {
  timeoutSec: number;
  idleTimeoutSec: number;
  detachedTimeoutSec: number;
}

/**
 * A session's network (docs/protocol.md §3, "Create"): `none`, a loopback of its own only;
 * `egress`, outbound connections through the runner's user-mode network stack.
 */
export const SESSION_NETWORKS = ["none", "egress"] as const;
export type SessionNetwork = (typeof SESSION_NETWORKS)[number];

/** How the runner contained a session's process: its own namespaces (`bwrap`), or not at all (`none`). */
export const SESSION_SANDBOXES = ["bwrap", "none"] as const;
export type SessionSandbox = (typeof SESSION_SANDBOXES)[number];

/**
 * A session's resource limits (docs/protocol.md §3, "Create"): memory in MiB, processes and
 * threads, CPUs (fractions allowed). A create may ask for any of them; the runner reports all
 * three as it applied them.
 */
export interface SessionLimits {
  memoryMiB: number;
  pids: number;
  cpus: number;
}

/** The least a create may ask for. */
export const SESSION_LIMITS_MIN = { memoryMiB: 32, pids: 8, cpus: 0.05 } as const;
/**
 * The most a create may ask for: every tenant's maximum unless the admin API set a lower one for
 * the tenant. More is refused with 400 naming the field and the maximum.
 */
export const SESSION_LIMITS_MAX = { memoryMiB: 16384, pids: 4096, cpus: 8 } as const;

export interface Session extends SessionTimers {
  id: string;
  status: SessionStatus;
  command: string;
  args: string[];
  cwd: string | null;
  cols: number;
  rows: number;
  /**
   * false: the process runs with pipes, not a terminal (docs/protocol.md §3, "Processes without a
   * terminal")
   */
  pty: boolean;
  pid: number | null;
  tags: string[];
  label: string | null;
  createdAt: string;
  exitedAt: string | null;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  reason: EndReason | null;
  offset: number;
  retainedFrom: number;
  clients: number;
  /** When `timeoutSec` will end the session (ISO time), or null. */
  expiresAt: string | null;
  /** How the runner contained the process, as it reported at the start; null until then. */
  sandbox: SessionSandbox | null;
  /** The network asked for (null: the runner's default), then the one the runner applied. */
  network: SessionNetwork | null;
  /**
   * The limits asked for (only those asked; null: none), then the three the runner applied.
   */
  limits: Partial<SessionLimits> | null;
}

/** What a runner needs to start a session's process. */
export interface SpawnSpec {
  command: string;
  args: string[];
  cwd: string | null;
  env: Record<string, string>;
  cols: number;
  rows: number;
  /** false: pipes instead of a terminal; absent: a terminal */
  pty?: boolean;
  /** What the client asked for; absent: the runner's default. */
  network?: SessionNetwork;
  limits?: Partial<SessionLimits>;
  /**
   * The tenant's maxima (admin API): a limit the create did not ask for is the runner's default,
   * but at most this. Absent: no maximum but SESSION_LIMITS_MAX.
   */
  limitsMax?: Partial<SessionLimits>;
  /**
   * The tenant's own workspace size and output log bound (admin API) when the session was
   * created; each absent: the runner's TENANT_DISK_MIB, TENANT_LOG_BYTES.
   */
  tenantLimits?: { diskMiB?: number; logBytes?: number };
}

export const DEFAULT_COMMAND = "/bin/bash";
export const DEFAULT_ARGS = ["-l"];
export const DEFAULT_COLS = 80;
export const DEFAULT_ROWS = 24;
/** Grace between SIGHUP and SIGKILL when a session is deleted. */
export const KILL_GRACE_MS = 2000;

/** Signals a client may send (all listed in docs/protocol.md §3, `POST /v1/sessions/:id/signal`). */
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

/** What `GET /v1/events` reports about a tenant's sessions (docs/protocol.md §3, "Events"). */
export const EVENT_TYPES = ["session.created", "session.updated", "session.exited", "session.deleted"] as const;
export type TenantEventType = (typeof EVENT_TYPES)[number];

/** One event's `data:`; its `id:` is the tenant's sequence number, which only grows. */
export interface TenantEvent {
  type: TenantEventType;
  session: Session;
  /** ISO time */
  at: string;
}

/** What `POST /v1/exec` answers (docs/protocol.md §3, "Exec"). */
export interface ExecResult {
  /** The `pty: false` session it ran as: readable and replayable like any other. */
  id: string;
  exitCode: number | null;
  signal: string | null;
  /** UTF-8 text; stdout and stderr together carry at most `maxOutputBytes`, the first in output order. */
  stdout: string;
  stderr: string;
  /** The output was longer than `maxOutputBytes` (or older output was already trimmed). */
  truncated: boolean;
  durationMs: number;
  /** `timeoutSec` passed and the process was killed with SIGKILL. */
  timedOut: boolean;
  /** Why the session ended, as in its record (`"oom"`: killed for passing its memory limit). */
  reason: EndReason | null;
}

/** A page of `GET /v1/sessions`: `nextCursor` continues after the last one, null at the end. */
export interface SessionPage {
  sessions: Session[];
  nextCursor: string | null;
}
