// The sweep, one part of the tenant's alarm (alarm-plan.ts): a row with no record SWEEP_AFTER_MS
// after its create belongs to a create that never reached its session object (the Worker died
// mid-create) or to a session from before rows held records. The sweep asks the session object,
// then records it or frees the id and its quota slot. Rows it could not settle are asked again
// SWEEP_AFTER_MS later.
import { log } from "../../shared/log.js";
import type { Session } from "../../shared/session.js";
import type { AlarmPart } from "./alarm-plan.js";

export const SWEEP_AFTER_MS = 60_000;
const SWEEP_BATCH = 100;

export interface SweepHost {
  tenant(): string | null;
  /** The session object's answer for `id`: the session, or a failure (NOT_FOUND frees the row). */
  ask(tenant: string, id: string): Promise<Session | { failure: { code: string } }>;
  record(session: Session): void;
  free(id: string): void;
}

export class TenantSweep implements AlarmPart {
  readonly name = "sweep";
  /** When the sweep last ran (in memory: a restart sweeps once at the first due time). */
  private lastRun = 0;

  constructor(
    private readonly sql: SqlStorage,
    private readonly host: SweepHost,
  ) {}

  due(): number | null {
    const oldest = this.sql.exec<{ at: string | null }>("SELECT MIN(created_at) AS at FROM sessions WHERE record IS NULL").one().at;
    if (oldest === null) return null;
    return Math.max(Date.parse(oldest) + SWEEP_AFTER_MS, this.lastRun + SWEEP_AFTER_MS);
  }

  async run(now: number): Promise<void> {
    this.lastRun = now;
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
