// Numbered input on the wire (docs/protocol.md §5 and §7, "Input exactly once"): a writer's 0x07
// frames (client → edge), the edge's 0x08 frames that name the writer (edge → runner), and the
// runner's input_ack. Round trips, and every malformed shape refused with a reason.
import { describe, expect, it } from "vitest";
import {
  NUMBERED_INPUT_HEADER_BYTES,
  Op,
  RunnerLinkMessage,
  WRITER_ID_PATTERN,
  decodeFrame,
  encodeNumberedInput,
  encodeWriterInput,
  isWriterKey,
  parseMessage,
} from "./protocol.js";

const allBytes = Uint8Array.from({ length: 256 }, (_, i) => i);

describe("encodeNumberedInput / decodeFrame (0x07)", () => {
  it.each([0, 1, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER])("round-trips every byte value at offset %d", (offset) => {
    const frame = encodeNumberedInput(offset, allBytes);
    expect(frame[0]).toBe(Op.NumberedInput);
    expect(frame.byteLength).toBe(NUMBERED_INPUT_HEADER_BYTES + 256);
    expect(decodeFrame(frame)).toEqual({ op: "numberedInput", offset, data: allBytes });
  });

  it("round-trips an empty payload, and one inside a larger buffer", () => {
    expect(decodeFrame(encodeNumberedInput(7, new Uint8Array()))).toEqual({ op: "numberedInput", offset: 7, data: new Uint8Array() });
    const frame = encodeNumberedInput(3, Uint8Array.from([0x61]));
    const backing = new Uint8Array(frame.byteLength + 4).fill(0xff);
    backing.set(frame, 2);
    expect(decodeFrame(backing.subarray(2, 2 + frame.byteLength))).toEqual({ op: "numberedInput", offset: 3, data: Uint8Array.from([0x61]) });
  });

  it("refuses a bad offset to encode", () => {
    for (const offset of [-1, 1.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN]) {
      expect(() => encodeNumberedInput(offset, allBytes)).toThrow(RangeError);
    }
  });

  it("decodes a short header or an offset past 2^53 as invalid", () => {
    expect(decodeFrame(Uint8Array.from([Op.NumberedInput, 0, 0, 0]))).toEqual({ op: "invalid", reason: "numbered input frame shorter than its header" });
    const frame = encodeNumberedInput(0, Uint8Array.from([1]));
    new DataView(frame.buffer).setUint32(1, 0xffffffff);
    expect(decodeFrame(frame)).toEqual({ op: "invalid", reason: "offset out of range" });
  });
});

describe("encodeWriterInput / decodeFrame (0x08)", () => {
  const key = "k_abc123|Wr1t3r-Id_0123456789";

  it.each([0, 41, 2 ** 40])("round-trips the writer key, the offset %d, its base and every byte value", (offset) => {
    for (const base of [0, Math.floor(offset / 2), offset]) {
      const frame = encodeWriterInput(key, offset, base, allBytes);
      expect(frame[0]).toBe(Op.WriterInput);
      expect(frame[1]).toBe(key.length);
      expect(decodeFrame(frame)).toEqual({ op: "writerInput", writer: key, offset, base, data: allBytes });
    }
  });

  it("refuses a base past the offset, to encode and to decode", () => {
    expect(() => encodeWriterInput(key, 5, 6, allBytes)).toThrow(RangeError);
    const frame = encodeWriterInput(key, 5, 5, allBytes);
    new DataView(frame.buffer).setUint32(14 + key.length, 6); // base's low word
    expect(decodeFrame(frame)).toEqual({ op: "invalid", reason: "base out of range" });
  });

  it("takes a key of 255 characters, and none longer, empty or not printable ASCII", () => {
    const longest = "x".repeat(255);
    expect(decodeFrame(encodeWriterInput(longest, 0, 0, allBytes))).toMatchObject({ op: "writerInput", writer: longest });
    for (const bad of ["", "x".repeat(256), "has space", "é", "tab\t"]) {
      expect(() => encodeWriterInput(bad, 0, 0, allBytes)).toThrow(RangeError);
    }
  });

  it("decodes malformed frames as invalid, with a reason", () => {
    const cases: [Uint8Array, string][] = [
      [Uint8Array.from([Op.WriterInput]), "writer input frame shorter than its header"],
      [Uint8Array.from([Op.WriterInput, 0, ...new Uint8Array(16)]), "writer input frame with an empty writer key"],
      [Uint8Array.from([Op.WriterInput, 4, 0x61, 0x62]), "writer input frame shorter than its header"],
      [Uint8Array.from([Op.WriterInput, 1, 0x61, ...new Uint8Array(15)]), "writer input frame shorter than its header"],
      [Uint8Array.from([Op.WriterInput, 1, 0x20, ...new Uint8Array(16)]), "writer key is not printable ASCII"],
      [Uint8Array.from([Op.WriterInput, 1, 0xc3, ...new Uint8Array(16)]), "writer key is not printable ASCII"],
    ];
    for (const [frame, reason] of cases) expect(decodeFrame(frame)).toEqual({ op: "invalid", reason });
    const past = encodeWriterInput("k", 0, 0, allBytes);
    new DataView(past.buffer).setUint32(3, 0x00400000); // the high word: offset 2^54
    expect(decodeFrame(past)).toEqual({ op: "invalid", reason: "offset out of range" });
  });

  it("names writers as the edge does: a writer id fits the pattern, and `<actor>|<id>` is a key", () => {
    for (const id of ["abcdefgh", "A".repeat(64), "Zz09_-Zz09_-Zz09_-Zz09"]) expect(WRITER_ID_PATTERN.test(id)).toBe(true);
    for (const id of ["short", "A".repeat(65), "has space", "dot.ted-id", "é-é-é-é-é"]) expect(WRITER_ID_PATTERN.test(id)).toBe(false);
    expect(isWriterKey("tok:0123abcd|abcdefgh")).toBe(true);
    expect(isWriterKey("")).toBe(false);
  });
});

describe("parseMessage(RunnerLinkMessage): input_ack", () => {
  it("takes one to 1024 writers' offsets, with an optional resend", () => {
    const acks = [
      { writer: "k|abcdefgh", offset: 0 },
      { writer: "k|ijklmnop", offset: 12, resend: true },
    ];
    expect(parseMessage(RunnerLinkMessage, JSON.stringify({ type: "input_ack", acks }))).toEqual({ ok: true, value: { type: "input_ack", acks } });
    const many = Array.from({ length: 1024 }, (_, i) => ({ writer: `k|w${i}`, offset: i }));
    expect(parseMessage(RunnerLinkMessage, JSON.stringify({ type: "input_ack", acks: many }), 1 << 20).ok).toBe(true);
  });

  it.each([
    ["no writers", { acks: [] }],
    ["too many writers", { acks: Array.from({ length: 1025 }, () => ({ writer: "k|w", offset: 0 })) }],
    ["a negative offset", { acks: [{ writer: "k|w", offset: -1 }] }],
    ["a fractional offset", { acks: [{ writer: "k|w", offset: 0.5 }] }],
    ["a writer key with a space", { acks: [{ writer: "k w", offset: 0 }] }],
    ["resend: false", { acks: [{ writer: "k|w", offset: 0, resend: false }] }],
  ])("refuses %s", (_, body) => {
    expect(parseMessage(RunnerLinkMessage, JSON.stringify({ type: "input_ack", ...body }), 1 << 20).ok).toBe(false);
  });
});
