// The runner's drain (docs/protocol.md §6, "Drain"; §4, "Timers"). On the first SIGTERM the runner
// tells the pool to place nothing more on it and lets its live sessions go on, input, output and
// replay included, for up to RUNNER_DRAIN_SEC; sessions whose process ends meanwhile end normally.
// When the time is up, the rest are ended as DELETE ends them (SIGHUP, then SIGKILL after the
// grace) and report their exit with `reason: "drain"`; once every exit has reached the edge
// (bounded), the runner stops. A second SIGTERM, or a SIGINT, ends the sessions at once; one more
// signal after that stops without waiting for their exits to be delivered.
import { log } from "../shared/log.js";

/** A hosted session, as the drain sees it. */
export interface DrainSession {
  readonly key: string;
  /** Ends the process (SIGHUP, then SIGKILL of its processes after `graceMs`) with reason drain. */
  drain(graceMs: number): void;
}

export interface DrainPort {
  /** Sessions hosted and not yet over: their exit has not reached the edge yet. */
  sessions(): DrainSession[];
  /** Tells the pool to place nothing more here (now, and after every control reconnect). */
  announce(): void;
  /** Closes the control socket, reader links, isolation and the log; then the process exits. */
  stop(): Promise<void>;
}

export interface DrainOptions {
  /** RUNNER_DRAIN_SEC: how long live sessions may go on; 0 = end them at once. */
  drainSec: number;
  /** SIGHUP → SIGKILL grace for the sessions ended by the drain (DELETE's grace). */
  graceMs?: number;
  /** After the grace, how long their exits may take to reach the edge before the runner stops anyway. */
  deliveryMs?: number;
}

export const DRAIN_GRACE_MS = 2000;
export const DRAIN_DELIVERY_MS = 5000;

type Phase = "running" | "draining" | "ending" | "stopping";

export class Drain {
  private phase: Phase = "running";
  private timer: NodeJS.Timeout | undefined;
  private stopped: Promise<void> | undefined;

  constructor(
    private readonly port: DrainPort,
    private readonly options: DrainOptions,
  ) {}

  /** Whether a signal has come: no new sessions are taken. */
  get draining(): boolean {
    return this.phase !== "running";
  }

  /** Resolves once the drain has stopped the runner (port.stop() resolved). */
  get done(): Promise<void> | undefined {
    return this.stopped;
  }

  /** SIGTERM or SIGINT. */
  signal(signal: "SIGTERM" | "SIGINT"): void {
    switch (this.phase) {
      case "running": {
        this.phase = "draining";
        this.port.announce();
        const { drainSec } = this.options;
        const now = signal === "SIGINT" || drainSec === 0;
        log.info("runner.draining", {
          signal,
          sessions: this.port.sessions().length,
          drainSec,
          deadline: new Date(Date.now() + (now ? 0 : drainSec * 1000)).toISOString(),
        });
        if (now) return this.endSessions(signal === "SIGINT" ? "sigint" : "no_drain_time");
        this.timer = setTimeout(() => this.endSessions("deadline"), drainSec * 1000);
        return this.check();
      }
      case "draining":
        return this.endSessions(signal === "SIGINT" ? "sigint" : "second_sigterm");
      case "ending":
        return this.stop("forced");
      case "stopping":
        return;
    }
  }

  /** A hosted session is over (its exit reached the edge, or it gave up): it may be the last. */
  sessionOver(): void {
    this.check();
  }

  private endSessions(why: string): void {
    if (this.phase !== "draining") return;
    this.phase = "ending";
    this.clearTimer();
    const graceMs = this.options.graceMs ?? DRAIN_GRACE_MS;
    const left = this.port.sessions();
    log.info("runner.drain", { outcome: "ending_sessions", why, sessions: left.length });
    for (const session of left) session.drain(graceMs);
    // Their exits are reported as usual; wait for them to reach the edge, but not forever.
    this.timer = setTimeout(() => {
      log.warn("runner.drain", { outcome: "undelivered", sessions: this.port.sessions().map((s) => s.key) });
      this.stop("delivery_timeout");
    }, graceMs + (this.options.deliveryMs ?? DRAIN_DELIVERY_MS));
    this.check();
  }

  private check(): void {
    if ((this.phase === "draining" || this.phase === "ending") && this.port.sessions().length === 0) this.stop("drained");
  }

  private stop(outcome: string): void {
    if (this.phase === "stopping") return;
    this.phase = "stopping";
    this.clearTimer();
    log.info("runner.drain", { outcome });
    this.stopped = this.port.stop();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
