import { describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  ClientMessage,
  DEFLATED_HEADER_BYTES,
  EdgeLinkMessage,
  MAX_DEFLATED_OUTPUT_BYTES,
  MAX_CONTROL_BYTES,
  OUTPUT_HEADER_BYTES,
  Op,
  type ParseResult,
  PoolMessage,
  RunnerControlMessage,
  RunnerLinkMessage,
  READ_CHUNK_HEADER_BYTES,
  UNKNOWN_META,
  checkInflated,
  decodeFrame,
  encodeDeflated,
  encodeInput,
  encodeOutput,
  encodeReadChunk,
  encodeScreen,
  parseMessage,
} from "./protocol.js";
import { SIGNALS } from "./session.js";

const allBytes = Uint8Array.from({ length: 256 }, (_, i) => i);

/** Writes a raw Output frame header with an arbitrary u64 offset (high and low 32-bit words). */
function rawOutputFrame(high: number, low: number, payload: Uint8Array = new Uint8Array()): Uint8Array {
  const frame = new Uint8Array(OUTPUT_HEADER_BYTES + payload.byteLength);
  const view = new DataView(frame.buffer);
  frame[0] = Op.Output;
  view.setUint32(1, high);
  view.setUint32(5, low);
  frame.set(payload, OUTPUT_HEADER_BYTES);
  return frame;
}

function expectOk<T>(result: ParseResult<T>): T {
  if (!result.ok) throw new Error(`expected ok, got: ${result.reason}`);
  return result.value;
}

function expectRejected<T>(schema: z.ZodType<T>, text: string, maxBytes?: number): string {
  let result: ParseResult<T> | undefined;
  expect(() => {
    result = parseMessage(schema, text, maxBytes);
  }).not.toThrow();
  if (result === undefined) throw new Error("parseMessage returned nothing");
  expect(result.ok).toBe(false);
  if (result.ok) throw new Error("unreachable");
  expect(typeof result.reason).toBe("string");
  expect(result.reason.length).toBeGreaterThan(0);
  return result.reason;
}

describe("encodeScreen / decodeFrame", () => {
  it("round-trips a repaint at an offset, as a screen frame (not output)", () => {
    const repaint = new TextEncoder().encode("\x1b[H\x1b[2Jhello\x1b[1;6H");
    const frame = encodeScreen(2 ** 33 + 7, repaint);
    expect(frame[0]).toBe(Op.Screen);
    expect(frame[0]).toBe(0x04);
    const decoded = decodeFrame(frame);
    expect(decoded).toEqual({ op: "screen", offset: 2 ** 33 + 7, data: repaint });
  });

  it("rejects a screen frame shorter than its header and a negative offset", () => {
    const short = decodeFrame(Uint8Array.from([Op.Screen, 0, 0]));
    expect(short).toEqual({ op: "invalid", reason: "screen frame shorter than its header" });
    expect(() => encodeScreen(-1, new Uint8Array())).toThrow(RangeError);
  });
});

describe("encodeDeflated / decodeFrame (0x06)", () => {
  it("round-trips the offset, stream, length and the compressed bytes as they are", () => {
    const compressed = Uint8Array.from([0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]);
    const frame = encodeDeflated(2 ** 40 + 3, 5, compressed, "stderr");
    expect(frame[0]).toBe(Op.Deflated);
    expect(frame[0]).toBe(0x06);
    expect(frame.byteLength).toBe(DEFLATED_HEADER_BYTES + compressed.byteLength);
    expect(decodeFrame(frame)).toEqual({ op: "deflated", offset: 2 ** 40 + 3, stream: "stderr", length: 5, data: compressed });
    expect(decodeFrame(encodeDeflated(0, 0, new Uint8Array()))).toEqual({ op: "deflated", offset: 0, stream: "stdout", length: 0, data: new Uint8Array() });
  });

  it("refuses a short frame, an unknown stream, a length past the bound, and bad arguments", () => {
    expect(decodeFrame(Uint8Array.from([Op.Deflated, 0, 0, 0]))).toEqual({ op: "invalid", reason: "deflated frame shorter than its header" });
    const badStream = encodeDeflated(1, 1, Uint8Array.from([1]));
    badStream[9] = 2;
    expect(decodeFrame(badStream)).toEqual({ op: "invalid", reason: "unknown stream" });
    const huge = encodeDeflated(1, 1, Uint8Array.from([1]));
    new DataView(huge.buffer).setUint32(10, MAX_DEFLATED_OUTPUT_BYTES + 1);
    expect(decodeFrame(huge)).toEqual({ op: "invalid", reason: `deflated frame of ${MAX_DEFLATED_OUTPUT_BYTES + 1} bytes, more than ${MAX_DEFLATED_OUTPUT_BYTES}` });
    const farOffset = encodeDeflated(1, 1, Uint8Array.from([1]));
    new DataView(farOffset.buffer).setUint32(1, 0xffffffff);
    expect(decodeFrame(farOffset)).toEqual({ op: "invalid", reason: "offset out of range" });
    expect(() => encodeDeflated(-1, 1, new Uint8Array())).toThrow(RangeError);
    expect(() => encodeDeflated(0, MAX_DEFLATED_OUTPUT_BYTES + 1, new Uint8Array())).toThrow(RangeError);
  });

  it("checkInflated names the offset when what inflated is not the length the header says", () => {
    expect(() => checkInflated({ offset: 9, length: 3 }, Uint8Array.from([1, 2, 3]))).not.toThrow();
    expect(() => checkInflated({ offset: 9, length: 4 }, Uint8Array.from([1, 2, 3]))).toThrow(
      "deflated frame at offset 9: inflated to 3 bytes, its header says 4",
    );
  });
});

describe("encodeOutput / decodeFrame", () => {
  const offsets = [
    0,
    1,
    255,
    256,
    2 ** 32 - 1,
    2 ** 32,
    2 ** 32 + 1,
    2 ** 40 + 5,
    2 ** 52 + 3,
    Number.MAX_SAFE_INTEGER,
  ];

  it.each(offsets)("round-trips offset %d", (offset) => {
    const payload = new TextEncoder().encode("hello");
    const frame = encodeOutput(offset, payload);
    expect(frame.byteLength).toBe(OUTPUT_HEADER_BYTES + payload.byteLength);
    expect(frame[0]).toBe(Op.Output);
    const decoded = decodeFrame(frame);
    expect(decoded).toEqual({ op: "output", offset, data: payload });
  });

  it("writes the offset as a big-endian u64", () => {
    const frame = encodeOutput(2 ** 40 + 5, new Uint8Array());
    expect(Array.from(frame)).toEqual([0x01, 0, 0, 0x01, 0, 0, 0, 0, 0x05]);
    const max = encodeOutput(Number.MAX_SAFE_INTEGER, new Uint8Array());
    expect(Array.from(max)).toEqual([0x01, 0x00, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
  });

  it("round-trips an empty payload", () => {
    const frame = encodeOutput(42, new Uint8Array());
    expect(frame.byteLength).toBe(OUTPUT_HEADER_BYTES);
    const decoded = decodeFrame(frame);
    expect(decoded.op).toBe("output");
    if (decoded.op !== "output") return;
    expect(decoded.offset).toBe(42);
    expect(decoded.data.byteLength).toBe(0);
  });

  it("round-trips every byte value 0..255", () => {
    const decoded = decodeFrame(encodeOutput(7, allBytes));
    expect(decoded.op).toBe("output");
    if (decoded.op !== "output") return;
    expect(decoded.offset).toBe(7);
    expect(Array.from(decoded.data)).toEqual(Array.from(allBytes));
  });

  it("encodes a payload given as a subarray view", () => {
    const backing = Uint8Array.from([9, 9, 1, 2, 3, 9]);
    const decoded = decodeFrame(encodeOutput(3, backing.subarray(2, 5)));
    expect(decoded).toEqual({ op: "output", offset: 3, data: Uint8Array.from([1, 2, 3]) });
  });

  it.each([-1, -0.5, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1, 2 ** 64])(
    "rejects offset %d",
    (offset) => {
      expect(() => encodeOutput(offset, new Uint8Array())).toThrow(RangeError);
    },
  );
});

describe("encodeReadChunk / decodeFrame", () => {
  it("round-trips every byte value with its read id and offset", () => {
    const frame = encodeReadChunk(7, 2 ** 40 + 5, allBytes);
    expect(frame.byteLength).toBe(READ_CHUNK_HEADER_BYTES + 256);
    expect(frame[0]).toBe(Op.ReadChunk);
    const decoded = decodeFrame(frame);
    if (decoded.op !== "readChunk") throw new Error(`expected readChunk, got ${decoded.op}`);
    expect(decoded.readId).toBe(7);
    expect(decoded.offset).toBe(2 ** 40 + 5);
    expect(Array.from(decoded.data)).toEqual(Array.from(allBytes));
  });

  it("round-trips the largest read id and an empty payload", () => {
    const decoded = decodeFrame(encodeReadChunk(2 ** 32 - 1, 0, new Uint8Array()));
    expect(decoded).toEqual({ op: "readChunk", readId: 2 ** 32 - 1, offset: 0, meta: UNKNOWN_META, data: new Uint8Array() });
  });

  it("carries the chunk's stream, read time and terminal size", () => {
    const meta = { stream: "stderr", at: 1795481242117, cols: 132, rows: 43 } as const;
    const decoded = decodeFrame(encodeReadChunk(3, 99, Uint8Array.from([1, 2]), meta));
    expect(decoded).toEqual({ op: "readChunk", readId: 3, offset: 99, meta, data: Uint8Array.from([1, 2]) });
  });

  it.each([
    ["a stream that does not exist", (view: DataView) => view.setUint8(13, 2), "unknown stream"],
    ["a negative read time", (view: DataView) => view.setFloat64(14, -1), "bad read time"],
    ["a read time that is not a number", (view: DataView) => view.setFloat64(14, Number.NaN), "bad read time"],
  ])("refuses %s", (_what, spoil, reason) => {
    const frame = encodeReadChunk(1, 0, Uint8Array.from([7]));
    spoil(new DataView(frame.buffer));
    expect(decodeFrame(frame)).toEqual({ op: "invalid", reason });
  });
});

describe("stderr frames (0x03)", () => {
  it("round-trip in the same layout as output, told apart by their op", () => {
    const out = decodeFrame(encodeOutput(2 ** 40, Uint8Array.from([0x61])));
    const err = decodeFrame(encodeOutput(2 ** 40, Uint8Array.from([0x62]), "stderr"));
    expect(out).toEqual({ op: "output", offset: 2 ** 40, data: Uint8Array.from([0x61]) });
    expect(err).toEqual({ op: "stderr", offset: 2 ** 40, data: Uint8Array.from([0x62]) });
    expect(encodeOutput(0, new Uint8Array(), "stderr")[0]).toBe(Op.Stderr);
  });

  it("refuses one shorter than its header", () => {
    expect(decodeFrame(Uint8Array.from([Op.Stderr, 0, 0]))).toEqual({ op: "invalid", reason: "stderr frame shorter than its header" });
  });

  it.each([
    [-1, 0],
    [2 ** 32, 0],
    [1.5, 0],
    [0, -1],
    [0, 2 ** 53],
  ])("refuses read id %d and offset %d", (readId, offset) => {
    expect(() => encodeReadChunk(readId, offset, new Uint8Array())).toThrow(RangeError);
  });

  it("rejects a frame shorter than its header", () => {
    for (let n = 1; n < READ_CHUNK_HEADER_BYTES; n++) {
      const decoded = decodeFrame(encodeReadChunk(1, 1, new Uint8Array()).subarray(0, n));
      expect(decoded.op).toBe("invalid");
    }
  });

  it("rejects an offset beyond 2^53", () => {
    const frame = encodeReadChunk(1, 0, new Uint8Array([1]));
    new DataView(frame.buffer).setUint32(5, 0x00200000);
    expect(decodeFrame(frame)).toEqual({ op: "invalid", reason: "offset out of range" });
  });
});

describe("encodeInput / decodeFrame", () => {
  it("round-trips every byte value 0..255", () => {
    const frame = encodeInput(allBytes);
    expect(frame.byteLength).toBe(257);
    expect(frame[0]).toBe(Op.Input);
    const decoded = decodeFrame(frame);
    expect(decoded.op).toBe("input");
    if (decoded.op !== "input") return;
    expect(Array.from(decoded.data)).toEqual(Array.from(allBytes));
  });

  it("round-trips an empty payload", () => {
    const frame = encodeInput(new Uint8Array());
    expect(Array.from(frame)).toEqual([Op.Input]);
    const decoded = decodeFrame(frame);
    expect(decoded.op).toBe("input");
    if (decoded.op !== "input") return;
    expect(decoded.data.byteLength).toBe(0);
  });

  it("round-trips UTF-8 text", () => {
    const text = "ls -la é€😀\r";
    const decoded = decodeFrame(encodeInput(new TextEncoder().encode(text)));
    expect(decoded.op).toBe("input");
    if (decoded.op !== "input") return;
    expect(new TextDecoder().decode(decoded.data)).toBe(text);
  });
});

describe("decodeFrame", () => {
  it("decodes an output frame inside a larger buffer (non-zero byteOffset)", () => {
    const offset = 2 ** 40 + 5;
    const frame = encodeOutput(offset, Uint8Array.from([0xde, 0xad, 0xbe, 0xef]));
    const backing = new Uint8Array(frame.byteLength + 10).fill(0xaa);
    backing.set(frame, 7);
    const view = backing.subarray(7, 7 + frame.byteLength);
    expect(view.byteOffset).toBe(7);
    const decoded = decodeFrame(view);
    expect(decoded).toEqual({ op: "output", offset, data: Uint8Array.from([0xde, 0xad, 0xbe, 0xef]) });
  });

  it("decodes an input frame inside a larger buffer (non-zero byteOffset)", () => {
    const backing = Uint8Array.from([0xff, 0xff, Op.Input, 0x61, 0x62, 0xff]);
    const decoded = decodeFrame(backing.subarray(2, 5));
    expect(decoded).toEqual({ op: "input", data: Uint8Array.from([0x61, 0x62]) });
  });

  it("returns payloads as views into the frame, not copies", () => {
    const frame = encodeOutput(0, Uint8Array.from([1, 2, 3]));
    const decoded = decodeFrame(frame);
    if (decoded.op !== "output") throw new Error("expected output");
    expect(decoded.data.buffer).toBe(frame.buffer);
    frame[OUTPUT_HEADER_BYTES] = 99;
    expect(decoded.data[0]).toBe(99);
  });

  it("rejects an empty frame", () => {
    const decoded = decodeFrame(new Uint8Array());
    expect(decoded.op).toBe("invalid");
    if (decoded.op !== "invalid") return;
    expect(decoded.reason).toMatch(/empty/);
  });

  it.each([0x00, 0x09, 0x7f, 0xff])("rejects unknown opcode %i", (opcode) => {
    const decoded = decodeFrame(Uint8Array.from([opcode, 1, 2, 3]));
    expect(decoded.op).toBe("invalid");
    if (decoded.op !== "invalid") return;
    expect(decoded.reason).toContain(`0x${opcode.toString(16).padStart(2, "0")}`);
  });

  it.each([1, 2, 5, 8])("rejects an output frame of %i bytes (shorter than the 9-byte header)", (length) => {
    const frame = new Uint8Array(length);
    frame[0] = Op.Output;
    const decoded = decodeFrame(frame);
    expect(decoded.op).toBe("invalid");
    if (decoded.op !== "invalid") return;
    expect(decoded.reason.length).toBeGreaterThan(0);
  });

  it("accepts the largest safe offset written raw", () => {
    const decoded = decodeFrame(rawOutputFrame(0x001fffff, 0xffffffff));
    expect(decoded).toMatchObject({ op: "output", offset: Number.MAX_SAFE_INTEGER });
  });

  it.each([
    ["2^53", 0x00200000, 0],
    ["2^53 + 1", 0x00200000, 1],
    ["2^63", 0x80000000, 0],
    ["2^64 - 1", 0xffffffff, 0xffffffff],
  ])("rejects offset %s (above MAX_SAFE_INTEGER)", (_label, high, low) => {
    const decoded = decodeFrame(rawOutputFrame(high, low, Uint8Array.from([1])));
    expect(decoded.op).toBe("invalid");
    if (decoded.op !== "invalid") return;
    expect(decoded.reason).toMatch(/offset/);
  });
});

describe("parseMessage(ClientMessage)", () => {
  it("accepts resize", () => {
    expect(expectOk(parseMessage(ClientMessage, '{"type":"resize","cols":80,"rows":24}'))).toEqual({
      type: "resize",
      cols: 80,
      rows: 24,
    });
  });

  it("accepts resize at the bounds 1 and 1000", () => {
    expect(expectOk(parseMessage(ClientMessage, '{"type":"resize","cols":1,"rows":1000}'))).toEqual({
      type: "resize",
      cols: 1,
      rows: 1000,
    });
  });

  it.each(SIGNALS)("accepts signal %s", (signal) => {
    expect(expectOk(parseMessage(ClientMessage, JSON.stringify({ type: "signal", signal })))).toEqual({
      type: "signal",
      signal,
    });
  });

  it("accepts ack with an offset, and refuses a bad one", () => {
    expect(expectOk(parseMessage(ClientMessage, '{"type":"ack","offset":1048576}'))).toEqual({
      type: "ack",
      offset: 1048576,
    });
    expectRejected(ClientMessage, '{"type":"ack","offset":-1}');
    expectRejected(ClientMessage, '{"type":"ack","offset":1.5}');
    expectRejected(ClientMessage, '{"type":"ack"}');
    expectRejected(ClientMessage, '{"type":"ack","offset":1,"extra":true}');
  });

  it("accepts ping", () => {
    expect(expectOk(parseMessage(ClientMessage, '{"type":"ping"}'))).toEqual({ type: "ping" });
  });

  it("accepts surrounding JSON whitespace", () => {
    expect(expectOk(parseMessage(ClientMessage, ' \n{ "type" : "ping" }\t'))).toEqual({ type: "ping" });
  });

  it.each([
    ["not JSON", "{type: ping}"],
    ["truncated JSON", '{"type":"ping"'],
    ["empty text", ""],
    ["a JSON string", '"ping"'],
    ["JSON null", "null"],
    ["a JSON array", '[{"type":"ping"}]'],
    ["a JSON number", "42"],
    ["no type", '{"cols":80,"rows":24}'],
    ["unknown type", '{"type":"hello"}'],
    ["type of wrong kind", '{"type":1}'],
    ["cols 0", '{"type":"resize","cols":0,"rows":24}'],
    ["cols 1001", '{"type":"resize","cols":1001,"rows":24}'],
    ["negative rows", '{"type":"resize","cols":80,"rows":-1}'],
    ["non-integer rows", '{"type":"resize","cols":80,"rows":24.5}'],
    ["string cols", '{"type":"resize","cols":"80","rows":24}'],
    ["missing rows", '{"type":"resize","cols":80}'],
    ["extra key on resize", '{"type":"resize","cols":80,"rows":24,"x":1}'],
    ["extra key on ping", '{"type":"ping","id":1}'],
    ["extra key on signal", '{"type":"signal","signal":"SIGINT","pid":1}'],
    ["unknown signal name", '{"type":"signal","signal":"SIGFOO"}'],
    ["lower-case signal name", '{"type":"signal","signal":"sigint"}'],
    ["signal number", '{"type":"signal","signal":2}'],
    ["missing signal", '{"type":"signal"}'],
  ])("rejects %s", (_label, text) => {
    expectRejected(ClientMessage, text);
  });

  it("rejects text longer than MAX_CONTROL_BYTES before parsing it", () => {
    const text = `{"type":"ping"}${" ".repeat(MAX_CONTROL_BYTES)}`;
    expect(text.length).toBeGreaterThan(MAX_CONTROL_BYTES);
    expect(expectRejected(ClientMessage, text)).toContain(`${MAX_CONTROL_BYTES}`);
  });

  it("accepts text of exactly MAX_CONTROL_BYTES", () => {
    const head = '{"type":"ping"}';
    const text = head + " ".repeat(MAX_CONTROL_BYTES - head.length);
    expect(text.length).toBe(MAX_CONTROL_BYTES);
    expect(expectOk(parseMessage(ClientMessage, text))).toEqual({ type: "ping" });
  });

  it("honours an explicit maxBytes", () => {
    expect(expectRejected(ClientMessage, '{"type":"ping"}', 10)).toContain("10");
    expect(expectOk(parseMessage(ClientMessage, '{"type":"ping"}', 15))).toEqual({ type: "ping" });
  });

  it("names the offending field in the reason", () => {
    expect(expectRejected(ClientMessage, '{"type":"resize","cols":0,"rows":24}')).toContain("cols");
  });
});

describe("parseMessage size limit", () => {
  it("measures the size limit in UTF-8 bytes, not UTF-16 code units", () => {
    // 1,500 "€" are 1,500 UTF-16 code units but 4,500 UTF-8 bytes: over the 4,096-byte limit.
    const text = JSON.stringify({ type: "failed", error: "€".repeat(1500) });
    expect(text.length).toBeLessThan(MAX_CONTROL_BYTES);
    expect(new TextEncoder().encode(text).byteLength).toBeGreaterThan(MAX_CONTROL_BYTES);
    expect(expectRejected(RunnerLinkMessage, text)).toContain(`${MAX_CONTROL_BYTES}`);
  });
});

describe("parseMessage(RunnerLinkMessage)", () => {
  it.each([
    ['{"type":"started","pid":1234}', { type: "started", pid: 1234 }],
    ['{"type":"exited","exitCode":0,"signal":null}', { type: "exited", exitCode: 0, signal: null }],
    ['{"type":"exited","exitCode":null,"signal":"SIGKILL"}', { type: "exited", exitCode: null, signal: "SIGKILL" }],
    [
      '{"type":"exited","exitCode":null,"signal":"SIGKILL","reason":"oom"}',
      { type: "exited", exitCode: null, signal: "SIGKILL", reason: "oom" },
    ],
    [
      '{"type":"started","pid":7,"sandbox":"bwrap","network":"none","limits":{"memoryMiB":512,"pids":64,"cpus":0.5}}',
      { type: "started", pid: 7, sandbox: "bwrap", network: "none", limits: { memoryMiB: 512, pids: 64, cpus: 0.5 } },
    ],
    ['{"type":"started","pid":7,"sandbox":"none"}', { type: "started", pid: 7, sandbox: "none" }],
    ['{"type":"failed","error":"ENOENT"}', { type: "failed", error: "ENOENT" }],
    ['{"type":"retained","from":4096}', { type: "retained", from: 4096 }],
    ['{"type":"read_gap","id":3,"from":0,"to":10}', { type: "read_gap", id: 3, from: 0, to: 10 }],
    ['{"type":"read_end","id":3,"to":10}', { type: "read_end", id: 3, to: 10 }],
    ['{"type":"read_end","id":3,"to":0,"error":"down"}', { type: "read_end", id: 3, to: 0, error: "down" }],
    ['{"type":"ping"}', { type: "ping" }],
    [
      '{"type":"command","command":"ls","exitCode":2,"from":10,"to":20,"startedAt":1,"endedAt":2}',
      { type: "command", command: "ls", exitCode: 2, from: 10, to: 20, startedAt: 1, endedAt: 2 },
    ],
    [
      '{"type":"call_failed","id":4,"code":"BUSY","message":"busy"}',
      { type: "call_failed", id: 4, code: "BUSY", message: "busy" },
    ],
    [
      '{"type":"screen_result","id":1,"screen":{"offset":9,"cols":2,"rows":1,"cursor":{"x":0,"y":0,"visible":true},"alternate":false,"title":null,"lines":["hi"],"ansi":"hi"}}',
      {
        type: "screen_result",
        id: 1,
        screen: { offset: 9, cols: 2, rows: 1, cursor: { x: 0, y: 0, visible: true }, alternate: false, title: null, lines: ["hi"], ansi: "hi" },
      },
    ],
  ])("accepts %s", (text, expected) => {
    expect(expectOk(parseMessage(RunnerLinkMessage, text))).toEqual(expected);
  });

  it.each([
    '{"type":"started"}',
    '{"type":"started","pid":1.5}',
    '{"type":"started","pid":"1"}',
    '{"type":"exited","exitCode":0}',
    '{"type":"exited","exitCode":"0","signal":null}',
    '{"type":"exited","exitCode":null,"signal":"SIGKILL","reason":"killed"}',
    '{"type":"started","pid":7,"sandbox":"docker"}',
    '{"type":"started","pid":7,"network":"host"}',
    '{"type":"started","pid":7,"limits":{"memoryMiB":512,"pids":64}}',
    '{"type":"started","pid":7,"limits":{"memoryMiB":0,"pids":64,"cpus":1}}',
    '{"type":"started","pid":7,"limits":{"memoryMiB":512,"pids":64,"cpus":0}}',
    '{"type":"started","pid":7,"limits":{"memoryMiB":512.5,"pids":64,"cpus":1}}',
    '{"type":"failed"}',
    '{"type":"failed","error":null}',
    '{"type":"resize","cols":80,"rows":24}',
    '{"type":"retained","from":-5}',
    '{"type":"read_gap","id":3,"from":0}',
    '{"type":"read_end","to":10}',
    '{"type":"command","command":"ls","exitCode":0,"from":-1,"to":2,"startedAt":1,"endedAt":2}',
    '{"type":"call_failed","id":4,"code":"FORBIDDEN","message":"no"}',
    '{"type":"run_result","id":1,"result":{"command":"x"}}',
    '{"type":"screen_result","id":1,"screen":{"offset":0,"cols":0,"rows":1}}',
    "[]",
    "not json",
  ])("rejects %s", (text) => {
    expectRejected(RunnerLinkMessage, text);
  });
});

describe("parseMessage(EdgeLinkMessage)", () => {
  it.each([
    ['{"type":"resize","cols":120,"rows":40}', { type: "resize", cols: 120, rows: 40 }],
    ['{"type":"signal","signal":"SIGTERM"}', { type: "signal", signal: "SIGTERM" }],
    ['{"type":"kill","graceMs":0}', { type: "kill", graceMs: 0 }],
    ['{"type":"resume","offset":0}', { type: "resume", offset: 0 }],
    ['{"type":"ack","offset":65536}', { type: "ack", offset: 65536 }],
    ['{"type":"read","id":1,"from":5,"to":9}', { type: "read", id: 1, from: 5, to: 9 }],
    ['{"type":"pong"}', { type: "pong" }],
    ['{"type":"screen","id":2}', { type: "screen", id: 2 }],
    [
      '{"type":"screen","id":2,"rebuild":{"from":0,"to":99,"cols":80,"rows":24}}',
      { type: "screen", id: 2, rebuild: { from: 0, to: 99, cols: 80, rows: 24 } },
    ],
    ['{"type":"run","id":3,"command":"true","timeoutMs":1000}', { type: "run", id: 3, command: "true", timeoutMs: 1000 }],
  ])("accepts %s", (text, expected) => {
    expect(expectOk(parseMessage(EdgeLinkMessage, text))).toEqual(expected);
  });

  it.each([
    '{"type":"resize","cols":0,"rows":40}',
    '{"type":"signal","signal":"SIGNOPE"}',
    '{"type":"kill","graceMs":-1}',
    '{"type":"kill"}',
    '{"type":"ping"}',
    '{"type":"resume"}',
    '{"type":"ack","offset":"1"}',
    '{"type":"read","id":1,"from":5}',
    '{"type":"run","id":3,"command":"","timeoutMs":1000}',
    '{"type":"run","id":3,"command":"true","timeoutMs":0}',
    '{"type":"screen","id":2,"rebuild":{"from":0,"to":9,"cols":0,"rows":24}}',
  ])("rejects %s", (text) => {
    expectRejected(EdgeLinkMessage, text);
  });
});

describe("parseMessage(RunnerControlMessage)", () => {
  it("accepts register", () => {
    const text = JSON.stringify({ type: "register", runnerId: "r-1", capacity: 8, sessions: ["acme/s1", "acme/s2"] });
    expect(expectOk(parseMessage(RunnerControlMessage, text))).toEqual({
      type: "register",
      runnerId: "r-1",
      capacity: 8,
      sessions: ["acme/s1", "acme/s2"],
    });
  });

  it("accepts register with how the runner contains sessions", () => {
    for (const sandbox of ["bwrap", "none"]) {
      const message = { type: "register", runnerId: "r-1", capacity: 8, sessions: [], sandbox };
      expect(expectOk(parseMessage(RunnerControlMessage, JSON.stringify(message)))).toEqual(message);
    }
  });

  it("accepts register with no sessions and zero capacity", () => {
    const text = JSON.stringify({ type: "register", runnerId: "r", capacity: 0, sessions: [] });
    expect(expectOk(parseMessage(RunnerControlMessage, text))).toMatchObject({ capacity: 0, sessions: [] });
  });

  it("accepts released", () => {
    expect(expectOk(parseMessage(RunnerControlMessage, '{"type":"released","key":"acme/s1"}'))).toEqual({
      type: "released",
      key: "acme/s1",
    });
  });

  it.each([
    ["empty runnerId", { type: "register", runnerId: "", capacity: 1, sessions: [] }],
    ["runnerId over 128 chars", { type: "register", runnerId: "r".repeat(129), capacity: 1, sessions: [] }],
    ["negative capacity", { type: "register", runnerId: "r", capacity: -1, sessions: [] }],
    ["fractional capacity", { type: "register", runnerId: "r", capacity: 1.5, sessions: [] }],
    ["missing sessions", { type: "register", runnerId: "r", capacity: 1 }],
    ["non-string session key", { type: "register", runnerId: "r", capacity: 1, sessions: [1] }],
    ["an unknown sandbox", { type: "register", runnerId: "r", capacity: 1, sessions: [], sandbox: "chroot" }],
    ["released without key", { type: "released" }],
    ["unknown type", { type: "spawn", key: "k" }],
  ])("rejects %s", (_label, message) => {
    expectRejected(RunnerControlMessage, JSON.stringify(message));
  });
});

describe("parseMessage(PoolMessage)", () => {
  const spec = { command: "/bin/bash", args: ["-l"], cwd: null, env: { TERM: "xterm-256color" }, cols: 80, rows: 24 };
  const linkToken = "t".repeat(43);
  const spawn = { type: "spawn", key: "acme/s1/inc-1", tenant: "acme", sessionId: "s1", spec, linkToken };

  it("accepts spawn", () => {
    expect(expectOk(parseMessage(PoolMessage, JSON.stringify(spawn)))).toEqual(spawn);
  });

  it.each([
    { type: "serve", key: "acme/s1/inc-1", tenant: "acme", sessionId: "s1", linkToken },
    { type: "purge", key: "acme/s1/inc-1" },
  ])("accepts $type", (message) => {
    expect(expectOk(parseMessage(PoolMessage, JSON.stringify(message)))).toEqual(message);
  });

  it("round-trips spawn with the network and limits asked for, all of them or some", () => {
    const asked = [
      { network: "none", limits: { memoryMiB: 512, pids: 64, cpus: 0.5 } },
      { network: "egress" },
      { limits: { cpus: 8 } },
      { limits: { memoryMiB: 32, pids: 8, cpus: 0.05 } },
      { limits: { memoryMiB: 16384, pids: 4096 } },
    ];
    for (const fields of asked) {
      const message = { ...spawn, spec: { ...spec, ...fields } };
      expect(expectOk(parseMessage(PoolMessage, JSON.stringify(message)))).toEqual(message);
    }
  });

  it("round-trips spawn with the tenant's own disk size and log bound, both or one", () => {
    for (const tenantLimits of [{ diskMiB: 64, logBytes: 16 << 20 }, { diskMiB: 16 }, { logBytes: 1 << 20 }, { diskMiB: 1 << 20, logBytes: 2 ** 40 }, {}]) {
      const message = { ...spawn, spec: { ...spec, tenantLimits } };
      expect(expectOk(parseMessage(PoolMessage, JSON.stringify(message)))).toEqual(message);
    }
  });

  it("accepts spawn with a cwd", () => {
    const text = JSON.stringify({ ...spawn, spec: { ...spec, cwd: "/tmp" } });
    expect(expectOk(parseMessage(PoolMessage, text))).toMatchObject({ spec: { cwd: "/tmp" } });
  });

  it.each([
    ["missing spec", { type: "spawn", key: "acme/s1", tenant: "acme", sessionId: "s1" }],
    ["cols 0", { ...spawn, spec: { ...spec, cols: 0 } }],
    ["rows 1001", { ...spawn, spec: { ...spec, rows: 1001 } }],
    ["non-string env value", { ...spawn, spec: { ...spec, env: { A: 1 } } }],
    ["args not an array", { ...spawn, spec: { ...spec, args: "-l" } }],
    ["missing cwd", { ...spawn, spec: { command: "sh", args: [], env: {}, cols: 80, rows: 24 } }],
    ["an unknown network", { ...spawn, spec: { ...spec, network: "host" } }],
    ["limits not an object", { ...spawn, spec: { ...spec, limits: 512 } }],
    ["memoryMiB below 32", { ...spawn, spec: { ...spec, limits: { memoryMiB: 31 } } }],
    ["memoryMiB above the maximum", { ...spawn, spec: { ...spec, limits: { memoryMiB: 16385 } } }],
    ["fractional memoryMiB", { ...spawn, spec: { ...spec, limits: { memoryMiB: 512.5 } } }],
    ["pids below 8", { ...spawn, spec: { ...spec, limits: { pids: 7 } } }],
    ["pids above the maximum", { ...spawn, spec: { ...spec, limits: { pids: 4097 } } }],
    ["cpus below 0.05", { ...spawn, spec: { ...spec, limits: { cpus: 0.04 } } }],
    ["cpus above the maximum", { ...spawn, spec: { ...spec, limits: { cpus: 8.5 } } }],
    ["tenantLimits not an object", { ...spawn, spec: { ...spec, tenantLimits: 64 } }],
    ["diskMiB below 16", { ...spawn, spec: { ...spec, tenantLimits: { diskMiB: 15 } } }],
    ["diskMiB above 1 TiB", { ...spawn, spec: { ...spec, tenantLimits: { diskMiB: (1 << 20) + 1 } } }],
    ["fractional diskMiB", { ...spawn, spec: { ...spec, tenantLimits: { diskMiB: 64.5 } } }],
    ["logBytes below 1 MiB", { ...spawn, spec: { ...spec, tenantLimits: { logBytes: (1 << 20) - 1 } } }],
    ["logBytes above 1 TiB", { ...spawn, spec: { ...spec, tenantLimits: { logBytes: 2 ** 40 + 1 } } }],
    ["logBytes as a string", { ...spawn, spec: { ...spec, tenantLimits: { logBytes: "16777216" } } }],
    ["unknown type", { type: "kill", key: "acme/s1" }],
    ["serve without a tenant", { type: "serve", key: "acme/s1", sessionId: "s1", linkToken }],
    ["spawn without a link token", { ...spawn, linkToken: undefined }],
    ["serve with a short link token", { type: "serve", key: "acme/s1", tenant: "acme", sessionId: "s1", linkToken: "x" }],
    ["purge without a key", { type: "purge" }],
  ])("rejects %s", (_label, message) => {
    expectRejected(PoolMessage, JSON.stringify(message));
  });
});
