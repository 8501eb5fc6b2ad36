// ReplayReplies' bookkeeping alone (the fence, the answers it counts, the deadline); the CLI in
// tmux against the real stack is test/query-replies.test.ts.
import { afterEach, describe, expect, it, vi } from "vitest";
import { FENCE, FENCE_DEADLINE_MS, ReplayReplies } from "./replay-replies.js";

const ESC = "\x1b";

function guard() {
  const written: string[] = [];
  const released: string[] = [];
  const replies = new ReplayReplies({
    write: (text) => written.push(text),
    release: (bytes) => released.push(bytes.toString("latin1")),
  });
  const type = (text: string) => replies.input(Buffer.from(text, "latin1")).toString("latin1");
  const replay = (text: string) => replies.replayed(Buffer.from(text, "latin1"));
  return { replies, written, released, type, replay };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("ReplayReplies", () => {
  it("passes everything while not replaying", () => {
    const { type, written } = guard();
    expect(type(`${ESC}[?1;2cls\r`)).toBe(`${ESC}[?1;2cls\r`);
    expect(written).toEqual([]);
  });

  it("drops replies from the replay's start to the fence's answer, keys pass; then replies pass again", () => {
    const { replies, type, replay, written } = guard();
    replies.replaying();
    replay(`x${ESC}[c${ESC}[6n`);
    expect(type(`${ESC}[?1;2ca${ESC}[3;1R`)).toBe("a");
    replies.live();
    expect(written).toEqual([FENCE]);
    expect(type(`b${ESC}[A`)).toBe(`b${ESC}[A`);
    expect(type(`${ESC}[0nc`)).toBe("c");
    expect(type(`${ESC}[?1;2c`)).toBe(`${ESC}[?1;2c`); // live now: answered for a live query
  });

  it("counts the DSR queries in the replay, also one split across two chunks, before the fence's answer", () => {
    const { replies, type, replay } = guard();
    replies.replaying();
    replay(`one${ESC}[5`);
    replay(`ntwo${ESC}[5n`);
    replies.live();
    expect(type(`${ESC}[0n${ESC}[0n`)).toBe("");
    expect(type(`${ESC}[?1;2c`)).toBe(""); // two of three answers came: still filtering
    expect(type(`${ESC}[0nz`)).toBe("z");
    expect(type(`${ESC}[0n`)).toBe(`${ESC}[0n`);
  });

  it("holds a lone Escape while filtering and gives it up with the fence's answer", () => {
    const { replies, type } = guard();
    replies.replaying();
    replies.live();
    expect(type(ESC)).toBe("");
    expect(type(`[0n`)).toBe(""); // it was the start of the answer
    replies.replaying();
    replies.live();
    expect(type(ESC)).toBe("");
    expect(type(`${ESC}[0n`)).toBe(ESC);
  });

  it("ends at the deadline without an answer, releasing what it held", () => {
    vi.useFakeTimers();
    const { replies, type, released } = guard();
    replies.replaying();
    replies.live();
    expect(type(`k${ESC}`)).toBe("k");
    vi.advanceTimersByTime(FENCE_DEADLINE_MS);
    expect(released).toEqual([ESC]);
    expect(type(`${ESC}[?1;2c`)).toBe(`${ESC}[?1;2c`);
  });

  it("settles at once when not filtering, and otherwise after the fence's answer (fencing a replay cut short)", async () => {
    const { replies, type, written } = guard();
    const settled: string[] = [];
    replies.settle(() => settled.push("idle"));
    expect(settled).toEqual(["idle"]);
    replies.replaying();
    replies.settle(() => settled.push("fenced"));
    expect(written).toEqual([FENCE]);
    await Promise.resolve();
    expect(settled).toEqual(["idle"]);
    type(`${ESC}[0n`);
    await Promise.resolve();
    expect(settled).toEqual(["idle", "fenced"]);
  });
});
