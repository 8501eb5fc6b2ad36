// For the tests of text-stripper.ts, expect-matcher.ts and shell-marks.ts (shared/*.test.ts only):
// bytes from text, a stream cut anywhere, and fast-check streams rich in what is hard to parse.
import fc from "fast-check";
import { type StrippedText, TextStripper } from "./text-stripper.js";

// shared/ compiles without the DOM library; TextEncoder is in every runtime the tests run in.
declare const TextEncoder: new () => { encode(text: string): Uint8Array };

const encoder = new TextEncoder();
export const bytes = (text: string) => encoder.encode(text);
export const raw = (...values: number[]) => Uint8Array.from(values);
export const concat = (parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
};

/** Splits `data` at the given cut points (any numbers: taken modulo the length, sorted). */
export function split(data: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => (data.length === 0 ? 0 : c % (data.length + 1))))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const point of points) {
    pieces.push(data.subarray(from, point));
    from = point;
  }
  pieces.push(data.subarray(from));
  return pieces;
}

/** Feeds the pieces one by one (then flushes) and joins what came out. */
export function stripPieces(pieces: Uint8Array[], startOffset = 0) {
  const stripper = new TextStripper(startOffset);
  const outputs: StrippedText[] = pieces.map((piece) => stripper.push(piece));
  outputs.push(stripper.flush());
  return {
    text: outputs.map((o) => o.text).join(""),
    starts: outputs.flatMap((o) => [...o.starts]),
    ends: outputs.flatMap((o) => [...o.ends]),
    offset: stripper.offset,
  };
}

/** Byte streams rich in what is hard: escapes, their introducers and terminators, \r\n, UTF-8 pieces, bad bytes. */
const fragments = [
  "\x1b", "[", "]", "P", "_", "^", "X", "(", "#", "\\", "\x07", "\x18", "\r", "\n", "\t", "\x08", "\x7f",
  "\x1b[31m", "\x1b[0m", "\x1b[?25l", "\x1b[2J", "\x1b]0;title\x07", "\x1b]8;;http://x\x1b\\", "\x1bP1$r\x1b\\",
  "\x1b(B", "\x1b=", "\x1b7", "\x1b#8", "\x1b]133;A\x07", "133;", "\r\n", "é", "€", "😀", "\u009b", "ab", " ",
].map(bytes);
const badBytes = [raw(0xc3), raw(0xe2, 0x82), raw(0xf0, 0x9f, 0x98), raw(0x80), raw(0xbf), raw(0xff), raw(0xc0, 0xaf), raw(0xed, 0xa0, 0x80)];
export const stream = fc
  .array(fc.oneof(fc.constantFrom(...fragments), fc.constantFrom(...badBytes), fc.uint8Array({ maxLength: 6 })), { maxLength: 60 })
  .map(concat);
export const cuts = fc.array(fc.nat(), { maxLength: 12 });
