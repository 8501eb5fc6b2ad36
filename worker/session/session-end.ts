// The end of a session (docs/protocol.md §4), whatever brings it: the process exits, DELETE or
// a timer ends it (SIGHUP, SIGKILL after the grace, `lost` if the runner never confirms), or its
// runner is gone (the host link closed or went silent, and did not come back within the grace).
// What an end sets off (clients told, the host link closed, waiters answered, the purge due),
// and the purge of what the session stored once it is retained no longer (SESSION_RETAIN_SEC),
// tried again while no runner can drop the log or the tenant cannot take the news. Owns who
// waits for the end and how often the purge has been tried; the session object wires it with
// the record, the timers and an EndPort.
import { CloseCode, type Failure, fail, isFailure } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { EdgeLinkMessage, RunnerLinkMessage } from "../../shared/protocol.js";
import { type EndReason, KILL_GRACE_MS, type Session, type SessionStatus, isTerminal } from "../../shared/session.js";
import { closeQuietly } from "../io/sockets.js";
import type { Limits } from "../env.js";
import type { PoolRpc } from "../rpc.js";
import type { RecordFields, SessionRecord } from "./session-record.js";
import type { DeadlineName, SessionTimers } from "./session-timers.js";
import { settleWithin } from "./settle.js";

/** A retention purge that could not reach a runner or the tenant tries again this much later, this many times. */
const PURGE_RETRY_MS = 60_000;
const PURGE_TRIES = 10;

/** A host link silent (no heartbeat, no frame) this long is taken for dead when its runner's control socket is too. */
const HEARTBEAT_TIMEOUT_MS = 30_000;

export class SessionEnd {
  /** Callers waiting for the session to end (`wait`, DELETE). */
  private readonly exitWaiters = new Set<() => void>();

  constructor(
    private readonly ctx: DurableObjectState,
    private readonly record: SessionRecord,
    private readonly timers: SessionTimers,
    private readonly port: EndPort,
  ) {
    // A session that ended before retention existed gets its purge when it is next woken.
    const stored = record.current;
    if (stored?.record.exitedAt && record.ended && timers.get("purge") === undefined) {
      timers.set("purge", Date.parse(stored.record.exitedAt) + port.limits().retainSec * 1000);
    }
  }

  /**
   * DELETE (and a timer that fires): SIGHUP, SIGKILL after the grace, answered once the process
   * is gone; `reason` says why. With `purge`, the record and the log go too.
   */
  async terminate(purge: boolean, reason: EndReason): Promise<Session | Failure> {
    if (!this.record.current) return notFound();
    if (!this.record.ended) {
      const why = this.record.ending(reason);
      if (this.port.hasHost()) {
        // exec's timeout kills at once; everything else gets SIGHUP and a grace.
        const signal = reason === "timeout" ? this.record.current?.timeoutSignal : undefined;
        this.port.send(signal ? { type: "kill", graceMs: 0, signal } : { type: "kill", graceMs: KILL_GRACE_MS });
        await this.untilExit(KILL_GRACE_MS + 5000);
      }
      if (!this.record.ended) {
        await this.port.move("lost", { error: "the runner did not confirm the process ended", reason: why });
      }
    }
    const session = this.port.view();
    if (purge) await this.purge();
    return session;
  }

  /** `GET .../wait`: the session once it has ended, or as it is after `timeoutMs`. */
  async wait(timeoutMs: number): Promise<Session | Failure> {
    if (!this.record.current) return notFound();
    if (!this.record.ended) await this.untilExit(timeoutMs);
    return this.port.view();
  }

  /** The host said the process exited. */
  async processExited(msg: Extract<RunnerLinkMessage, { type: "exited" }>): Promise<void> {
    const reason = msg.reason ?? this.record.current?.ending ?? "exit";
    await this.port.move("exited", { exitCode: msg.exitCode, signal: msg.signal, reason });
  }

  /** The session has just moved to a terminal status (at `now`): what that sets off. */
  ended(now: number): void {
    // Subscribers still replaying get `exit` once they catch up.
    this.port.tellClients();
    this.port.closeHost();
    for (const resolve of this.exitWaiters) resolve();
    this.exitWaiters.clear();
    // Only the purge is left to wait for, SESSION_RETAIN_SEC from now.
    this.timers.ended(now + this.port.limits().retainSec * 1000);
    // Reads that waited for the host now need a reader.
    this.port.readsNeedReader();
  }

  /** The host link is gone (and no other is open): the session waits LINK_GRACE_MS for it. */
  async hostGone(code: number): Promise<void> {
    const status = this.record.current?.record.status;
    if (!status || isTerminal(status)) return;
    log.warn("link.closed", { key: this.record.keyForLog(), code });
    if (status === "starting") return this.port.lostWhileStarting();
    if (this.timers.get("grace") === undefined) this.timers.set("grace", Date.now() + this.port.limits().linkGraceMs);
  }

  /**
   * The pool found this session's runner silent (its control socket): if the host link is
   * silent too, it is taken for gone and the grace starts. The object is woken for this only
   * when a runner goes quiet, never on a schedule.
   */
  async runnerSilent(): Promise<void> {
    if (!this.record.current || this.record.ended) return;
    const silent = this.port.hostSilentFor(Date.now(), HEARTBEAT_TIMEOUT_MS);
    if (!silent || silent === "none") return;
    log.warn("link.heartbeat", { key: this.record.keyForLog(), outcome: "silent", silentMs: silent.silentMs });
    closeQuietly(silent.link, 1001, "heartbeat timeout");
    await this.hostGone(1001);
  }

  /** A deadline that ends the session or purges it has passed (session-timers.ts). */
  async due(name: Exclude<DeadlineName, "start">): Promise<void> {
    const status = this.record.current?.record.status;
    if (!status) return;
    switch (name) {
      case "purge":
        if (isTerminal(status)) await this.purge(true);
        return;
      case "grace":
        if (!isTerminal(status) && !this.port.hasHost()) {
          await this.port.move("lost", {
            error: "the runner's link was gone for longer than the grace period",
            reason: "runner_lost",
          });
        }
        return;
      case "timeout":
      case "idle":
      case "detached":
        if (!isTerminal(status)) await this.terminate(false, name === "timeout" ? "timeout" : name);
        return;
    }
  }

  /**
   * Everything the session stored goes: record, object storage, index entry and log. The
   * retention purge is `patient`: while no runner can drop the log or the tenant cannot take
   * the news, it tries again later (PURGE_RETRY_MS, PURGE_TRIES times) rather than leave a log
   * or an index row behind; DELETE ?purge=true goes ahead at once.
   */
  async purge(patient = false): Promise<void> {
    const stored = this.record.current;
    if (!stored) return;
    const key = this.record.logKey();
    const tries = (this.ctx.storage.kv.get<number>("purgeTries") ?? 0) + 1;
    const later = patient && tries < PURGE_TRIES;
    const sent = await this.port.pool().dispatch({ type: "purge", key }, stored.tenant, stored.runnerId ?? null);
    if (isFailure(sent)) {
      log.warn("session.purge", { key, outcome: later ? "retry" : "log_kept", tries, reason: sent.failure.message });
      if (later) return this.purgeLater(tries);
    }
    const session = this.port.view();
    if (!(await this.port.reportDeleted(session)) && later) return this.purgeLater(tries);
    this.port.closeClients();
    for (const ws of this.ctx.getWebSockets()) closeQuietly(ws, CloseCode.SessionEnded, "session purged");
    await this.forget();
    log.info("session.purged", { key });
  }

  /** Memory and storage both forget the session (purged, or never placed). */
  async forget(): Promise<void> {
    this.record.discard();
    this.port.forgetMemory();
    this.timers.clear();
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
  }

  private purgeLater(tries: number): void {
    this.ctx.storage.kv.put("purgeTries", tries);
    this.timers.set("purge", Date.now() + PURGE_RETRY_MS);
  }

  private untilExit(timeoutMs: number): Promise<void> {
    let waiter: (() => void) | undefined;
    return settleWithin<void>(timeoutMs, undefined, (resolve) => {
      waiter = resolve;
      this.exitWaiters.add(resolve);
    }).finally(() => {
      if (waiter) this.exitWaiters.delete(waiter);
    });
  }
}

function notFound(): Failure {
  return fail("NOT_FOUND", "session not found");
}

// ---- Shared types ----

/** What the end needs from its session; callbacks, so it never holds the session object. */
export interface EndPort {
  limits(): Limits;
  /** The host link is open. */
  hasHost(): boolean;
  /** How long the host link has been silent (link/runner-links.ts `silentFor`). */
  hostSilentFor(now: number, limitMs: number): { link: WebSocket; silentMs: number } | null | "none";
  /** A message to the host link (the kill). */
  send(message: EdgeLinkMessage): void;
  /** The session ended: its host links close (the runner confirms the exit by that). */
  closeHost(): void;
  /** The session ended: live clients get `exit` now, replaying ones once they catch up. */
  tellClients(): void;
  /** The session ended: log reads that waited for the host link ask for a reader instead. */
  readsNeedReader(): void;
  /** The host link closed before the process started (session-start.ts). */
  lostWhileStarting(): Promise<void>;
  /** Moves the status forward (pty-session.ts). */
  move(status: SessionStatus, patch: Partial<RecordFields>): Promise<void>;
  view(): Session;
  pool(): DurableObjectStub<PoolRpc>;
  /** The tenant is told of the purge; resolves with whether it took it (tenant-reports.ts). */
  reportDeleted(session: Session): Promise<boolean>;
  /** The session was purged: every client goes. */
  closeClients(): void;
  /** What other parts keep of the session in memory goes (the storage is being deleted). */
  forgetMemory(): void;
}
