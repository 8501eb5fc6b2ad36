// The start of a session (docs/protocol.md §4): create stores the record, places the session on
// a runner through the pool and waits, at most START_TIMEOUT_MS, for the runner to say the
// process started; then one decision (late, or failed). A create asked `lazy` is held instead:
// `starting` on no runner until its first client connects (launch). Owns the create's wait for the start;
// the session object wires it with the record, the timers and a StartPort.
import { type Failure, fail, isFailure } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { RunnerLinkMessage } from "../../shared/protocol.js";
import type { EndReason, Session, SessionStatus, TenantEventType } from "../../shared/session.js";
import type { CreateRequest, PoolRpc } from "../rpc.js";
import type { RecordFields, SessionRecord } from "./session-record.js";
import type { SessionTimers } from "./session-timers.js";
import { settleWithin } from "./settle.js";

type StartOutcome = "started" | "failed" | "timeout";

export class SessionStart {
  /** The create waiting to hear whether the process started. */
  private startWaiter: ((outcome: StartOutcome) => void) | undefined;
  /** A held session's placement, while under way (launch). */
  private launching: Promise<void> | undefined;

  constructor(
    private readonly record: SessionRecord,
    private readonly timers: SessionTimers,
    private readonly port: StartPort,
  ) {}

  async create(request: CreateRequest): Promise<Session | Failure> {
    if (this.record.current) return fail("CONFLICT", `session ${request.id} already exists`);
    const now = Date.now();
    const stored = this.record.begin(request, now);
    if (request.captureBytes !== undefined) this.port.capture(request.captureBytes);
    this.timers.configure(request.timers, stored.record.expiresAt, now);
    if (request.lazy) {
      // Held (`lazy`): `starting`, placed on no runner until its first client connects (launch).
      this.port.report("session.created");
      return this.port.view();
    }
    const started = this.untilStarted();
    // `created` goes out only once placed; a create that fails leaves no event behind.
    const release = this.port.holdReports();
    this.port.report("session.created");
    const placed = await this.place(now);
    if (isFailure(placed)) {
      release(false);
      this.startWaiter?.("failed");
      await this.port.forget();
      return placed;
    }
    release(true);
    if ((await started) === "timeout") this.startLate();
    return this.port.view();
  }

  /**
   * A held session (created `lazy`) that no runner has been asked to start yet: its start
   * deadline, stored before the pool is asked, says a launch began (also one cut by a restart).
   */
  get held(): boolean {
    const stored = this.record.current;
    return stored?.lazy === true && stored.record.status === "starting" && this.timers.get("start") === undefined && !this.launching;
  }

  /** A client that connects now waits for launch: the session is held, or its launch is under way. */
  get launches(): boolean {
    return this.launching !== undefined || this.held;
  }

  /**
   * A client connects: a held session is placed now, as create places any other, and this
   * resolves once the process has started (or failed, or is late), as create answers. Clients
   * that connect meanwhile wait for the same launch; for any other session it resolves at once.
   */
  launch(): Promise<void> {
    if (this.launching) return this.launching;
    if (!this.held) return Promise.resolve();
    this.launching = this.placeHeld().finally(() => {
      this.launching = undefined;
    });
    return this.launching;
  }

  private async placeHeld(): Promise<void> {
    const started = this.untilStarted();
    const placed = await this.place(Date.now());
    if (isFailure(placed)) {
      this.startWaiter?.("failed");
      await this.port.move("failed", { error: placed.failure.message, reason: "failed" });
    } else if ((await started) === "timeout") this.startLate();
  }

  /** A held session ended before any client connected (DELETE, a timer): no process to wait for. */
  async endHeld(reason: EndReason): Promise<void> {
    if (this.held) await this.port.move("exited", { reason });
  }

  /** Resolves when the host says the process started or failed, or after START_TIMEOUT_MS. */
  private untilStarted(): Promise<StartOutcome> {
    return settleWithin<StartOutcome>(this.port.startTimeoutMs(), "timeout", (resolve) => {
      this.startWaiter = resolve;
    });
  }

  /** Sets the start deadline and asks the pool to place the session on a runner. */
  private async place(now: number): Promise<{ runnerId: string } | Failure> {
    const stored = this.record.current;
    if (!stored) return fail("NOT_FOUND", "session not found");
    // Should this object restart before the runner's link comes, the session fails then.
    this.timers.set("start", now + this.port.startTimeoutMs());
    const placed = await this.port.pool().place({
      type: "spawn",
      key: this.record.logKey(),
      tenant: stored.tenant,
      sessionId: stored.record.id,
      spec: stored.spec,
      linkToken: stored.linkToken,
    });
    if (isFailure(placed)) return placed;
    log.info("session.placed", { key: this.record.keyForLog(), runnerId: placed.runnerId });
    this.record.placed(placed.runnerId);
    return placed;
  }

  /**
   * The host said the process started, and how it contained it: the sandbox, network and
   * limits it applied replace what was asked (a runner that does not say leaves them as asked).
   */
  async started(msg: Extract<RunnerLinkMessage, { type: "started" }>): Promise<void> {
    this.timers.set("start", undefined);
    const { pid, sandbox, network, limits } = msg;
    await this.port.move("running", {
      pid,
      ...(sandbox ? { sandbox } : {}),
      ...(network ? { network } : {}),
      ...(limits ? { limits } : {}),
    });
    this.startWaiter?.("started");
  }

  /** The host said the process could not be started. */
  async failed(error: string): Promise<void> {
    await this.port.move("failed", { error, reason: "failed" });
    this.startWaiter?.("failed");
  }

  /** The host link closed before the process started. */
  async linkLost(): Promise<void> {
    this.startWaiter?.("failed");
    await this.port.move("lost", { error: "the runner's link closed before the process started", reason: "runner_lost" });
  }

  /** The start deadline passed (this object restarted mid-create): no link yet, the session fails. */
  async due(): Promise<void> {
    const status = this.record.current?.record.status;
    if (!status) return;
    if (status === "starting" && !this.port.hasHost()) {
      await this.port.move("failed", { error: "the runner did not open the session's link in time", reason: "failed" });
    }
  }

  /**
   * The process has not said it started in time. One decision: if the runner's link has
   * opened, the runner has been told to start it and the session stays `starting` until it
   * says so (late); if not, the session fails now and the link, should it come, is refused,
   * so the runner never starts the process.
   */
  private startLate(): void {
    if (this.record.current?.record.status !== "starting") return;
    if (this.port.hasHost()) {
      log.warn("session.start", { key: this.record.keyForLog(), outcome: "late" });
      return;
    }
    void this.port.move("failed", { error: "the runner did not open the session's link in time", reason: "failed" });
  }
}

// ---- Shared types ----

/** What the start needs from its session; callbacks, so it never holds the session object. */
export interface StartPort {
  /** The host link is open. */
  hasHost(): boolean;
  /** Moves the status forward (pty-session.ts). */
  move(status: SessionStatus, patch: Partial<RecordFields>): Promise<void>;
  view(): Session;
  pool(): DurableObjectStub<PoolRpc>;
  /** exec: keep the first `bytes` of output in memory (output-capture.ts). */
  capture(bytes: number): void;
  startTimeoutMs(): number;
  /** Holds the tenant reports that follow until released (tenant-reports.ts). */
  holdReports(): (keep: boolean) => void;
  /** Tells the tenant how the session is now, with `event` (tenant-reports.ts). */
  report(event: TenantEventType): void;
  /** Memory and storage forget the session (a create that was not placed). */
  forget(): Promise<void>;
}
