import { describe, expect, it } from "vitest";
import { AsciicastEncoder } from "./asciicast.js";
import type { ChunkMeta } from "./protocol.js";

const START = Date.UTC(2026, 10, 23, 12, 0, 0, 250);
const utf8 = (text: string) => new TextEncoder().encode(text);
const meta = (at: number, more: Partial<ChunkMeta> = {}): ChunkMeta => ({ stream: "stdout", at, cols: 80, rows: 24, ...more });

/** The lines written, parsed. */
function parse(text: string): unknown[] {
  expect(text.endsWith("\n")).toBe(true);
  return text.slice(0, -1).split("\n").map((line) => JSON.parse(line) as unknown);
}

describe("AsciicastEncoder", () => {
  it("writes the header with the first chunk's size and the session's start, events at read times, r where the size changes", () => {
    const cast = new AsciicastEncoder({ createdAt: START, cols: 80, rows: 24 });
    const text =
      cast.chunk(utf8("hello "), meta(START + 100, { cols: 100, rows: 30 })) +
      cast.chunk(utf8("world"), meta(START + 1600, { cols: 100, rows: 30 })) +
      cast.chunk(utf8("!"), meta(START + 1700, { cols: 120, rows: 40 })) +
      cast.end();
    expect(parse(text)).toEqual([
      { version: 2, width: 100, height: 30, timestamp: Math.floor(START / 1000) },
      [0.1, "o", "hello "],
      [1.6, "o", "world"],
      [1.7, "r", "120x40"],
      [1.7, "o", "!"],
    ]);
  });

  it("keeps times from going back, and a chunk without a time at the last one", () => {
    const cast = new AsciicastEncoder({ createdAt: START, cols: 80, rows: 24 });
    const lines = parse(cast.chunk(utf8("a"), meta(START + 500)) + cast.chunk(utf8("b"), meta(START + 200)) + cast.chunk(utf8("c"), meta(0)));
    expect(lines.slice(1)).toEqual([
      [0.5, "o", "a"],
      [0.5, "o", "b"],
      [0.5, "o", "c"],
    ]);
  });

  it("decodes each stream on its own: characters split across chunks of one stream, interleaved with the other, come out whole", () => {
    const euro = utf8("€"); // 3 bytes
    const cast = new AsciicastEncoder({ createdAt: START, cols: 80, rows: 24 });
    const pipes = { cols: 0, rows: 0 };
    const text =
      cast.chunk(euro.subarray(0, 2), meta(START + 1, { ...pipes })) +
      cast.chunk(utf8("err"), meta(START + 2, { ...pipes, stream: "stderr" })) +
      cast.chunk(euro.subarray(2), meta(START + 3, { ...pipes })) +
      cast.end();
    const lines = parse(text);
    // No terminal size in the log: the header takes the session's.
    expect(lines[0]).toEqual({ version: 2, width: 80, height: 24, timestamp: Math.floor(START / 1000) });
    expect(lines.slice(1)).toEqual([
      [0.002, "o", "err"],
      [0.003, "o", "€"],
    ]);
  });

  it("turns bytes that are not UTF-8 into U+FFFD, and a character left unfinished at the end too", () => {
    const cast = new AsciicastEncoder({ createdAt: START, cols: 80, rows: 24 });
    const text = cast.chunk(new Uint8Array([0x61, 0xff, 0x62, 0xe2, 0x82]), meta(START + 10)) + cast.end();
    expect(parse(text).slice(1)).toEqual([
      [0.01, "o", "a\ufffdb"],
      [0.01, "o", "\ufffd"],
    ]);
  });

  it("writes only the header when there is no output", () => {
    const cast = new AsciicastEncoder({ createdAt: START, cols: 90, rows: 20 });
    expect(parse(cast.end())).toEqual([{ version: 2, width: 90, height: 20, timestamp: Math.floor(START / 1000) }]);
  });
});
