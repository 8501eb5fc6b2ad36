// Reports of the tenant bound's trims to the edge for sessions this runner does not host (they
// ended, or live on another runner): `POST /internal/sessions/:tenant/:id/retained` with the
// incarnation and where its log now starts, so the session's `retainedFrom` is true before any
// read meets the gap (docs/protocol.md §7a). A hosted session says it on its own link instead.
// Reports are coalesced per session (the newest start wins) and sent at most once a second; one
// that fails is dropped: the session still learns the start from the next read that meets it.
import { log } from "../../shared/log.js";
import type { RunnerConfig } from "../config.js";
import { retainedPath } from "./link-url.js";

/** How often pending reports go out. */
const FLUSH_MS = 1000;
/** Sessions with a report waiting, at most; more are dropped (and logged) until the next flush. */
const MAX_PENDING = 10_000;
/** Reports in flight at once, so a burst never opens thousands of requests. */
const MAX_IN_FLIGHT = 8;
/** A report the edge has not answered in this long is given up. */
const REQUEST_TIMEOUT_MS = 10_000;

export class TrimReports {
  /** Log key (`tenant/sessionId/incarnation`) → the newest start to report. */
  private readonly pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly aborts = new Set<AbortController>();
  private dropped = 0;
  private closed = false;

  constructor(private readonly config: Pick<RunnerConfig, "brokerUrl" | "runnerToken" | "runnerId">) {}

  /** The log of `key` now starts at `from`. */
  report(key: string, from: number): void {
    if (this.closed) return;
    const known = this.pending.get(key);
    if (known === undefined && this.pending.size >= MAX_PENDING) {
      this.dropped++;
      return;
    }
    this.pending.set(key, Math.max(known ?? 0, from));
    this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Stops: nothing more is sent, and requests in flight are aborted. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
    for (const abort of this.aborts) abort.abort();
  }

  private async flush(): Promise<void> {
    const batch = [...this.pending];
    this.pending.clear();
    if (this.dropped > 0) log.warn("log.trim_report", { outcome: "dropped", sessions: this.dropped });
    this.dropped = 0;
    for (let i = 0; i < batch.length && !this.closed; i += MAX_IN_FLIGHT) {
      await Promise.all(batch.slice(i, i + MAX_IN_FLIGHT).map(([key, from]) => this.send(key, from)));
    }
    this.timer = undefined;
    if (this.pending.size > 0 && !this.closed) this.timer = setTimeout(() => void this.flush(), FLUSH_MS);
  }

  private async send(key: string, from: number): Promise<void> {
    const [tenant, sessionId, incarnation] = key.split("/");
    if (!tenant || !sessionId || !incarnation) return log.warn("log.trim_report", { key, outcome: "bad_key" });
    const abort = new AbortController();
    this.aborts.add(abort);
    const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
    try {
      const res = await fetch(new URL(retainedPath(tenant, sessionId), `${this.config.brokerUrl}/`), {
        method: "POST",
        headers: {
          authorization: `Bearer ${this.config.runnerToken}`,
          "x-runner-id": this.config.runnerId,
          "content-type": "application/json",
        },
        body: JSON.stringify({ incarnation, from }),
        signal: abort.signal,
      });
      // 404: the session was purged meanwhile, nothing to tell.
      if (res.status !== 204 && res.status !== 404) log.warn("log.trim_report", { key, outcome: "refused", status: res.status });
      await res.body?.cancel();
    } catch (error) {
      if (!this.closed) log.warn("log.trim_report", { key, outcome: "failed", error });
    } finally {
      clearTimeout(timer);
      this.aborts.delete(abort);
    }
  }
}
