// The sweep, one part of the tenant's alarm (alarm-plan.ts): a row with no record SWEEP_AFTER_MS
// after its create belongs to a create that never reached its session object (the Worker died
// mid-create) or to a session from before rows held records. The sweep asks the session object,
// then records it or frees the id and its quota slot. It is due SWEEP_AFTER_MS after a reserve
// finds it not yet due, and again SWEEP_AFTER_MS after a run that left rows without a record;
// that time is kept in the object's storage (`sweepAt`), so it holds across restarts.
import { log } from "../../shared/log.js";
import type { Session } from "../../shared/session.js";
import type { AlarmPart } from "./alarm-plan.js";

export const SWEEP_AFTER_MS = 60_000;
const SWEEP_BATCH = 100;

/** Where the sweep keeps its due time (the object's synchronous KV storage). */
export interface SweepClock {
  get(): number | undefined;
  put(at: number): void;
  clear(): void;
}

export interface SweepHost {
  tenant(): string | null;
  /** The session object's answer for `id`: the session, or a failure (NOT_FOUND frees the row). */
  ask(tenant: string, id: string): Promise<Session | { failure: { code: string } }>;
  record(session: Session): void;
  free(id: string): void;
}

export class TenantSweep implements AlarmPart {
  readonly name = "sweep";

  constructor(
    private readonly sql: SqlStorage,
    private readonly clock: SweepClock,
    private readonly host: SweepHost,
  ) {}

  /** A reserve added a row without a record: the sweep is due a minute on, unless it is due already. */
  reserved(now = Date.now()): void {
    if (this.clock.get() === undefined) this.clock.put(now + SWEEP_AFTER_MS);
  }

  due(now: number): number | null {
    if (!this.waiting()) {
      if (this.clock.get() !== undefined) this.clock.clear();
      return null;
    }
    let at = this.clock.get();
    if (at === undefined) {
      // Rows from before the sweep kept its time (or a lost write): a minute from now.
      at = now + SWEEP_AFTER_MS;
      this.clock.put(at);
    }
    return at;
  }

  async run(now: number): Promise<void> {
    try {
      await this.sweep(now);
    } finally {
      if (this.waiting()) this.clock.put(Date.now() + SWEEP_AFTER_MS);
      else this.clock.clear();
    }
  }

  private waiting(): boolean {
    return this.sql.exec("SELECT 1 FROM sessions WHERE record IS NULL LIMIT 1").toArray().length > 0;
  }

  private async sweep(now: number): Promise<void> {
    const tenant = this.host.tenant();
    if (!tenant) return;
    const before = new Date(now - SWEEP_AFTER_MS).toISOString();
    const rows = this.sql
      .exec<{ id: string }>("SELECT id FROM sessions WHERE record IS NULL AND created_at < ? ORDER BY seq LIMIT ?", before, SWEEP_BATCH)
      .toArray();
    for (const { id } of rows) {
      try {
        const found = await this.host.ask(tenant, id);
        if ("failure" in found) {
          if (found.failure.code === "NOT_FOUND") this.host.free(id);
        } else {
          this.host.record(found);
        }
        log.info("tenant.sweep", { tenant, id, outcome: "failure" in found ? "freed" : "recorded" });
      } catch (error) {
        log.warn("tenant.sweep", { tenant, id, outcome: "unreached", error });
      }
    }
  }
}
