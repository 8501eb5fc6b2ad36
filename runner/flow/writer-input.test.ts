// The runner's count of each writer's numbered input (writer-input.ts), with the write queue
// played by a number: pure bookkeeping beside the real stack's test/input-once.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { MAX_WRITERS, type Take, type WriterAck, WriterInputs } from "./writer-input.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (take: Take) => (take.write ? new TextDecoder().decode(take.write) : take.why);

let disposeAll: (() => void)[] = [];
afterEach(() => {
  for (const dispose of disposeAll) dispose();
  disposeAll = [];
});

/** WriterInputs whose write queue holds `queue.pending` bytes; acks are collected. */
function writers() {
  const queue = { pending: 0 };
  const acks: WriterAck[][] = [];
  const inputs = new WriterInputs(
    () => queue.pending,
    (sent) => acks.push(sent),
  );
  disposeAll.push(() => inputs.dispose());
  /** Offers a frame and, when some of it is new, writes it (the queue takes it at once unless told). */
  const offer = (writer: string, offset: number, data: string, queued = 0, base = 0) => {
    const take = inputs.take(writer, offset, base, bytes(data));
    if (take.write) {
      queue.pending += queued;
      inputs.wrote(take.write.byteLength, { key: writer, end: take.end });
    }
    return take;
  };
  return { inputs, queue, acks, offer };
}

describe("WriterInputs", () => {
  it("writes each byte once: a resend is dropped, an overlap writes only its new part", async () => {
    const { offer, acks } = writers();
    expect(text(offer("w", 0, "abc"))).toBe("abc");
    expect(text(offer("w", 0, "abc"))).toBe("resend");
    expect(text(offer("w", 1, "bcdef"))).toBe("def");
    expect(text(offer("w", 6, "g"))).toBe("g");
    // The first acknowledgement at once, the rest (newest per writer) once ACK_EVERY_MS has passed.
    expect(acks).toEqual([[{ writer: "w", offset: 3 }]]);
    await until(() => acks.length === 2);
    expect(acks[1]).toEqual([{ writer: "w", offset: 7 }]);
  });

  it("acknowledges at most once per window (ACK_EVERY_MS), the newest offset of each writer; a resend ask goes at once", async () => {
    const { offer, acks } = writers();
    for (let i = 0; i < 100; i++) offer(i % 2 ? "a" : "b", Math.floor(i / 2), "x");
    expect(acks).toEqual([[{ writer: "b", offset: 1 }]]);
    expect(text(offer("a", 80, "late"))).toBe("hole");
    expect(acks[1]).toEqual([{ writer: "a", offset: 50, resend: true }]);
    // 101 frames, three messages: the first, the ask, and the rest together.
    await until(() => acks.length === 3);
    expect(acks[2]).toEqual(
      expect.arrayContaining([
        { writer: "a", offset: 50 },
        { writer: "b", offset: 50 },
      ]),
    );
  });

  it("drops a frame past a hole and asks once, from its count, for the rest again", () => {
    const { offer, acks } = writers();
    offer("w", 0, "ab");
    acks.length = 0;
    expect(text(offer("w", 5, "fg"))).toBe("hole");
    expect(text(offer("w", 7, "hi"))).toBe("hole");
    expect(acks).toEqual([[{ writer: "w", offset: 2, resend: true }]]);
    // The resend fills the hole, and the frames after it count again.
    expect(text(offer("w", 2, "cdefg"))).toBe("cdefg");
    expect(text(offer("w", 9, "j"))).toBe("hole");
    expect(acks.at(-1)).toEqual([{ writer: "w", offset: 7, resend: true }]);
  });

  it("acknowledges only once the write queue has taken the bytes, in order per writer", async () => {
    const { offer, queue, acks } = writers();
    offer("a", 0, "1234", 4); // all four still queued
    offer("b", 0, "xy", 2);
    expect(acks).toEqual([]);
    queue.pending = 2; // the terminal took a's four bytes, not b's two
    await until(() => acks.length === 1);
    expect(acks[0]).toEqual([{ writer: "a", offset: 4 }]);
    queue.pending = 0;
    await until(() => acks.length === 2);
    expect(acks[1]).toEqual([{ writer: "b", offset: 2 }]);
  });

  it("counts other input in the queue too: a writer's bytes behind REST input wait for it", async () => {
    const { inputs, offer, queue, acks } = writers();
    queue.pending = 10;
    inputs.wrote(10); // REST or `run` input, no writer
    offer("w", 0, "ab", 2);
    queue.pending = 3; // 9 of the 12 queued bytes taken: w's end (12) is not
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(acks).toEqual([]);
    queue.pending = 0;
    await until(() => acks.length === 1);
    expect(acks[0]).toEqual([{ writer: "w", offset: 2 }]);
  });

  it("keeps at most two marks per writer however many writes wait: the oldest is acknowledged as soon as it is through", async () => {
    const { offer, queue, acks } = writers();
    offer("w", 0, "a", 1);
    for (let i = 1; i < 10_000; i++) offer("w", i, "b", 1); // the queue takes nothing
    expect(acks).toEqual([]);
    queue.pending = 9_999; // the first byte is through: its mark, not the newest
    await until(() => acks.length === 1);
    expect(acks[0]).toEqual([{ writer: "w", offset: 1 }]);
    queue.pending = 0;
    await until(() => acks.length === 2);
    expect(acks[1]).toEqual([{ writer: "w", offset: 10_000 }]);
  });

  it("a writer it does not know starts at the base it names: its first frame past it is a hole, not a new start", () => {
    const { offer, acks } = writers();
    // Forgotten (or a runner that restarted): the writer had 500 bytes acknowledged when it connected.
    expect(text(offer("back", 500, "xyz", 0, 500))).toBe("xyz");
    expect(text(offer("back", 500, "xyz", 0, 500))).toBe("resend");
    // New, and its frames from 0 were refused on the way: the one at 10 is not taken as a start.
    expect(text(offer("new", 10, "late", 0, 0))).toBe("hole");
    expect(acks.at(-1)).toEqual([{ writer: "new", offset: 0, resend: true }]);
    expect(text(offer("new", 0, "echo early-late", 0, 0))).toBe("echo early-late");
  });

  it("a frame the input bound refused stays the writer's: asked for again once, written when resent", () => {
    const { inputs, offer, acks } = writers();
    offer("w", 0, "ab");
    acks.length = 0;
    const take = inputs.take("w", 2, 0, bytes("cd"));
    expect(text(take)).toBe("cd");
    inputs.refused("w", 2); // not written
    inputs.refused("w", 2);
    expect(acks).toEqual([[{ writer: "w", offset: 2, resend: true }]]);
    expect(text(offer("w", 2, "cd"))).toBe("cd");
  });

  it("remembers at most MAX_WRITERS writers, forgetting the one heard from longest ago", () => {
    const { inputs, offer } = writers();
    for (let i = 0; i <= MAX_WRITERS; i++) offer(`w${i}`, 0, "a");
    const known = inputs.all().map((ack) => ack.writer);
    expect(known).toHaveLength(MAX_WRITERS);
    expect(known).not.toContain("w0");
    expect(known).toContain(`w${MAX_WRITERS}`);
  });
});

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(check()).toBe(true);
}
