// The tenant's alarm plan (alarm-plan.ts) with a stand-in for the object's storage that records
// every alarm call: the alarm is the earliest due part's time, deleted when none has work,
// unchanged times cost no write, a run makes every due part's work at once before it schedules
// again, and schedules that overlap end with the newest state.
import { describe, expect, it } from "vitest";
import { type AlarmPart, AlarmPlan, FAILED_PART_HOLD_MS } from "./alarm-plan.js";

class Storage {
  alarm: number | null = null;
  readonly calls: string[] = [];
  async getAlarm(): Promise<number | null> {
    return this.alarm;
  }
  async setAlarm(at: number): Promise<void> {
    this.calls.push(`set ${at}`);
    this.alarm = at;
  }
  async deleteAlarm(): Promise<void> {
    this.calls.push("delete");
    this.alarm = null;
  }
}

class Part implements AlarmPart {
  at: number | null = null;
  readonly runs: number[] = [];
  /** What a run does (its due time after it, by default none). */
  work: (now: number) => Promise<void> = async () => {
    this.at = null;
  };
  constructor(readonly name: string) {}
  due(): number | null {
    return this.at;
  }
  async run(now: number): Promise<void> {
    this.runs.push(now);
    await this.work(now);
  }
}

function plan(...parts: Part[]): { storage: Storage; plan: AlarmPlan } {
  const storage = new Storage();
  return { storage, plan: new AlarmPlan(storage as unknown as DurableObjectStorage, parts, () => "t") };
}

describe("the alarm plan", () => {
  it("sets the alarm to the earliest due time, writes nothing when it is unchanged, and deletes it when nothing is due", async () => {
    const sweep = new Part("sweep");
    const hooks = new Part("webhooks");
    const { storage, plan: p } = plan(sweep, hooks);
    await p.schedule();
    expect(storage.calls).toEqual([]);
    sweep.at = 60_000;
    await p.schedule();
    hooks.at = 500;
    await p.schedule();
    await p.schedule();
    // The sweep's later time never pushes the earlier retry away, whichever moved last.
    sweep.at = 61_000;
    await p.schedule();
    expect(storage.alarm).toBe(500);
    hooks.at = null;
    await p.schedule();
    sweep.at = null;
    await p.schedule();
    expect(storage.calls).toEqual(["set 60000", "set 500", "set 61000", "delete"]);
  });

  it("a run makes every due part's work at once, then schedules what is left; a part not due does not run", async () => {
    const sweep = new Part("sweep");
    const hooks = new Part("webhooks");
    const { storage } = plan(sweep, hooks);
    const now = Date.now();
    sweep.at = now + 60_000;
    hooks.at = now - 1;
    let inFlight = 0;
    let most = 0;
    const other = new Part("other");
    other.at = now - 1;
    const slow = async () => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 10));
      inFlight--;
    };
    hooks.work = async () => {
      await slow();
      hooks.at = now + 500; // a retry
    };
    other.work = async () => {
      await slow();
      other.at = null;
    };
    const both = new AlarmPlan(storage as unknown as DurableObjectStorage, [sweep, hooks, other], () => "t");
    // While the run is under way, a schedule (a reserve, an event) waits for it.
    const running = both.run();
    await both.schedule();
    expect(storage.calls).toEqual([]);
    await running;
    expect(most).toBe(2);
    expect(sweep.runs).toEqual([]);
    expect(hooks.runs).toHaveLength(1);
    expect(storage.calls).toEqual([`set ${now + 500}`]);
  });

  it("a part that fails is held off FAILED_PART_HOLD_MS (no alarm loop), and the others still schedule", async () => {
    const broken = new Part("broken");
    const hooks = new Part("webhooks");
    const now = Date.now();
    broken.at = now - 1;
    broken.work = async () => {
      throw new Error("boom");
    };
    hooks.at = now - 1;
    hooks.work = async () => {
      hooks.at = now + 1000;
    };
    const { storage, plan: p } = plan(broken, hooks);
    await p.run();
    expect(storage.alarm).toBe(now + 1000);
    hooks.at = null;
    await p.schedule();
    // Still due, but held: the alarm is not set in the past again.
    expect(storage.alarm).toBeGreaterThanOrEqual(now + FAILED_PART_HOLD_MS);
    expect(broken.runs).toHaveLength(1);
  });
});
