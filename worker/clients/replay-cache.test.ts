// The replay cache as pure logic; the churn it exists for is test/replay-churn.test.ts.
import { describe, expect, it } from "vitest";
import { ReplayCache } from "./replay-cache.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (chunks: { offset: number; data: Uint8Array }[]) =>
  chunks.map((c) => `${c.offset}:${new TextDecoder().decode(c.data)}`);

describe("ReplayCache", () => {
  it("keeps one contiguous run and serves any offset inside it, slicing the first chunk", () => {
    const cache = new ReplayCache();
    cache.note(10, bytes("abc"));
    cache.note(13, bytes("defg"));
    expect([cache.from, cache.to]).toEqual([10, 17]);
    expect(text(cache.take(10, 100))).toEqual(["10:abc", "13:defg"]);
    expect(text(cache.take(12, 100))).toEqual(["12:c", "13:defg"]);
    expect(text(cache.take(12, 1))).toEqual(["12:c"]);
    expect(cache.take(9, 100)).toEqual([]);
    expect(cache.take(17, 100)).toEqual([]);
  });

  it("ignores what it holds and what lies past its end, and starts a new run for a chunk before it", () => {
    const cache = new ReplayCache();
    cache.note(10, bytes("ab"));
    cache.note(12, bytes("cd"));
    cache.note(10, bytes("ab")); // a second reader of the same range
    cache.note(100, bytes("x")); // a replay from elsewhere
    expect([cache.from, cache.to]).toEqual([10, 14]);
    cache.note(0, bytes("0123456789")); // a replay from the log's beginning
    expect([cache.from, cache.to]).toEqual([0, 10]);
    expect(cache.take(12, 10)).toEqual([]);
  });

  it("forgets a run the log no longer holds part of", () => {
    const cache = new ReplayCache();
    cache.note(10, bytes("abcd"));
    cache.forget(0, 10); // before it: still the log's
    expect([cache.from, cache.to]).toEqual([10, 14]);
    cache.forget(0, 11);
    expect(cache.take(10, 10)).toEqual([]);
  });

  it("stops growing at its bound and empties on clear", () => {
    const cache = new ReplayCache();
    const mib = new Uint8Array(1 << 20);
    for (let i = 0; i < 6; i++) cache.note(i << 20, mib);
    expect([cache.from, cache.to]).toEqual([0, 4 << 20]);
    cache.clear();
    expect(cache.take(0, 10)).toEqual([]);
  });
});
