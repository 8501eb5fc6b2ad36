// The text framing of OpenCode's socket: a frame's length in UTF-16 code units is the number of
// bytes it stands for, no frame ends inside a character, and the frames' text without the NUL
// padding is the output decoded, however the output is cut.
import { describe, expect, it } from "vitest";
import { TextFramer, completeLength } from "./text-frames.js";

const encoder = new TextEncoder();

/** Frames `bytes` cut at `cuts`, as a client would count them. */
function frameAll(bytes: Uint8Array, cuts: number[], start = 0) {
  const framer = new TextFramer(start);
  const frames: string[] = [];
  let at = 0;
  for (const cut of [...cuts, bytes.byteLength]) {
    const text = framer.push(start + at, bytes.subarray(at, cut));
    if (text) frames.push(text);
    at = cut;
  }
  const rest = framer.flush();
  if (rest) frames.push(rest);
  return { frames, cursor: framer.cursor };
}

describe("TextFramer", () => {
  it("passes ASCII as it is, no padding", () => {
    const { frames, cursor } = frameAll(encoder.encode("hello\r\nworld"), [3]);
    expect(frames).toEqual(["hel", "lo\r\nworld"]);
    expect(cursor).toBe(12);
  });

  it("never ends a frame inside a character, and pads each frame to its bytes", () => {
    const text = "é€😀x"; // 2 + 3 + 4 + 1 bytes; 1 + 1 + 2 + 1 code units
    const bytes = encoder.encode(text);
    for (let cut = 1; cut < bytes.byteLength; cut++) {
      const { frames, cursor } = frameAll(bytes, [cut], 100);
      expect(cursor).toBe(100 + bytes.byteLength);
      expect(frames.reduce((n, f) => n + f.length, 0)).toBe(bytes.byteLength);
      expect(frames.join("").replaceAll("\0", "")).toBe(text);
      // Each frame's count lands on a character boundary of the bytes.
      let at = 0;
      for (const frame of frames) {
        at += frame.length;
        expect(completeLength(bytes.subarray(0, at))).toBe(at);
      }
    }
  });

  it("reads bytes that are not UTF-8 as U+FFFD, one byte each counted, and keeps a BOM", () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, 0x41, 0xff, 0x80, 0x42]);
    const { frames, cursor } = frameAll(bytes, []);
    expect(cursor).toBe(7);
    expect(frames.join("").replaceAll("\0", "")).toBe("\ufeffA\ufffd\ufffdB");
    expect(frames.join("").length).toBe(7);
  });

  it("tells a character left incomplete at a gap as U+FFFD, then frames from past the gap", () => {
    const framer = new TextFramer(0);
    expect(framer.push(0, new Uint8Array([0x61, 0xe2, 0x82]))).toBe("a");
    expect(framer.holding).toBe(2);
    expect(framer.skipTo(10)).toBe("\ufffd\0");
    expect(framer.push(10, encoder.encode("z"))).toBe("z");
    expect(framer.cursor).toBe(11);
  });

  it("refuses output that does not follow what it framed", () => {
    const framer = new TextFramer(5);
    expect(() => framer.push(6, encoder.encode("x"))).toThrow(/expected 5/);
  });
});
