// A session's record (docs/protocol.md §4) and its storage: what was asked for, the forward-only
// status and why it ended, the offset of the output the edge holds and where the log starts, and
// the credentials of the session's runner links. Knows nothing of sockets, timers or the tenant.
import { type Failure, fail } from "../../shared/errors.js";
import type { ServerMessage } from "../../shared/protocol.js";
import {
  type EndReason,
  type Session,
  type SessionStatus,
  type SpawnSpec,
  canMove,
  isTerminal,
} from "../../shared/session.js";
import { sessionKey } from "../env.js";
import type { CreateRequest, SessionPatch } from "../rpc.js";

export class SessionRecord {
  private stored: Stored | undefined;
  /** Offset of the next output byte: everything below it is stored in the log and acknowledged. */
  private offsetNow: number;
  /** Oldest offset the log still holds, as the runner last reported it. */
  private retainedFromNow: number;

  constructor(private readonly storage: DurableObjectStorage) {
    this.stored = storage.kv.get<Stored>("session");
    this.offsetNow = storage.kv.get<number>("offset") ?? 0;
    this.retainedFromNow = storage.kv.get<number>("retainedFrom") ?? 0;
  }

  /** The stored session, or undefined when there is none (never created, or purged). */
  get current(): Stored | undefined {
    return this.stored;
  }

  get offset(): number {
    return this.offsetNow;
  }

  get retainedFrom(): number {
    return this.retainedFromNow;
  }

  /** The session exists and has a terminal status. */
  get ended(): boolean {
    return this.stored !== undefined && isTerminal(this.stored.record.status);
  }

  /** A new session, `starting`, with fresh link credentials and a new incarnation. */
  begin(request: CreateRequest, now: number): Stored {
    const { tenant, id, spec, timers, timeoutSignal, lazy } = request;
    this.stored = {
      tenant,
      spec,
      ...(lazy ? { lazy: true as const } : {}),
      ...(timeoutSignal ? { timeoutSignal } : {}),
      runnerId: null,
      incarnation: crypto.randomUUID(),
      linkToken: randomToken(),
      readerToken: randomToken(),
      record: {
        id,
        status: "starting",
        command: spec.command,
        args: spec.args,
        cwd: spec.cwd,
        cols: spec.cols,
        rows: spec.rows,
        pty: spec.pty !== false,
        pid: null,
        tags: request.tags,
        label: request.label,
        createdAt: request.createdAt,
        exitedAt: null,
        exitCode: null,
        signal: null,
        error: null,
        reason: null,
        ...timers,
        expiresAt: expiresAt(timers.timeoutSec, now),
        // As asked until the runner's `started` says what it applied (session-start.ts).
        sandbox: null,
        network: spec.network ?? null,
        limits: spec.limits ?? null,
      },
    };
    this.save();
    return this.stored;
  }

  placed(runnerId: string): void {
    if (!this.stored) return;
    this.stored.runnerId = runnerId;
    this.save();
  }

  /** Forgets the session in memory (its storage is deleted by the caller). */
  discard(): void {
    this.stored = undefined;
    this.offsetNow = 0;
    this.retainedFromNow = 0;
  }

  /** Output up to `end` has been taken (stored with the next ack, or with the end). */
  advance(end: number): void {
    this.offsetNow = end;
  }

  /** Writes the current offset to storage (made durable by the sync that follows); returns it. */
  storeOffset(): number {
    this.storage.kv.put("offset", this.offsetNow);
    return this.offsetNow;
  }

  /** A read found nothing in [from, to): if that reaches back to the log's start, the start moved. */
  noteLeadingGap(from: number, to: number): void {
    if (from <= this.retainedFromNow) this.noteRetainedFrom(to);
  }

  /** The log starts at `from` or later (a trim, an expiry or a lost Redis moved it on). */
  noteRetainedFrom(from: number): void {
    const next = Math.min(from, this.offsetNow);
    if (next <= this.retainedFromNow) return;
    this.retainedFromNow = next;
    this.storage.kv.put("retainedFrom", next);
  }

  /**
   * Moves the status forward (never back, never out of a terminal status); false if it could
   * not. A terminal status stores where output ends and clears what only a live session has.
   */
  move(status: SessionStatus, patch: Partial<RecordFields>, now: number): boolean {
    const stored = this.stored;
    if (!stored || !canMove(stored.record.status, status)) return false;
    Object.assign(stored.record, patch, { status });
    if (isTerminal(status)) {
      stored.record.exitedAt = new Date(now).toISOString();
      stored.ending = undefined;
      this.storeOffset();
    }
    this.save();
    return true;
  }

  /** Why the session is being ended (the first reason given holds until it has ended). */
  ending(reason: EndReason): EndReason {
    const stored = this.stored;
    if (!stored) return reason;
    if (!stored.ending) {
      stored.ending = reason;
      this.save();
    }
    return stored.ending;
  }

  /** PATCH: timers from now (`timeoutSec` moves `expiresAt`), label and tags. */
  patch(patch: SessionPatch, now: number): Failure | undefined {
    const stored = this.stored;
    if (!stored) return fail("NOT_FOUND", "session not found");
    const record = stored.record;
    const timerFields = ["timeoutSec", "idleTimeoutSec", "detachedTimeoutSec"] as const;
    if (isTerminal(record.status) && timerFields.some((f) => patch[f] !== undefined)) {
      return fail("SESSION_EXITED", `session has ${record.status}: its timers are over`);
    }
    if (patch.timeoutSec !== undefined) {
      record.timeoutSec = patch.timeoutSec;
      record.expiresAt = expiresAt(patch.timeoutSec, now);
    }
    if (patch.idleTimeoutSec !== undefined) record.idleTimeoutSec = patch.idleTimeoutSec;
    if (patch.detachedTimeoutSec !== undefined) record.detachedTimeoutSec = patch.detachedTimeoutSec;
    if (patch.label !== undefined) record.label = patch.label;
    if (patch.tags !== undefined) record.tags = patch.tags;
    this.save();
    return undefined;
  }

  resize(cols: number, rows: number): void {
    if (!this.stored) return;
    this.stored.record.cols = cols;
    this.stored.record.rows = rows;
    this.save();
  }

  /** Whether the process has a terminal (records from before `pty: false` all do). */
  get isTty(): boolean {
    return this.stored?.record.pty !== false;
  }

  /** `pty: false`: stdin was closed by an eof. */
  get stdinClosed(): boolean {
    return this.stored?.stdinClosed === true;
  }

  closeStdin(): void {
    if (!this.stored || this.stored.stdinClosed) return;
    this.stored.stdinClosed = true;
    this.save();
  }

  /** The public Session, with the live values its owner knows (`clients`). */
  view(clients: number): Session {
    const stored = this.stored;
    if (!stored) throw new Error("no session");
    // Records stored before sandboxes were reported have no sandbox, network or limits: null.
    const { sandbox = null, network = null, limits = null } = stored.record as Partial<RecordFields>;
    return {
      ...stored.record,
      pty: stored.record.pty !== false,
      sandbox,
      network,
      limits,
      offset: this.offsetNow,
      retainedFrom: this.retainedFromNow,
      clients,
    };
  }

  exitMessage(): ServerMessage {
    const record = this.stored?.record;
    const status = record?.status;
    return {
      type: "exit",
      status: status === "lost" || status === "failed" ? status : "exited",
      exitCode: record?.exitCode ?? null,
      signal: record?.signal ?? null,
      reason: record?.reason ?? null,
      // Where output ends: every byte below it went out on this connection before this message.
      offset: this.offsetNow,
    };
  }

  /** The output log's key of this incarnation: `tenant/sessionId/incarnation`. */
  logKey(): string {
    const stored = this.stored;
    if (!stored) throw new Error("no session");
    return `${sessionKey(stored.tenant, stored.record.id)}/${stored.incarnation}`;
  }

  keyForLog(): string | null {
    return this.stored ? sessionKey(this.stored.tenant, this.stored.record.id) : null;
  }

  private save(): void {
    if (this.stored) this.storage.kv.put("session", this.stored);
  }
}

function expiresAt(timeoutSec: number, now: number): string | null {
  return timeoutSec > 0 ? new Date(now + timeoutSec * 1000).toISOString() : null;
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// ---- Shared types ----

/** The stored part of a Session: everything but the live values. */
export type RecordFields = Omit<Session, "offset" | "retainedFrom" | "clients">;

export interface Stored {
  tenant: string;
  spec: SpawnSpec;
  record: RecordFields;
  /** The runner that hosts (or hosted) the process: its in-process log is only there. */
  runnerId?: string | null;
  /**
   * This incarnation of the id: a purged id created again is a new session. Names the output
   * log (`logKey`) and is in every session token, so nothing of an earlier one reaches it.
   */
  incarnation: string;
  /** The host link's credential, given to the placed runner alone in its spawn order. */
  linkToken: string;
  /** Reader links' credential, given in serve orders. */
  readerToken: string;
  /** Why the session is being ended (DELETE or a timer), until the runner confirms the exit. */
  ending?: EndReason;
  /** What a `timeoutSec` that passes sends first (exec: SIGKILL); SIGHUP when absent. */
  timeoutSignal?: "SIGKILL";
  /** `pty: false`: stdin has been closed (eof); input after it is refused. */
  stdinClosed?: boolean;
  /** Created held: placed on a runner only when its first client connects (session-start.ts, launch). */
  lazy?: true;
}
