import { describe, expect, it } from "vitest";
import { InOrder } from "./in-order.js";

/** A promise and its resolver, to decide when a later step becomes known. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("InOrder", () => {
  it("runs a step at once when nothing waits", () => {
    const ran: string[] = [];
    const steps = new InOrder();
    steps.now(() => ran.push("a"));
    expect(ran).toEqual(["a"]);
    expect(steps.size).toBe(0);
  });

  it("runs steps in the order queued, whichever later step is known first", async () => {
    const ran: string[] = [];
    const steps = new InOrder();
    const first = deferred<(() => void) | undefined>();
    const second = deferred<(() => void) | undefined>();
    steps.later(first.promise);
    steps.now(() => ran.push("after first"));
    steps.later(second.promise);
    steps.now(() => ran.push("after second"));
    expect(steps.size).toBe(4);
    second.resolve(() => ran.push("second"));
    await second.promise;
    await Promise.resolve();
    expect(ran).toEqual([]);
    first.resolve(() => ran.push("first"));
    await first.promise;
    await Promise.resolve();
    expect(ran).toEqual(["first", "after first", "second", "after second"]);
    expect(steps.size).toBe(0);
  });

  it("skips a later step that turns out to be nothing, and runs what waited behind it", async () => {
    const ran: string[] = [];
    const steps = new InOrder();
    const nothing = deferred<(() => void) | undefined>();
    steps.later(nothing.promise);
    steps.now(() => ran.push("behind"));
    nothing.resolve(undefined);
    await nothing.promise;
    await Promise.resolve();
    expect(ran).toEqual(["behind"]);
  });

  it("keeps the order when a step queues another while the queue drains", async () => {
    const ran: string[] = [];
    const steps = new InOrder();
    const head = deferred<(() => void) | undefined>();
    steps.later(head.promise);
    steps.now(() => ran.push("second"));
    head.resolve(() => {
      ran.push("first");
      steps.now(() => ran.push("queued by first"));
    });
    await head.promise;
    await Promise.resolve();
    expect(ran).toEqual(["first", "second", "queued by first"]);
  });

  it("calls whenDrained at once when empty, else after the last waiting step", async () => {
    const ran: string[] = [];
    const steps = new InOrder();
    steps.whenDrained(() => ran.push("drained 1"));
    const head = deferred<(() => void) | undefined>();
    steps.later(head.promise);
    steps.now(() => ran.push("b"));
    steps.whenDrained(() => ran.push("drained 2"));
    expect(ran).toEqual(["drained 1"]);
    head.resolve(() => ran.push("a"));
    await head.promise;
    await Promise.resolve();
    expect(ran).toEqual(["drained 1", "a", "b", "drained 2"]);
  });
});
