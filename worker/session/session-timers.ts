// A session's deadlines (docs/protocol.md §4, "Timers") and the one Durable Object alarm that
// serves them all. Owns the deadlines (stored, so they hold across restarts and hibernation) and
// the activity and attachment that the idle and detached timers measure. The alarm is set only
// while a deadline exists: a session with no timer, no missing link and no end to purge is never
// woken on a schedule.
import { log } from "../../shared/log.js";
import type { SessionTimers as TimerSettings } from "../../shared/session.js";

/**
 * - `start`: the process has not been started this long after create (the edge restarted mid-create)
 * - `timeout`, `idle`, `detached`: the session's three timers
 * - `grace`: the host link has been gone this long (its runner died)
 * - `purge`: the session ended SESSION_RETAIN_SEC ago
 */
export type DeadlineName = "start" | "timeout" | "idle" | "detached" | "grace" | "purge";

type Deadlines = Partial<Record<DeadlineName, number>>;

/** Activity is stored at most this often (an idle deadline is rechecked against it when due). */
const ACTIVITY_WRITE_MS = 1000;

export class SessionTimers {
  private deadlines: Deadlines;
  /** Last input or output (ms), as this instance saw it; `activeAt` in storage lags it by ≤ 1 s. */
  private activeAt: number;
  private storedActiveAt: number;
  private idleMs = 0;
  private detachedMs = 0;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly port: TimerPort,
  ) {
    this.deadlines = storage.kv.get<Deadlines>("deadlines") ?? {};
    this.storedActiveAt = this.activeAt = storage.kv.get<number>("activeAt") ?? 0;
  }

  /**
   * Arms the session's timers from its settings (on create and on PATCH): `timeoutSec` from
   * `expiresAt`, `idleTimeoutSec` from the last activity, `detachedTimeoutSec` from now if no
   * client is attached.
   */
  configure(settings: TimerSettings, expiresAt: string | null, now: number): void {
    const detachedMs = settings.detachedTimeoutSec * 1000;
    // A running detached countdown goes on unless its length changed (a PATCH of the label must not restart it).
    const keepDetached = this.deadlines.detached !== undefined && detachedMs === this.detachedMs;
    this.idleMs = settings.idleTimeoutSec * 1000;
    this.detachedMs = detachedMs;
    this.deadlines.timeout = expiresAt === null ? undefined : Date.parse(expiresAt);
    if (this.idleMs > 0) {
      if (this.activeAt === 0) this.noteActivity(now, true);
      this.deadlines.idle = this.activeAt + this.idleMs;
    } else {
      this.deadlines.idle = undefined;
    }
    if (this.detachedMs === 0 || this.port.clients() > 0) this.deadlines.detached = undefined;
    else if (!keepDetached) this.deadlines.detached = now + this.detachedMs;
    this.save();
  }

  /** Restores the idle and detached lengths after a wake-up (they live in the session record). */
  restore(settings: TimerSettings): void {
    this.idleMs = settings.idleTimeoutSec * 1000;
    this.detachedMs = settings.detachedTimeoutSec * 1000;
  }

  /** Input or output: pushes the idle deadline back (checked when it comes due, not rewritten now). */
  noteActivity(now: number, force = false): void {
    this.activeAt = now;
    if (this.idleMs === 0 && !force) return;
    if (now - this.storedActiveAt < ACTIVITY_WRITE_MS && !force) return;
    this.storedActiveAt = now;
    this.storage.kv.put("activeAt", now);
  }

  /** A client attached or left: the detached timer runs only while none is attached. */
  clientsChanged(count: number, now: number): void {
    if (this.detachedMs === 0) return;
    const next = count === 0 ? (this.deadlines.detached ?? now + this.detachedMs) : undefined;
    if (next === this.deadlines.detached) return;
    this.deadlines.detached = next;
    this.save();
  }

  set(name: DeadlineName, at: number | undefined): void {
    if (this.deadlines[name] === at) return;
    this.deadlines[name] = at;
    this.save();
  }

  get(name: DeadlineName): number | undefined {
    return this.deadlines[name];
  }

  /** The session ended: only the purge may still come. */
  ended(purgeAt: number | undefined): void {
    this.deadlines = purgeAt === undefined ? {} : { purge: purgeAt };
    this.idleMs = this.detachedMs = 0;
    this.save();
  }

  /** Everything goes (the session was purged). */
  clear(): void {
    this.deadlines = {};
    this.activeAt = this.storedActiveAt = 0;
  }

  /** The alarm: fires each deadline that has passed (idle is rechecked against the activity). */
  async alarm(now: number): Promise<void> {
    const due: DeadlineName[] = [];
    for (const [name, at] of Object.entries(this.deadlines) as [DeadlineName, number | undefined][]) {
      if (at === undefined || at > now) continue;
      if (name === "idle" && this.activeAt + this.idleMs > now) {
        this.deadlines.idle = this.activeAt + this.idleMs;
        continue;
      }
      if (name === "detached" && this.port.clients() > 0) {
        this.deadlines.detached = undefined;
        continue;
      }
      this.deadlines[name] = undefined;
      due.push(name);
    }
    this.save();
    if (due.length > 0) log.info("session.alarm", { key: this.port.keyForLog(), due });
    for (const name of due) await this.port.fire(name);
  }

  private save(): void {
    for (const name of Object.keys(this.deadlines) as DeadlineName[]) {
      if (this.deadlines[name] === undefined) delete this.deadlines[name];
    }
    this.storage.kv.put("deadlines", this.deadlines);
    const next = Math.min(...Object.values(this.deadlines));
    if (Number.isFinite(next)) void this.storage.setAlarm(next);
    else void this.storage.deleteAlarm();
  }
}

// ---- Shared types ----

/** What the timers need from their session; callbacks, so this part never holds the session object. */
export interface TimerPort {
  /** A deadline has passed. */
  fire(name: DeadlineName): Promise<void>;
  /** WebSocket and SSE clients attached now. */
  clients(): number;
  keyForLog(): string | null;
}
