// SseBody's queue as pure logic, inside workerd (its ReadableStream is workerd's): events are
// made only when read, one per read; the bound cuts with a resume id.
// The end-to-end attack it exists for is test/sse-bounds.test.ts.
import { describe, expect, it } from "vitest";
import { SseBody, type SseEvent, textEvent } from "./sse-body.js";

const decoder = new TextDecoder();

function open(maxQueued: number) {
  const calls = { pulled: 0, cut: 0, cancelled: 0 };
  const sse = new SseBody(maxQueued, {
    pulled: () => calls.pulled++,
    cut: () => calls.cut++,
    cancelled: () => calls.cancelled++,
  });
  const reader = sse.stream.getReader();
  /** One read: the bytes workerd would be handed, as text, or null at the end. */
  const next = async (): Promise<string | null> => {
    const { done, value } = await reader.read();
    return done ? null : decoder.decode(value);
  };
  return { sse, calls, reader, next };
}

/** An event that counts how often its bytes were made. */
function counted(text: string, id: string | undefined, size: number): SseEvent & { made: number } {
  const event = {
    made: 0,
    size,
    id,
    bytes: () => {
      event.made++;
      return new TextEncoder().encode(text);
    },
  };
  return event;
}

const cut = (lastEventId: string | null) =>
  `event: cut\n${lastEventId === null ? "" : `id: ${lastEventId}\n`}data: ${JSON.stringify({
    code: "SLOW_CONSUMER",
    message: "slow consumer: reconnect with Last-Event-ID",
    lastEventId,
  })}\n\n`;

describe("SseBody", () => {
  it("makes an event's bytes only when the client reads, one event per read, and counts the rest as lag", async () => {
    const { sse, calls, next } = open(1000);
    const events = [counted("id: 1\n\n", "1", 10), counted("id: 2\n\n", "2", 20), counted("id: 3\n\n", "3", 30)];
    for (const e of events) expect(sse.push(e)).toBe(true);
    expect(events.map((e) => e.made)).toEqual([0, 0, 0]);
    expect(sse.lag()).toBe(60);
    expect(await next()).toBe("id: 1\n\n");
    expect(events.map((e) => e.made)).toEqual([1, 0, 0]);
    expect(sse.lag()).toBe(50);
    expect(calls.pulled).toBe(1);
    expect(await next()).toBe("id: 2\n\n");
    expect(await next()).toBe("id: 3\n\n");
    expect(sse.lag()).toBe(0);
    // A read waiting on an empty queue gets the next event as soon as it is pushed.
    const waiting = next();
    sse.push(textEvent("id: 4\n\n", "4"));
    expect(await waiting).toBe("id: 4\n\n");
  });

  it("past the bound drops what is queued and ends with one cut naming the last id taken", async () => {
    const { sse, calls, next } = open(100);
    sse.startAt("0");
    sse.push(counted("id: 1\n\n", "1", 40));
    expect(await next()).toBe("id: 1\n\n");
    const queued = [counted("id: 2\n\n", "2", 40), counted("id: 3\n\n", "3", 40)];
    for (const e of queued) expect(sse.push(e)).toBe(true);
    expect(sse.push(textEvent("gap\n\n"))).toBe(true); // no id: the resume point stays
    expect(sse.push(counted("id: 4\n\n", "4", 40))).toBe(false);
    expect(calls.cut).toBe(1);
    expect(sse.open).toBe(false);
    expect(sse.lag()).toBe(0);
    expect(sse.push(textEvent("late\n\n"))).toBe(false);
    expect(await next()).toBe(cut("1"));
    expect(await next()).toBe(null);
    expect(queued.map((e) => e.made)).toEqual([0, 0]);
  });

  it("names where it started when nothing with an id was taken; with no start, no id at all", async () => {
    const started = open(10);
    started.sse.startAt("7");
    started.sse.push(textEvent("a".repeat(8)));
    started.sse.push(textEvent("b".repeat(8)));
    expect(await started.next()).toBe(cut("7"));
    expect(await started.next()).toBe(null);

    const unstarted = open(10);
    unstarted.sse.push(textEvent("a".repeat(8), "3"));
    unstarted.sse.push(textEvent("b".repeat(8), "4"));
    expect(await unstarted.next()).toBe(cut(null));
  });

  it("takes one event larger than the bound into an empty queue", async () => {
    const { sse, calls, next } = open(10);
    expect(sse.push(textEvent("x".repeat(50), "1"))).toBe(true);
    expect(calls.cut).toBe(0);
    expect(sse.lag()).toBe(50);
    expect(await next()).toBe("x".repeat(50));
  });

  it("ends once what is queued has been read", async () => {
    const { sse, next } = open(100);
    sse.push(textEvent("one\n\n", "1"));
    sse.push(textEvent("exit\n\n"));
    sse.end();
    expect(sse.push(textEvent("late\n\n"))).toBe(false);
    expect(await next()).toBe("one\n\n");
    expect(await next()).toBe("exit\n\n");
    expect(await next()).toBe(null);
  });

  it("queues a keep-alive comment only when nothing else is queued", async () => {
    const { sse, next } = open(100);
    sse.comment("keep-alive");
    sse.comment("keep-alive");
    expect(await next()).toBe(": keep-alive\n\n");
    sse.push(textEvent("one\n\n", "1"));
    sse.comment("keep-alive");
    expect(await next()).toBe("one\n\n");
    const waiting = next();
    sse.comment("idle");
    expect(await waiting).toBe(": idle\n\n");
  });

  it("drops everything when the client goes, and says so", async () => {
    const { sse, calls, reader } = open(100);
    sse.push(textEvent("one\n\n", "1"));
    await reader.cancel();
    expect(calls.cancelled).toBe(1);
    expect(sse.lag()).toBe(0);
    expect(sse.open).toBe(false);
    expect(sse.push(textEvent("two\n\n", "2"))).toBe(false);
  });
});
