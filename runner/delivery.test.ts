// Acknowledged delivery as pure logic: a fake log whose appends the test settles by hand and a
// fake link. The real path (node-pty, Redis, the edge) is covered by the e2e suites.
import { describe, expect, it } from "vitest";
import { decodeFrame } from "../shared/protocol.js";
import { Delivery, type DeliveryPort } from "./delivery.js";

function setup(options = { highWater: 100, lowWater: 40 }) {
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

  it("still sends a chunk whose append failed, and says so", async () => {
    const t = setup();
    t.delivery.resume(0);
    t.delivery.push(0, bytes("x"));
    t.appends[0].reject(new Error("redis down"));
    await t.settle();
    expect(t.sent).toEqual([{ offset: 0, text: "x" }]);
    expect(t.events).toEqual(["append-failed"]);
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
