// The drain's pure logic: which signal ends what, and when the runner stops. Sessions here are
// stand-ins that record what the drain asked of them; the real drain (a runner SIGTERMed while a
// bash session runs, through the edge) is test/drain.test.ts.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DRAIN_DELIVERY_MS, DRAIN_GRACE_MS, Drain, type DrainSession } from "./drain.js";

class Stage {
  readonly live = new Set<DrainSession>();
  readonly drained: [string, number][] = [];
  announced = 0;
  stops = 0;
  readonly drain: Drain;

  constructor(drainSec: number, keys: string[]) {
    for (const key of keys) this.add(key);
    this.drain = new Drain(
      {
        sessions: () => [...this.live],
        announce: () => void this.announced++,
        stop: async () => void this.stops++,
      },
      { drainSec },
    );
  }

  add(key: string): void {
    this.live.add({ key, drain: (graceMs) => void this.drained.push([key, graceMs]) });
  }

  /** A session's exit reached the edge. */
  over(key: string): void {
    for (const session of this.live) if (session.key === key) this.live.delete(session);
    this.drain.sessionOver();
  }
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.spyOn(console, "log").mockImplementation(() => {});
  vi.spyOn(console, "warn").mockImplementation(() => {});
  vi.spyOn(console, "error").mockImplementation(() => {});
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("Drain", () => {
  it("first SIGTERM: announces at once, lets sessions go on until RUNNER_DRAIN_SEC, then ends the rest and stops once their exits are delivered", () => {
    const stage = new Stage(300, ["a", "b", "c"]);
    expect(stage.drain.draining).toBe(false);
    stage.drain.signal("SIGTERM");
    expect(stage.drain.draining).toBe(true);
    expect(stage.announced).toBe(1);
    vi.advanceTimersByTime(299_999);
    expect(stage.drained).toEqual([]);
    // One ends by itself meanwhile: it is not ended by the drain.
    stage.over("b");
    expect(stage.stops).toBe(0);
    vi.advanceTimersByTime(1);
    expect(stage.drained).toEqual([
      ["a", DRAIN_GRACE_MS],
      ["c", DRAIN_GRACE_MS],
    ]);
    expect(stage.stops).toBe(0);
    stage.over("a");
    expect(stage.stops).toBe(0);
    stage.over("c");
    expect(stage.stops).toBe(1);
    // Nothing more happens afterwards.
    vi.runAllTimers();
    stage.drain.signal("SIGTERM");
    expect(stage.stops).toBe(1);
    expect(stage.announced).toBe(1);
  });

  it("stops as soon as the last session ends by itself, before the deadline", () => {
    const stage = new Stage(300, ["a"]);
    stage.drain.signal("SIGTERM");
    stage.over("a");
    expect(stage.stops).toBe(1);
    expect(stage.drained).toEqual([]);
  });

  it("stops at once when nothing is hosted", () => {
    const stage = new Stage(300, []);
    stage.drain.signal("SIGTERM");
    expect(stage.announced).toBe(1);
    expect(stage.stops).toBe(1);
  });

  it.each([
    ["a second SIGTERM", "SIGTERM"],
    ["a SIGINT", "SIGINT"],
  ] as const)("%s skips the wait", (_, second) => {
    const stage = new Stage(300, ["a", "b"]);
    stage.drain.signal("SIGTERM");
    expect(stage.drained).toEqual([]);
    stage.drain.signal(second);
    expect(stage.drained.map(([key]) => key)).toEqual(["a", "b"]);
    expect(stage.stops).toBe(0);
    stage.over("a");
    stage.over("b");
    expect(stage.stops).toBe(1);
  });

  it.each([
    ["a first SIGINT", 300, "SIGINT"],
    ["RUNNER_DRAIN_SEC=0", 0, "SIGTERM"],
  ] as const)("%s ends the sessions at once, announced all the same", (_, drainSec, signal) => {
    const stage = new Stage(drainSec, ["a"]);
    stage.drain.signal(signal);
    expect(stage.announced).toBe(1);
    expect(stage.drained).toEqual([["a", DRAIN_GRACE_MS]]);
    stage.over("a");
    expect(stage.stops).toBe(1);
  });

  it("waits for undelivered exits only for the grace and the delivery bound; one more signal stops at once", () => {
    const stage = new Stage(0, ["a"]);
    stage.drain.signal("SIGTERM");
    vi.advanceTimersByTime(DRAIN_GRACE_MS + DRAIN_DELIVERY_MS - 1);
    expect(stage.stops).toBe(0);
    vi.advanceTimersByTime(1);
    expect(stage.stops).toBe(1);

    const forced = new Stage(0, ["a"]);
    forced.drain.signal("SIGTERM");
    forced.drain.signal("SIGTERM");
    expect(forced.stops).toBe(1);
    vi.runAllTimers();
    expect(forced.stops).toBe(1);
  });
});
