import { describe, expect, it } from "vitest";
import { completeUtf8Length } from "./utf8.js";

const encoder = new TextEncoder();
const bytes = (...values: number[]): Uint8Array => Uint8Array.from(values);

function decodesStrictly(input: Uint8Array): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(input);
    return true;
  } catch {
    return false;
  }
}

describe("completeUtf8Length", () => {
  it("returns 0 for empty input", () => {
    expect(completeUtf8Length(new Uint8Array())).toBe(0);
  });

  it("returns the whole length for ASCII", () => {
    const ascii = encoder.encode("hello, world\r\n\x1b[0m");
    expect(completeUtf8Length(ascii)).toBe(ascii.byteLength);
    expect(completeUtf8Length(bytes(0x41))).toBe(1);
    expect(completeUtf8Length(bytes(0x00))).toBe(1);
    expect(completeUtf8Length(bytes(0x7f))).toBe(1);
  });

  it.each([
    ["2-byte é", "é", 2],
    ["2-byte U+0080", "\u0080", 2],
    ["2-byte U+07FF", "\u07ff", 2],
    ["3-byte €", "€", 3],
    ["3-byte U+0800", "\u0800", 3],
    ["3-byte U+FFFF", "\uffff", 3],
    ["4-byte 😀", "😀", 4],
    ["4-byte U+10000", "\u{10000}", 4],
    ["4-byte U+10FFFF", "\u{10ffff}", 4],
  ])("treats a complete %s as complete", (_label, char, size) => {
    const encoded = encoder.encode(char);
    expect(encoded.byteLength).toBe(size);
    expect(completeUtf8Length(encoded)).toBe(size);
    const withPrefix = encoder.encode(`ab${char}`);
    expect(completeUtf8Length(withPrefix)).toBe(size + 2);
    const doubled = encoder.encode(char + char);
    expect(completeUtf8Length(doubled)).toBe(2 * size);
  });

  it.each([
    ["é", "é"],
    ["€", "€"],
    ["😀", "😀"],
    ["U+10FFFF", "\u{10ffff}"],
  ])("cuts before the lead byte of every truncated prefix of %s", (_label, char) => {
    const encoded = encoder.encode(char);
    for (const prefix of ["", "x", "abc", "é", "€", "😀"]) {
      const head = encoder.encode(prefix);
      for (let keep = 1; keep < encoded.byteLength; keep++) {
        const input = new Uint8Array(head.byteLength + keep);
        input.set(head, 0);
        input.set(encoded.subarray(0, keep), head.byteLength);
        expect(completeUtf8Length(input), `prefix ${JSON.stringify(prefix)}, ${keep} byte(s) of ${char}`).toBe(
          head.byteLength,
        );
      }
    }
  });

  it("handles subarray views with a non-zero byteOffset", () => {
    const backing = encoder.encode("€€€");
    // view = E2 82 AC E2 82 (the second € truncated)
    const view = backing.subarray(0, 5);
    expect(completeUtf8Length(view)).toBe(3);
    // view = 82 AC E2 82: starts mid-character, ends truncated
    const shifted = backing.subarray(1, 5);
    expect(shifted.byteOffset).toBe(1);
    expect(completeUtf8Length(shifted)).toBe(2);
  });

  describe("invalid bytes are treated as complete", () => {
    it.each([
      ["a lone continuation byte", [0x80]],
      ["two continuation bytes", [0x80, 0xbf]],
      ["three continuation bytes", [0x80, 0x80, 0x80]],
      ["four continuation bytes", [0x80, 0x80, 0x80, 0x80]],
      ["ASCII then continuation bytes", [0x41, 0x80, 0x80]],
      ["a complete 2-byte char then a stray continuation", [0xc3, 0xa9, 0xa9]],
      ["a complete 4-byte char then a stray continuation", [0xf0, 0x9f, 0x98, 0x80, 0x80]],
      ["0xFF", [0xff]],
      ["0xFE", [0xfe]],
      ["overlong lead 0xC0", [0xc0]],
      ["overlong lead 0xC1", [0xc1]],
      ["out-of-range lead 0xF5", [0xf5]],
      ["out-of-range lead 0xF8 with continuations", [0xf8, 0x80, 0x80]],
      ["ASCII then 0xFF", [0x61, 0x62, 0xff]],
    ])("%s", (_label, values) => {
      expect(completeUtf8Length(Uint8Array.from(values))).toBe(values.length);
    });
  });

  it("for every cut point, yields the longest prefix that decodes strictly (property)", () => {
    const alphabet = ["a", "Z", " ", "\n", "é", "ß", "€", "中", "😀", "𝄞"];
    // Deterministic pseudo-random strings (LCG), plus a few hand-made ones.
    let seed = 12345;
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const samples = ["a€é😀b", "😀😀", "ééé", "€a€", "x"];
    for (let s = 0; s < 200; s++) {
      const length = Math.floor(next() * 12);
      let text = "";
      for (let i = 0; i < length; i++) text += alphabet[Math.floor(next() * alphabet.length)];
      samples.push(text);
    }

    for (const text of samples) {
      const encoded = encoder.encode(text);
      for (let cut = 0; cut <= encoded.byteLength; cut++) {
        const input = encoded.subarray(0, cut);
        const length = completeUtf8Length(input);
        const context = `${JSON.stringify(text)} cut at ${cut}`;
        expect(length, context).toBeGreaterThanOrEqual(0);
        expect(length, context).toBeLessThanOrEqual(cut);
        expect(decodesStrictly(input.subarray(0, length)), context).toBe(true);
        // Longest: no longer prefix of the cut decodes strictly.
        for (let longer = length + 1; longer <= cut; longer++) {
          expect(decodesStrictly(input.subarray(0, longer)), `${context}, longer ${longer}`).toBe(false);
        }
        // Never holds back more than one unfinished character (at most 3 bytes).
        expect(cut - length, context).toBeLessThanOrEqual(3);
      }
    }
  });
});
