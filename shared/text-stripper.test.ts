import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bytes, cuts, raw, split, stream, stripPieces } from "./terminal-text.test-kit.js";
import { MAX_STRING_SEQUENCE_BYTES, TextStripper, stripTerminal } from "./text-stripper.js";

const utf8 = new TextDecoder();
/** What the text never holds: C0 controls but \t and \n, DEL, C1 controls. */
const isDroppedControl = (c: number) => (c < 0x20 && c !== 0x09 && c !== 0x0a) || (c >= 0x7f && c <= 0x9f);

describe("TextStripper", () => {
  it("maps every character to its raw bytes", () => {
    const out = new TextStripper(100).push(bytes("aé😀\n"));
    expect(out.text).toBe("aé😀\n");
    expect([...out.starts]).toEqual([100, 101, 103, 103, 107]);
    expect([...out.ends]).toEqual([101, 103, 107, 107, 108]);
  });

  it("removes CSI, OSC, DCS, SOS/PM/APC and short escapes", () => {
    const input =
      "\x1b[1;31mred\x1b[0m \x1b[?1049h\x1b[2J\x1b[Hx" +
      "\x1b]0;title\x07\x1b]8;;http://a\x1b\\link\x1b]8;;\x1b\\" +
      "\x1bP1$r0m\x1b\\\x1bXsos\x1b\\\x1b^pm\x1b\\\x1b_apc\x1b\\" +
      "\x1b(B\x1b)0\x1b=\x1b>\x1b7\x1b8\x1bc\x1b#8\x1bM!";
    expect(stripTerminal(bytes(input))).toBe("red xlink!");
  });

  it("keeps \\t and \\n, drops other C0 controls, DEL and C1 controls", () => {
    expect(stripTerminal(bytes("a\tb\x00c\x07d\x08e\x7ff\u009bg\u0085h\n"))).toBe("a\tbcdefgh\n");
  });

  it("reads \\r\\n as \\n covering both bytes, and drops a lone \\r", () => {
    const out = new TextStripper(0).push(bytes("a\r\nb\rc\r\r\n"));
    expect(out.text).toBe("a\nbc\n");
    expect([...out.starts]).toEqual([0, 1, 3, 5, 7]);
    expect([...out.ends]).toEqual([1, 3, 4, 6, 9]);
  });

  it("joins a \\r and a \\n that arrive in different pushes", () => {
    const stripper = new TextStripper(10);
    expect(stripper.push(bytes("x\r")).text).toBe("x");
    const out = stripper.push(bytes("\ny"));
    expect(out.text).toBe("\ny");
    expect([...out.starts]).toEqual([11, 13]);
    expect([...out.ends]).toEqual([13, 14]);
  });

  it("does not join a \\r and a \\n with a sequence between them", () => {
    const out = new TextStripper(0).push(bytes("\r\x1b[K\n"));
    expect(out.text).toBe("\n");
    expect([...out.starts]).toEqual([4]);
  });

  it("gives a character split across pushes once, when complete", () => {
    const stripper = new TextStripper(0);
    const euro = bytes("€");
    expect(stripper.push(euro.subarray(0, 1)).text).toBe("");
    expect(stripper.push(euro.subarray(1, 2)).text).toBe("");
    const out = stripper.push(euro.subarray(2));
    expect(out.text).toBe("€");
    expect([...out.starts, ...out.ends]).toEqual([0, 3]);
    expect(stripper.offset).toBe(3);
  });

  it("decodes invalid UTF-8 as TextDecoder does, each U+FFFD mapped to its bytes", () => {
    const out = new TextStripper(0).push(raw(0xff, 0xe2, 0x82, 0x41, 0xc0, 0xaf));
    expect(out.text).toBe("\ufffd\ufffdA\ufffd\ufffd");
    expect([...out.starts]).toEqual([0, 1, 3, 4, 5]);
    expect([...out.ends]).toEqual([1, 3, 4, 5, 6]);
  });

  it("holds an incomplete character until flush turns it into U+FFFD", () => {
    const stripper = new TextStripper(0);
    expect(stripper.push(raw(0x61, 0xf0, 0x9f)).text).toBe("a");
    const out = stripper.flush();
    expect(out.text).toBe("\ufffd");
    expect([...out.starts, ...out.ends]).toEqual([1, 3]);
    expect(stripTerminal(raw(0xe2, 0x82))).toBe("\ufffd");
  });

  it("cancels a CSI at a non-ASCII character or CAN, and executes controls inside it", () => {
    expect(stripTerminal(bytes("\x1b[1é"))).toBe("é");
    expect(stripTerminal(bytes("\x1b[1\x18m"))).toBe("m");
    expect(stripTerminal(bytes("\x1b[1\nm"))).toBe("\n");
  });

  it("abandons an unterminated string sequence after 64 KiB", () => {
    const body = "x".repeat(MAX_STRING_SEQUENCE_BYTES);
    expect(stripTerminal(bytes(`\x1b]0;${body.slice(2)}\x07after`))).toBe("after");
    // The body's 65,537th byte and what follows are text again: here the last two x of the 64 KiB.
    expect(stripTerminal(bytes(`\x1b]0;${body}tail`))).toBe("xxtail");
    expect(stripPieces(split(bytes(`\x1bP${body}tail`), [1, 7, 40_000, 65_537])).text).toBe("tail");
  });

  it("property: the same text and ranges however the stream is split", () => {
    fc.assert(
      fc.property(stream, cuts, fc.nat({ max: 1e9 }), (data, cutPoints, startOffset) => {
        const whole = stripPieces([data], startOffset);
        const pieces = stripPieces(split(data, cutPoints), startOffset);
        expect(pieces).toEqual(whole);
        expect(whole.text).toBe(stripTerminal(data));
        expect(whole.offset).toBe(startOffset + data.length);
      }),
      { numRuns: 400 },
    );
  });

  it("property: each character's [start, end) decodes to it (or is the \\r\\n it came from)", () => {
    fc.assert(
      fc.property(stream, cuts, (data, cutPoints) => {
        const { text, starts, ends } = stripPieces(split(data, cutPoints));
        let previousEnd = 0;
        for (let i = 0; i < text.length; i++) {
          const slice = data.subarray(starts[i], ends[i]);
          const code = text.codePointAt(i) as number;
          const char = String.fromCodePoint(code);
          if (char === "\n" && slice.length === 2) expect([...slice]).toEqual([0x0d, 0x0a]);
          else expect(utf8.decode(slice)).toBe(char);
          // Ranges are in order and never overlap; both halves of a surrogate pair share one.
          expect(starts[i]).toBeGreaterThanOrEqual(previousEnd);
          previousEnd = ends[i] as number;
          if (code > 0xffff) {
            i++;
            expect([starts[i], ends[i]]).toEqual([starts[i - 1], ends[i - 1]]);
          }
        }
        expect([...text].filter((c) => isDroppedControl(c.charCodeAt(0)))).toEqual([]);
      }),
      { numRuns: 400 },
    );
  });

  it("property: without escapes and controls, the text is TextDecoder's", () => {
    const plain = fc.uint8Array({ maxLength: 200 }).map((data) => data.map((b) => (b < 0x20 || b === 0x7f ? 0x41 : b)));
    fc.assert(
      fc.property(plain, cuts, (data, cutPoints) => {
        const expected = utf8.decode(data).replace(/[\u0080-\u009f]/g, "");
        expect(stripPieces(split(data, cutPoints)).text).toBe(expected);
      }),
    );
  });
});
