// The Tenant object's one alarm, shared by its parts (docs/architecture.md, "The tenant's alarm"):
// each part says when it next has work (the sweep, webhook deliveries), the alarm is set to the
// earliest of them and deleted when none has any. A part whose due time moves calls `schedule`;
// the alarm runs every part that is due, then schedules again. No part sets the alarm itself,
// so none can push another's earlier time away.
import { log } from "../../shared/log.js";

/** A part whose run threw is not run again before this long (no alarm loop on a lasting fault). */
export const FAILED_PART_HOLD_MS = 30_000;

export interface AlarmPart {
  /** For logs. */
  name: string;
  /** When this part next has work (ms since the epoch), or null for none. */
  due(now: number): number | null;
  /** Does the work that is due at `now`; records its results before it resolves. */
  run(now: number): Promise<void>;
}

export class AlarmPlan {
  /** What the alarm was last set to by this plan (null: none), so an unchanged plan costs no write. */
  private set: number | null | undefined = undefined;
  private running = false;
  /** Parts whose last run threw, and when they may run again. */
  private readonly held = new Map<AlarmPart, number>();

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly parts: readonly AlarmPart[],
    private readonly tenant: () => string | null,
  ) {}

  /** The earliest due time of every part, or null. */
  next(now = Date.now()): number | null {
    let next: number | null = null;
    for (const part of this.parts) {
      const due = this.dueOf(part, now);
      if (due !== null && (next === null || due < next)) next = due;
    }
    return next;
  }

  private dueOf(part: AlarmPart, now: number): number | null {
    const due = part.due(now);
    const held = this.held.get(part);
    return due === null || held === undefined ? due : Math.max(due, held);
  }

  /**
   * Sets the alarm to the earliest due time (deletes it when nothing is due). The time is
   * computed and recorded with no await before the storage call, so calls that overlap reach
   * storage in the order they computed: the last one written saw the newest state.
   */
  async schedule(): Promise<void> {
    // While the alarm runs, it schedules once it is done (with every result recorded).
    if (this.running) return;
    if (this.set === undefined) {
      const current = await this.storage.getAlarm();
      this.set ??= current;
      if (this.running) return;
    }
    const next = this.next();
    if (next === this.set) return;
    this.set = next;
    if (next === null) await this.storage.deleteAlarm();
    else await this.storage.setAlarm(next);
    log.info("tenant.alarm", { tenant: this.tenant(), next: next === null ? null : new Date(next).toISOString() });
  }

  /** The alarm fired: every part that is due runs (at once, each with its own deadlines), then the next one is set. */
  async run(): Promise<void> {
    this.running = true;
    // The alarm that fired is gone: the plan sets the next one.
    this.set = null;
    try {
      const now = Date.now();
      const due = this.parts.filter((part) => {
        const at = this.dueOf(part, now);
        return at !== null && at <= now;
      });
      await Promise.all(
        due.map(async (part) => {
          try {
            await part.run(now);
            this.held.delete(part);
          } catch (error) {
            this.held.set(part, Date.now() + FAILED_PART_HOLD_MS);
            log.warn("tenant.alarm", { tenant: this.tenant(), part: part.name, outcome: "failed", error });
          }
        }),
      );
    } finally {
      this.running = false;
    }
    await this.schedule();
  }
}
