import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  EXPECT_WINDOW_CHARS,
  ExpectMatcher,
  MAX_SHELL_MARK_BODY_BYTES,
  MAX_STRING_SEQUENCE_BYTES,
  ShellMarkScanner,
  type ShellMark,
  type StrippedText,
  TextStripper,
  stripTerminal,
} from "./terminal-text.js";

const encoder = new TextEncoder();
const bytes = (text: string) => encoder.encode(text);
const raw = (...values: number[]) => Uint8Array.from(values);
const concat = (parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
};

/** Splits `data` at the given cut points (any numbers: taken modulo the length, sorted). */
function split(data: Uint8Array, cuts: number[]): Uint8Array[] {
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
function stripPieces(pieces: Uint8Array[], startOffset = 0) {
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
const stream = fc
  .array(fc.oneof(fc.constantFrom(...fragments), fc.constantFrom(...badBytes), fc.uint8Array({ maxLength: 6 })), { maxLength: 60 })
  .map(concat);
const cuts = fc.array(fc.nat(), { maxLength: 12 });

const utf8 = new TextDecoder();
/** What the text never holds: C0 controls but \t and \n, DEL, C1 controls. */
const isDroppedControl = (c: number) => (c < 0x20 && c !== 0x09 && c !== 0x0a) || (c >= 0x7f && c <= 0x9f);
/** OSC bodies ignore C0 controls, so generated params leave them out. */
const withoutControls = (s: string) => [...s].map((c) => (c.charCodeAt(0) < 0x20 || c === "\x7f" ? "." : c)).join("");

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

describe("ExpectMatcher.validate", () => {
  it("accepts patterns and the flags i, m, s, u in any order", () => {
    expect(ExpectMatcher.validate("\\$ $", false, "")).toBeNull();
    expect(ExpectMatcher.validate("a(b)?", false, "usmi")).toBeNull();
    expect(ExpectMatcher.validate("(x", true, "u")).toBeNull(); // literal: metacharacters are escaped
    expect(ExpectMatcher.validate("a-b/c", true, "u")).toBeNull();
  });

  it("rejects empty and over-long patterns, other or repeated flags, and bad regexes", () => {
    expect(ExpectMatcher.validate("", false, "")).toMatch(/^pattern: .*empty/);
    expect(ExpectMatcher.validate("x".repeat(4097), true, "")).toMatch(/^pattern: .*4096/);
    expect(ExpectMatcher.validate("x".repeat(4096), true, "")).toBeNull();
    for (const flag of ["g", "y", "d", "v", "x"]) expect(ExpectMatcher.validate("a", false, flag)).toMatch(/^flags: /);
    expect(ExpectMatcher.validate("a", false, "ii")).toMatch(/^flags: .*repeated/);
    expect(ExpectMatcher.validate("(", false, "")).toMatch(/^pattern: Invalid regular expression/);
    expect(ExpectMatcher.validate("\\-", false, "u")).toMatch(/^pattern: Invalid regular expression/);
  });

  it("makes the constructor throw the same message", () => {
    expect(() => new ExpectMatcher({ pattern: "(", literal: false, flags: "", from: 0 })).toThrow(/^pattern: /);
    expect(() => new ExpectMatcher({ pattern: "a", literal: false, flags: "g", from: 0 })).toThrow(/^flags: /);
  });
});

describe("ExpectMatcher", () => {
  const matcher = (pattern: string, options: { literal?: boolean; flags?: string; from?: number; windowChars?: number } = {}) =>
    new ExpectMatcher({
      pattern,
      literal: options.literal ?? false,
      flags: options.flags ?? "",
      from: options.from ?? 0,
      ...(options.windowChars === undefined ? {} : { windowChars: options.windowChars }),
    });

  it("matches across pushes, with absolute raw offsets", () => {
    const m = matcher("\\$ $", { from: 1000 });
    expect(m.push(1000, bytes("user@host:~"))).toBeNull();
    expect(m.push(1011, bytes("$"))).toBeNull();
    expect(m.push(1012, bytes(" "))).toEqual({ match: "$ ", groups: [], start: 1011, end: 1013 });
    expect(m.offset).toBe(1013);
  });

  it("matches through an escape sequence split across pushes", () => {
    const data = bytes("a\x1b[31mb");
    for (let cut = 0; cut <= data.length; cut++) {
      const m = matcher("ab");
      const first = m.push(0, data.subarray(0, cut));
      const result = m.push(cut, data.subarray(cut)) ?? first;
      expect(result).toEqual({ match: "ab", groups: [], start: 0, end: 7 });
    }
  });

  it("reads \\r\\n as \\n", () => {
    const m = matcher("x\ny");
    expect(m.push(0, bytes("x\r"))).toBeNull();
    expect(m.push(2, bytes("\ny"))).toEqual({ match: "x\ny", groups: [], start: 0, end: 4 });
  });

  it("gives multibyte characters their whole byte range", () => {
    const m = matcher("é+", { flags: "u" });
    const data = bytes("caféé!");
    expect(m.push(0, data.subarray(0, 4))).toBeNull(); // "caf" + half of é
    expect(m.push(4, data.subarray(4))).toEqual({ match: "éé", groups: [], start: 3, end: 7 });
    expect(matcher("😀").push(0, bytes("a😀b"))).toEqual({ match: "😀", groups: [], start: 1, end: 5 });
  });

  it("returns the numbered groups, null for those that did not take part", () => {
    const m = matcher("(\\d+) (files?)(?<x> left)?( done)?", { flags: "i" });
    expect(m.push(0, bytes("copied 12 FILES done"))).toEqual({
      match: "12 FILES done",
      groups: ["12", "FILES", null, " done"],
      start: 7,
      end: 20,
    });
  });

  it("matches a literal as itself", () => {
    expect(matcher("a.b", { literal: true }).push(0, bytes("axb"))).toBeNull();
    expect(matcher("a.b", { literal: true }).push(0, bytes("xa.b"))).toMatchObject({ match: "a.b", start: 1, end: 4 });
    expect(matcher("[y/n]?", { literal: true, flags: "iu" }).push(0, bytes("Continue [Y/N]? "))).toMatchObject({
      match: "[Y/N]?",
      start: 9,
    });
  });

  it("skips bytes it already has (overlap), and throws on a hole", () => {
    const m = matcher("bcde");
    expect(m.push(0, bytes("abc"))).toBeNull();
    expect(m.push(1, bytes("bcd"))).toBeNull(); // "bc" again, then "d"
    expect(m.offset).toBe(4);
    expect(m.push(0, bytes("ab"))).toBeNull(); // entirely old
    expect(() => m.push(5, bytes("x"))).toThrow(RangeError);
    expect(m.push(2, bytes("cdef"))).toEqual({ match: "bcde", groups: [], start: 1, end: 5 });
  });

  it("keeps returning the first match once matched", () => {
    const m = matcher("o+");
    const first = m.push(0, bytes("foo"));
    expect(first).toEqual({ match: "oo", groups: [], start: 1, end: 3 });
    expect(m.push(3, bytes("ooo"))).toEqual(first);
    expect(m.push(99, bytes("x"))).toEqual(first);
  });

  it("does not find a match entirely older than the window", () => {
    const m = matcher("needle", { windowChars: 100 });
    expect(m.push(0, bytes("needle" + "x".repeat(100)))).toBeNull();
    const fresh = matcher("needle", { windowChars: 100 });
    expect(fresh.push(0, bytes("need"))).toBeNull();
    expect(fresh.push(4, bytes("x".repeat(200) + "le"))).toBeNull();
    expect(fresh.push(206, bytes("needle"))).toEqual({ match: "needle", groups: [], start: 206, end: 212 });
  });

  it("keeps the window within its limit, never cutting a surrogate pair", () => {
    const m = matcher("b", { windowChars: 2, flags: "u" });
    expect(m.push(0, bytes("😀"))).toBeNull();
    expect(m.push(4, bytes("b"))).toEqual({ match: "b", groups: [], start: 4, end: 5 });
    expect((m as unknown as { text: string }).text).toBe("b"); // not "\ude00b"
    fc.assert(
      fc.property(stream, cuts, fc.integer({ min: 2, max: 40 }), (data, cutPoints, windowChars) => {
        const m = matcher("\u0000never", { windowChars });
        let at = 0;
        for (const piece of split(data, cutPoints)) {
          expect(m.push(at, piece)).toBeNull();
          at += piece.length;
          expect(m.windowLength).toBeLessThanOrEqual(windowChars);
        }
        // The window is the tail of the whole text.
        const text = new TextStripper(0).push(data).text;
        const tail = (m as unknown as { text: string }).text;
        expect(text.endsWith(tail) || tail === "").toBe(true);
        expect(/^[\udc00-\udfff]/.test(tail)).toBe(false);
      }),
    );
  });

  it("survives a flood with bounded memory and one search per push", () => {
    const chunk = bytes(("\x1b[32mbuild step ok\x1b[0m é\r\n").repeat(2979).slice(0, 65536));
    const m = matcher("DONE (\\d+)");
    let at = 0;
    for (let i = 0; i < 128; i++) {
      expect(m.push(at, chunk)).toBeNull();
      at += chunk.length;
      expect(m.windowLength).toBeLessThanOrEqual(EXPECT_WINDOW_CHARS);
    }
    expect(m.push(at, bytes("DONE 42\r\n"))).toMatchObject({ match: "DONE 42", groups: ["42"], start: at, end: at + 7 });
    expect(m.windowLength).toBe(EXPECT_WINDOW_CHARS);
    // Its speed is measured by `npm run bench`, not here (no timing thresholds in tests).
  });

  it("property: the same match however the output is split", () => {
    const needle = fc.constantFrom("ab", "é\n", "\\$ ", "133;", "\\d+");
    fc.assert(
      fc.property(stream, cuts, needle, (data, cutPoints, pattern) => {
        const whole = matcher(pattern).push(0, data);
        const m = matcher(pattern);
        let at = 0;
        let found = null;
        for (const piece of split(data, cutPoints)) {
          found = m.push(at, piece) ?? found;
          at += piece.length;
        }
        if (whole === null) expect(found).toBeNull();
        else if (found !== null && pattern !== "\\d+") expect(found).toEqual(whole); // \d+ may match less, earlier
        if (found !== null) expect(stripTerminal(data.subarray(found.start, found.end))).toContain(found.match);
      }),
      { numRuns: 300 },
    );
  });
});

describe("ShellMarkScanner", () => {
  const scan = (data: Uint8Array, startOffset = 0) => new ShellMarkScanner(startOffset).push(startOffset, data);

  it("finds A, B, C and D with BEL or ST, with exit codes and params", () => {
    const data = bytes(
      "\x1b]133;A\x07$ \x1b]133;B\x1b\\ls\r\n\x1b]133;C\x07out\r\n" +
        "\x1b]133;D;2\x07\x1b]133;D\x07\x1b]133;D;x\x07\x1b]133;D;0;aid=7\x1b\\",
    );
    const marks = scan(data, 50);
    expect(marks.map(({ kind, exitCode, params }) => ({ kind, exitCode, params }))).toEqual([
      { kind: "A", exitCode: null, params: "" },
      { kind: "B", exitCode: null, params: "" },
      { kind: "C", exitCode: null, params: "" },
      { kind: "D", exitCode: 2, params: "2" },
      { kind: "D", exitCode: null, params: "" },
      { kind: "D", exitCode: null, params: "x" },
      { kind: "D", exitCode: 0, params: "0;aid=7" },
    ]);
    expect(marks[0]).toMatchObject({ start: 50, end: 58 });
    expect(marks[1]).toMatchObject({ start: 60, end: 69 });
    const text = String.fromCharCode(...data);
    for (const mark of marks) {
      const sequence = text.slice(mark.start - 50, mark.end - 50);
      expect(sequence.startsWith(`\x1b]133;${mark.kind}`)).toBe(true);
      expect(sequence.endsWith("\x07") || sequence.endsWith("\x1b\\")).toBe(true);
    }
  });

  it("ignores other OSCs and other 133 letters", () => {
    const data = bytes("\x1b]0;title 133;A\x07\x1b]1337;SetMark\x07\x1b]1330;A\x07\x1b]133;Z\x07\x1b]133;AB\x07\x1b]133\x07\x1b[133;A\x07x");
    expect(scan(data)).toEqual([]);
  });

  it("takes a mark that follows an unterminated one, from its own ESC", () => {
    const data = bytes("\x1b]133;A\x1b]133;B\x07\x1b]133;C\x1b[0m\x1bP\x1b]133;D;1\x07");
    const marks = scan(data);
    expect(marks.map((m) => [m.kind, m.start, m.end])).toEqual([
      ["B", 7, 15],
      ["D", 28, 38],
    ]);
  });

  it("abandons a body longer than 4096 bytes", () => {
    const long = "x".repeat(MAX_SHELL_MARK_BODY_BYTES - 6);
    expect(scan(bytes(`\x1b]133;A;${long}\x07`))).toHaveLength(1);
    expect(scan(bytes(`\x1b]133;A;${long}x\x07`))).toEqual([]);
    expect(scan(bytes(`\x1b]133;A;${long}x\x07\x1b]133;B\x07`)).map((m) => m.kind)).toEqual(["B"]);
  });

  it("throws when a push does not start where the last one ended", () => {
    const scanner = new ShellMarkScanner(10);
    expect(scanner.push(10, bytes("abc"))).toEqual([]);
    expect(() => scanner.push(12, bytes("x"))).toThrow(RangeError);
    expect(() => scanner.push(14, bytes("x"))).toThrow(RangeError);
    expect(scanner.push(13, bytes("\x1b]133;A\x07"))).toEqual([{ kind: "A", exitCode: null, params: "", start: 13, end: 21 }]);
  });

  /** Output with marks in known places, between noise that holds no mark. */
  const markedStream = fc
    .array(
      fc.oneof(
        fc.record({
          kind: fc.constantFrom("A", "B", "C", "D"),
          params: fc.option(
            fc.oneof(fc.integer({ min: -1, max: 255 }).map(String), fc.string({ maxLength: 8 }).map(withoutControls)),
            { nil: undefined },
          ),
          st: fc.boolean(),
        }),
        fc.constantFrom("plain text\r\n", "\x1b[1;32m", "\x1b]0;133;A\x07", "\x1b]1337;x\x1b\\", "é😀", "\x1b", "\x07", "\x1bP133;A\x1b\\"),
      ),
      { maxLength: 20 },
    )
    .map((tokens) => {
      const parts: Uint8Array[] = [];
      const expected: Omit<ShellMark, "start" | "end">[] = [];
      const ranges: [number, number][] = [];
      let at = 0;
      for (const token of tokens) {
        let part: Uint8Array;
        if (typeof token === "string") {
          // A lone ESC would swallow what follows; keep it from touching the next token.
          part = bytes(token === "\x1b" ? "\x1bx" : token);
        } else {
          const params = token.params ?? "";
          part = bytes(`\x1b]133;${token.kind}${token.params === undefined ? "" : `;${params}`}${token.st ? "\x1b\\" : "\x07"}`);
          const field = params.split(";")[0] as string;
          const code = /^-?\d+$/.test(field) ? Number(field) : null;
          expected.push({ kind: token.kind, exitCode: token.kind === "D" ? code : null, params });
          ranges.push([at, at + part.length]);
        }
        parts.push(part);
        at += part.length;
      }
      return { data: concat(parts), expected, ranges };
    });

  it("property: finds exactly the marks put in, however the output is split", () => {
    fc.assert(
      fc.property(markedStream, cuts, fc.nat({ max: 1e9 }), ({ data, expected, ranges }, cutPoints, base) => {
        const scanner = new ShellMarkScanner(base);
        const marks: ShellMark[] = [];
        let at = base;
        for (const piece of split(data, cutPoints)) {
          marks.push(...scanner.push(at, piece));
          at += piece.length;
        }
        expect(marks.map(({ kind, exitCode, params }) => ({ kind, exitCode, params }))).toEqual(expected);
        expect(marks.map((m) => [m.start - base, m.end - base])).toEqual(ranges);
        expect(scanner.offset).toBe(base + data.length);
      }),
      { numRuns: 400 },
    );
  });

  it("property: any byte stream gives the same marks whole or split, and TextStripper removes them all", () => {
    fc.assert(
      fc.property(stream, cuts, (data, cutPoints) => {
        const whole = scan(data);
        const scanner = new ShellMarkScanner(0);
        const marks: ShellMark[] = [];
        let at = 0;
        for (const piece of split(data, cutPoints)) {
          marks.push(...scanner.push(at, piece));
          at += piece.length;
        }
        expect(marks).toEqual(whole);
        const { starts } = stripPieces([data]);
        for (const mark of whole) expect(starts.some((s) => s >= mark.start && s < mark.end)).toBe(false);
      }),
      { numRuns: 300 },
    );
  });
});
