// Acknowledged delivery as pure logic: a fake log whose appends the test settles by hand and a
// fake link. The real path (node-pty, Redis, the edge) is covered by the e2e suites.
import { describe, expect, it, vi } from "vitest";
import { decodeFrame } from "../../shared/protocol.js";
import { Delivery, type DeliveryOptions, type DeliveryPort } from "./delivery.js";

function setup(options: DeliveryOptions = { highWater: 100, lowWater: 40 }) {
  const appends: { offset: number; resolve: () => void; reject: (e: Error) => void }[] = [];
  const sent: (string | { offset: number; text: string })[] = [];
  const events: string[] = [];
  let linkOpen = true;
  const port: DeliveryPort = {
    append: (offset) =>
      new Promise<void>((resolve, reject) => {
        appends.push({ offset, resolve, reject });
      }),
    send: (frame) => {
      if (!linkOpen) return false;
      if (typeof frame === "string") sent.push(frame);
      else {
        const decoded = decodeFrame(frame);
        if (decoded.op !== "output") throw new Error("not an output frame");
        sent.push({ offset: decoded.offset, text: Buffer.from(decoded.data).toString() });
      }
      return true;
    },
    pause: () => events.push("pause"),
    resume: () => events.push("resume"),
    onAppendFailed: () => events.push("append-failed"),
  };
  const delivery = new Delivery(port, options);
  const settle = async () => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return {
    delivery,
    appends,
    sent,
    events,
    settle,
    setLink: (open: boolean) => {
      linkOpen = open;
    },
  };
}

const bytes = (text: string) => Buffer.from(text);

describe("Delivery", () => {
  it("sends each chunk only once its append has settled, in offset order", async () => {
    const t = setup();
    t.delivery.resume(0);
    t.delivery.push(0, bytes("aaa"));
    t.delivery.push(3, bytes("bb"));
    expect(t.sent).toEqual([]);
    t.appends[1].resolve(); // the later append answers first
    await t.settle();
    expect(t.sent).toEqual([]);
    t.appends[0].resolve();
    await t.settle();
    expect(t.sent).toEqual([
      { offset: 0, text: "aaa" },
      { offset: 3, text: "bb" },
    ]);
  });

  it("never sends a chunk the log refused: it appends it again, in order, once the log answers", async () => {
    vi.useFakeTimers();
    try {
      const t = setup({ highWater: 100, lowWater: 40, retryMs: 100 });
      t.delivery.resume(0);
      t.delivery.push(0, bytes("x"));
      t.delivery.push(1, bytes("yz"));
      t.appends[0].reject(new Error("redis down"));
      t.appends[1].resolve(); // a later append may land while an earlier one failed
      await t.settle();
      t.delivery.push(3, bytes("w")); // the log is down: not appended until the retry
      await t.settle();
      expect(t.sent).toEqual([]);
      expect(t.events).toEqual(["append-failed"]);
      expect(t.appends.map((a) => a.offset)).toEqual([0, 1]);
      await vi.advanceTimersByTimeAsync(100);
      // The retry starts at the first chunk the log lacks, one chunk at a time.
      expect(t.appends.map((a) => a.offset)).toEqual([0, 1, 0]);
      t.appends[2].reject(new Error("still down"));
      await t.settle();
      expect(t.events).toEqual(["append-failed", "append-failed"]);
      await vi.advanceTimersByTimeAsync(200); // the wait doubles
      expect(t.appends.map((a) => a.offset)).toEqual([0, 1, 0, 0]);
      t.appends[3].resolve();
      await t.settle();
      // "yz" landed once already; the log's append is idempotent, and asked again in order.
      expect(t.appends.map((a) => a.offset)).toEqual([0, 1, 0, 0, 1]);
      t.appends[4].resolve();
      await t.settle();
      expect(t.appends.map((a) => a.offset)).toEqual([0, 1, 0, 0, 1, 3]);
      t.appends[5].resolve();
      await t.settle();
      t.delivery.push(4, bytes("v")); // caught up: pipelined again
      t.delivery.push(5, bytes("u"));
      expect(t.appends.map((a) => a.offset)).toEqual([0, 1, 0, 0, 1, 3, 4, 5]);
      t.appends[6].resolve();
      t.appends[7].resolve();
      await t.settle();
      expect(t.sent).toEqual([
        { offset: 0, text: "x" },
        { offset: 1, text: "yz" },
        { offset: 3, text: "w" },
        { offset: 4, text: "v" },
        { offset: 5, text: "u" },
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("counts unappended bytes for flow control: the PTY pauses while the log is away", async () => {
    vi.useFakeTimers();
    try {
      const t = setup({ highWater: 100, lowWater: 40, retryMs: 50 });
      t.delivery.resume(0);
      t.delivery.push(0, bytes("a".repeat(60)));
      t.appends[0].reject(new Error("redis down"));
      await t.settle();
      t.delivery.push(60, bytes("b".repeat(60)));
      expect(t.events).toEqual(["append-failed", "pause"]);
      await vi.advanceTimersByTimeAsync(50);
      t.appends[1].resolve(); // 0 again
      await t.settle();
      t.appends[2].resolve(); // then 60
      await t.settle();
      t.delivery.ack(120);
      expect(t.events).toEqual(["append-failed", "pause", "resume"]);
      expect(t.sent.map((s) => (typeof s === "string" ? s : s.offset))).toEqual([0, 60]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("sends nothing on a new link before its resume, so a dropped frame is never skipped", async () => {
    const t = setup();
    t.delivery.resume(0);
    t.delivery.push(0, bytes("one"));
    t.appends[0].resolve();
    await t.settle();
    // "one" went out on a link that then dropped without the edge receiving it.
    t.delivery.linkDown();
    t.delivery.push(3, bytes("two"));
    t.appends[1].resolve();
    await t.settle();
    expect(t.sent).toEqual([{ offset: 0, text: "one" }]);
    t.delivery.resume(0); // the new link's edge holds nothing
    expect(t.sent).toEqual([
      { offset: 0, text: "one" },
      { offset: 0, text: "one" },
      { offset: 3, text: "two" },
    ]);
  });

  it("pauses above the high-water mark and resumes below the low-water mark", async () => {
    const t = setup();
    t.delivery.resume(0);
    for (let i = 0; i < 4; i++) t.delivery.push(i * 30, bytes("y".repeat(30)));
    expect(t.events).toEqual(["pause"]); // 120 > 100
    expect(t.delivery.unacknowledged).toBe(120);
    t.appends.forEach((a) => a.resolve());
    await t.settle();
    t.delivery.ack(60); // 60 left: not below 40
    expect(t.events).toEqual(["pause"]);
    t.delivery.ack(90); // 30 left
    expect(t.events).toEqual(["pause", "resume"]);
    expect(t.delivery.unacknowledged).toBe(30);
  });

  it("after a reconnect sends again what the edge lacks, cutting a chunk it holds in part", async () => {
    const t = setup();
    t.delivery.resume(0);
    t.delivery.push(0, bytes("hello"));
    t.delivery.push(5, bytes("world"));
    t.appends.forEach((a) => a.resolve());
    await t.settle();
    t.delivery.linkDown();
    t.sent.length = 0;
    t.delivery.resume(7); // the edge holds "hello" and "wo"
    expect(t.sent).toEqual([{ offset: 7, text: "rld" }]);
    expect(t.delivery.unacknowledged).toBe(3);
  });

  it("sends the final message after every chunk, and again after each resume", async () => {
    const t = setup();
    t.delivery.resume(0);
    t.delivery.push(0, bytes("last"));
    t.delivery.finish('{"type":"exited"}');
    expect(t.sent).toEqual([]); // waits for the chunk before it
    t.appends[0].resolve();
    await t.settle();
    expect(t.sent).toEqual([{ offset: 0, text: "last" }, '{"type":"exited"}']);
    t.sent.length = 0;
    t.delivery.resume(4);
    expect(t.sent).toEqual(['{"type":"exited"}']);
  });

  it("stops sending while the link is down and carries on from the edge's offset", async () => {
    const t = setup();
    t.delivery.resume(0);
    t.setLink(false);
    t.delivery.push(0, bytes("ab"));
    t.delivery.push(2, bytes("cd"));
    t.appends.forEach((a) => a.resolve());
    await t.settle();
    expect(t.sent).toEqual([]);
    t.setLink(true);
    t.delivery.resume(0);
    expect(t.sent).toEqual([
      { offset: 0, text: "ab" },
      { offset: 2, text: "cd" },
    ]);
  });
});
