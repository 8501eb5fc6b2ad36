import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_SHELL_MARK_BODY_BYTES, type ShellMark, ShellMarkScanner } from "./shell-marks.js";
import { bytes, concat, cuts, split, stream, stripPieces } from "./terminal-text.test-kit.js";

/** OSC bodies ignore C0 controls, so generated params leave them out. */
const withoutControls = (s: string) => [...s].map((c) => (c.charCodeAt(0) < 0x20 || c === "\x7f" ? "." : c)).join("");

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
