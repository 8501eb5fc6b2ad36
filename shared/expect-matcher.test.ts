import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EXPECT_WINDOW_CHARS, ExpectMatcher, MAX_EXPECT_PROGRAM } from "./expect-matcher.js";
import { bytes, cuts, split, stream } from "./terminal-text.test-kit.js";
import { TextStripper, stripTerminal } from "./text-stripper.js";

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
    expect(ExpectMatcher.validate("(", false, "")).toBe("pattern: missing closing ): `(` (expect patterns use RE2 syntax)");
    expect(ExpectMatcher.validate("a[", false, "")).toBe("pattern: missing closing ]: `[` (expect patterns use RE2 syntax)");
    expect(ExpectMatcher.validate("a{2,1}", false, "")).toMatch(/^pattern: invalid repeat count \{2,1\}: counts are at most 1000/);
    expect(ExpectMatcher.validate("a{1001}", false, "")).toMatch(/^pattern: invalid repeat count \{1001\}/);
    expect(ExpectMatcher.validate("\\u00e9", false, "u")).toBe("pattern: \\u escapes are not RE2 syntax: write \\x{HHHH} (e.g. \\x{e9} for é)");
    expect(ExpectMatcher.validate("\\-", false, "u")).toBeNull(); // RE2 takes any escaped punctuation
  });

  it("refuses what RE2 cannot run in linear time, saying why: backreferences and lookaround", () => {
    const why = "expect patterns use RE2 syntax and run in linear time";
    expect(ExpectMatcher.validate("(a)\\1", false, "")).toBe(`pattern: backreferences (\\1) are not supported: ${why}`);
    expect(ExpectMatcher.validate("(a)(b)\\2+", false, "i")).toBe(`pattern: backreferences (\\2) are not supported: ${why}`);
    expect(ExpectMatcher.validate("(?<q>['\"]).*\\k<q>", false, "")).toBe(`pattern: backreferences (\\k<name>) are not supported: ${why}`);
    expect(ExpectMatcher.validate("\\$ (?=$)", false, "m")).toBe(`pattern: lookahead ((?=) is not supported: ${why}`);
    expect(ExpectMatcher.validate("error(?!: none)", false, "")).toBe(`pattern: lookahead ((?!) is not supported: ${why}`);
    expect(ExpectMatcher.validate("(?<=\\$ )ls", false, "")).toBe(`pattern: lookbehind ((?<=) is not supported: ${why}`);
    expect(ExpectMatcher.validate("(?<!no )match", false, "")).toBe(`pattern: lookbehind ((?<!) is not supported: ${why}`);
    // The same characters as a literal are just text.
    expect(ExpectMatcher.validate("(a)\\1 (?=x)", true, "")).toBeNull();
    expect(ExpectMatcher.validate("(a)\\1 (?=x)", true, "i")).toBeNull();
  });

  it("refuses patterns whose program is too large, before compiling the huge ones", () => {
    expect(ExpectMatcher.validate("\\w{1,30}", false, "")).toBeNull();
    expect(ExpectMatcher.programSize("\\w{1,30}", false, "")).toBe(61);
    expect(ExpectMatcher.programSize("x".repeat(4096), true, "")).toBe(1); // indexOf
    expect(ExpectMatcher.validate("\\w{1,255}", false, "")).toMatch(
      new RegExp(`^pattern: too large: it compiles to 511 RE2 instructions, at most ${MAX_EXPECT_PROGRAM} `),
    );
    // 585 repeats of a{1000}: 585,002 instructions, a second and 100 MB to compile; refused unread.
    expect(ExpectMatcher.validate("a{1000}".repeat(585), false, "")).toMatch(new RegExp(`^pattern: too large: it compiles to more than ${16 * MAX_EXPECT_PROGRAM} RE2`));
    expect(ExpectMatcher.validate("(?:(?:x{10}){10}){10}", false, "")).toMatch(/^pattern: too large/);
    // A literal is not compiled unless it must fold case: 4096 characters are fine as they are.
    expect(ExpectMatcher.validate("x".repeat(4096), true, "")).toBeNull();
    expect(ExpectMatcher.validate("x".repeat(200), true, "i")).toMatch(/^pattern: too large: it compiles to 202 RE2/);
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

  it("finds catastrophic backtracking patterns' answer over a full window of a's at once", () => {
    // A whole window of one letter, then a tail; the answer in short (a failure never prints 64 Ki).
    const run = (pattern: string, flags: string, letter: string, tail: string) => {
      const found = matcher(pattern, { flags }).push(0, bytes(letter.repeat(EXPECT_WINDOW_CHARS - tail.length) + tail));
      return found && { start: found.start, end: found.end, groups: found.groups.map((g) => g?.length ?? null) };
    };
    // Each is exponential on a backtracking engine (the first took 8 s for 29 a's on the edge).
    expect(run("^(a|a)+b$", "m", "a", "!\n")).toBeNull();
    expect(run("(a+)+$", "", "a", "!")).toBeNull();
    expect(run("(x+x+)+y", "", "x", "x")).toBeNull();
    expect(run("(?:a|aa)+(?:b|\\d)$", "", "a", "!")).toBeNull();
    expect(run("(\\w+\\s?)*\\$ $", "", "a", "!")).toBeNull();
    // And they still match when the text lets them: the whole window is searched.
    expect(run("^(a|a)+b$", "m", "a", "b")).toEqual({ start: 0, end: EXPECT_WINDOW_CHARS, groups: [1] });
    expect(run("(a+)+!", "", "a", "!")).toEqual({ start: 0, end: EXPECT_WINDOW_CHARS, groups: [EXPECT_WINDOW_CHARS - 1] });
    expect(run("(x+x+)+y", "", "x", "y")).toEqual({ start: 0, end: EXPECT_WINDOW_CHARS, groups: [EXPECT_WINDOW_CHARS - 1] });
  });

  it("gives exact raw offsets with emoji and CJK around and inside the match", () => {
    const text = "中😀 x😀y 文 z中z 😀";
    const at = (s: string) => Buffer.byteLength(text.slice(0, text.indexOf(s)));
    // `.` is one character, a whole surrogate pair too (RE2 reads code points).
    expect(matcher("x.y").push(0, bytes(text))).toEqual({ match: "x😀y", groups: [], start: at("x"), end: at("x") + 6 });
    expect(matcher("(.)(z)(.)z").push(0, bytes(text))).toEqual({ match: " z中z", groups: [" ", "z", "中"], start: at(" z"), end: at(" z") + 6 });
    expect(matcher("文 (z\\p{Han})").push(0, bytes(text))).toEqual({ match: "文 z中", groups: ["z中"], start: at("文"), end: at("文") + 8 });
    expect(matcher("😀$").push(0, bytes(text))).toEqual({ match: "😀", groups: [], start: Buffer.byteLength(text) - 4, end: Buffer.byteLength(text) });
    expect(matcher("😀 x", { literal: true }).push(0, bytes(text))).toEqual({ match: "😀 x", groups: [], start: at("😀 x"), end: at("😀 x") + 6 });
    // A literal of half a pair never matches inside one, as RE2 never would.
    expect(matcher("\ude00", { literal: true }).push(0, bytes(text))).toBeNull();
    expect(matcher("中\ud83d", { literal: true }).push(0, bytes(text))).toBeNull();
    // Across pushes, the emoji split between them.
    const data = bytes(text);
    for (let cut = 0; cut <= data.length; cut++) {
      const m = matcher("y (\\S) z");
      const first = m.push(0, data.subarray(0, cut));
      expect(m.push(cut, data.subarray(cut)) ?? first).toEqual({ match: "y 文 z", groups: ["文"], start: at("y"), end: at("y") + 7 });
    }
  });

  it("applies the flags i, m and s; u changes nothing (RE2 reads Unicode anyway)", () => {
    const text = "First LINE\nsecond line\nÉté";
    const find = (pattern: string, flags: string) => matcher(pattern, { flags }).push(0, bytes(text))?.match ?? null;
    expect(find("line", "")).toBe("line");
    expect(find("first line", "")).toBeNull();
    expect(find("first line", "i")).toBe("First LINE");
    expect(find("été", "i")).toBe("Été");
    expect(find("^second line$", "")).toBeNull();
    expect(find("^second line$", "m")).toBe("second line");
    expect(find("^first", "im")).toBe("First");
    expect(find("LINE.second", "")).toBeNull();
    expect(find("LINE.second", "s")).toBe("LINE\nsecond");
    expect(find("é$", "")).toBe("é");
    expect(find("^.té$", "m")).toBe("Été");
    expect(find("^.té$", "mu")).toBe("Été");
    // Case folding is Unicode's with or without u (JavaScript's /k/i alone does not find the Kelvin sign).
    expect(matcher("kelvin", { flags: "i" }).push(0, bytes("0 \u212Aelvin"))).toMatchObject({ match: "\u212Aelvin", start: 2, end: 10 });
    // Flags may also be set inside the pattern, RE2's way.
    expect(find("(?i)second LINE$", "m")).toBe("second line");
    expect(find("(?s:LINE.)second", "")).toBe("LINE\nsecond");
    expect(matcher("first", { literal: true, flags: "i" }).push(0, bytes(text))).toMatchObject({ match: "First", start: 0, end: 5 });
  });

  it("finds literals without the engine: the first occurrence, metacharacters as themselves", () => {
    const long = "[y/N]? ".repeat(585); // 4095 characters, far beyond what the engine takes
    expect(ExpectMatcher.programSize(long, true, "")).toBe(1);
    expect(ExpectMatcher.validate(long, true, "i")).toMatch(/^pattern: too large/); // folding case takes the engine
    const m = matcher(long, { literal: true });
    expect(m.push(0, bytes("> " + long))).toEqual({ match: long, groups: [], start: 2, end: 2 + long.length });
    expect(matcher("a+b", { literal: true }).push(0, bytes("aab a+b a+b"))).toEqual({ match: "a+b", groups: [], start: 4, end: 7 });
    expect(matcher("$", { literal: true }).push(0, bytes("x$ $"))).toEqual({ match: "$", groups: [], start: 1, end: 2 });
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
