// Property-based tests of the wire protocol: frame encoders/decoder and parseMessage, checked
// against independent oracles over generated input (fast-check, fixed run counts).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  ClientMessage,
  EdgeLinkMessage,
  MAX_CONTROL_BYTES,
  OUTPUT_HEADER_BYTES,
  Op,
  PoolMessage,
  READ_CHUNK_HEADER_BYTES,
  RunnerControlMessage,
  RunnerLinkMessage,
  decodeFrame,
  encodeInput,
  encodeOutput,
  encodeReadChunk,
  parseMessage,
} from "./protocol.js";
import { SIGNALS } from "./session.js";

const RUNS = 600;
const params = { numRuns: RUNS };

const SCHEMAS: [string, z.ZodType<unknown>][] = [
  ["ClientMessage", ClientMessage],
  ["RunnerLinkMessage", RunnerLinkMessage],
  ["EdgeLinkMessage", EdgeLinkMessage],
  ["RunnerControlMessage", RunnerControlMessage],
  ["PoolMessage", PoolMessage],
];

const CLIENT_TYPES = ["resize", "signal", "ping", "ack"];
/** Every `type` any schema knows, plus a few it does not. */
const MESSAGE_TYPES = [
  ...CLIENT_TYPES,
  "started",
  "exited",
  "failed",
  "retained",
  "read_gap",
  "read_end",
  "kill",
  "resume",
  "read",
  "pong",
  "register",
  "released",
  "spawn",
  "serve",
  "purge",
  "hello",
  "error",
  "",
  "PING",
];
/** Field names the schemas use, so random objects sometimes hit the right shape. */
const FIELD_NAMES = [
  "cols",
  "rows",
  "signal",
  "offset",
  "pid",
  "exitCode",
  "error",
  "from",
  "to",
  "id",
  "graceMs",
  "runnerId",
  "capacity",
  "sessions",
  "key",
  "tenant",
  "sessionId",
  "spec",
  "type",
  "__proto__",
  "constructor",
];

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const TWO_32 = 2 ** 32;

// ---- Generators ----

/** Numbers near every bound the schemas use, and some that are no integers at all. */
const interestingNumber = fc.oneof(
  fc.integer({ min: -3, max: 1003 }),
  fc.constantFrom(0, 1, 1000, 1001, -1, -0, 0.5, 1.5, 999.999, MAX_SAFE, MAX_SAFE + 1, 2 ** 60, TWO_32, 1e308),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.maxSafeInteger(),
);

const fieldValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: interestingNumber },
  { weight: 2, arbitrary: fc.constantFrom<unknown>(...SIGNALS, "sigint", "SIGFOO", "", null, true, [], {}) },
  { weight: 1, arbitrary: fc.string({ maxLength: 20 }) },
  { weight: 1, arbitrary: fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 }) },
  {
    weight: 1,
    arbitrary: fc.record({
      command: fc.constantFrom<unknown>("/bin/sh", 1),
      args: fc.constantFrom<unknown>([], ["-l"], "-l"),
      cwd: fc.constantFrom<unknown>(null, "/tmp", 0),
      env: fc.constantFrom<unknown>({}, { A: "b" }, { A: 1 }),
      cols: interestingNumber,
      rows: interestingNumber,
    }),
  },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
);

/** An object with a real (or almost real) `type` and random other fields, as JSON text. */
const typedObjectText = fc
  .tuple(
    fc.constantFrom(...MESSAGE_TYPES),
    fc.array(fc.tuple(fc.oneof(fc.constantFrom(...FIELD_NAMES), fc.string({ maxLength: 6 })), fieldValue), {
      maxLength: 6,
    }),
    fc.boolean(),
  )
  .map(([type, fields, typeFirst]) => {
    const members = fields.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? "null"}`);
    const typeMember = `"type":${JSON.stringify(type)}`;
    return `{${(typeFirst ? [typeMember, ...members] : [...members, typeMember]).join(",")}}`;
  });

/** A client message built from the right fields, sometimes one missing or one too many. */
const clientishText = fc
  .tuple(
    fc.constantFrom(...CLIENT_TYPES),
    fc.record({
      cols: interestingNumber,
      rows: interestingNumber,
      signal: fc.constantFrom<unknown>(...SIGNALS, "SIGFOO", "sigint", 2),
      offset: fc.oneof(fc.maxSafeNat(), interestingNumber),
    }),
    fc.constantFrom("exact", "drop", "extra"),
  )
  .map(([type, values, shape]) => {
    const keys = { resize: ["cols", "rows"], signal: ["signal"], ping: [], ack: ["offset"] }[type] ?? [];
    const message: Record<string, unknown> = { type };
    for (const k of keys) message[k] = values[k as keyof typeof values];
    if (shape === "drop" && keys.length > 0) delete message[keys[0]];
    if (shape === "extra") message[type === "ack" ? "cols" : "offset"] = 1;
    return JSON.stringify(message);
  });

/** UTF-16 code units, lone surrogates included. */
const codeUnitString = fc.string({
  unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  maxLength: 200,
});

const anyText = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.string({ unit: "grapheme", maxLength: 100 }),
  codeUnitString,
  fc.json({ maxDepth: 3 }),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  typedObjectText,
  clientishText,
);

const bytes = (maxLength: number) => fc.uint8Array({ maxLength });

/** A byte array that may sit inside a larger buffer (non-zero byteOffset, bytes after it). */
const frameBytes = fc
  .tuple(
    fc.oneof(
      bytes(4096),
      // Frames starting with a real opcode, of every length around the headers.
      fc
        .tuple(
          fc.constantFrom(0x01, 0x02, 0x03, 0x04, 0x05),
          fc.integer({ min: 0, max: READ_CHUNK_HEADER_BYTES + 2 }),
          fc.uint8Array({ minLength: READ_CHUNK_HEADER_BYTES + 2, maxLength: READ_CHUNK_HEADER_BYTES + 2 }),
        )
        .map(([op, length, rest]) => Uint8Array.from([op, ...rest.subarray(0, length)])),
      // Output, stderr and read-chunk headers whose offsets straddle 2^53 (read chunks: any stream byte, time and size).
      fc
        .tuple(
          fc.constantFrom(0x01, 0x03, 0x05),
          fc.constantFrom(0, 1, 0x1fffff, 0x200000, 0x200001, 0x7fffffff, 0xffffffff),
          fc.integer({ min: 0, max: 0xffffffff }),
          bytes(16),
        )
        .map(([op, high, low, tail]) => {
          const frame = new Uint8Array(READ_CHUNK_HEADER_BYTES + tail.byteLength);
          const view = new DataView(frame.buffer);
          frame.set(tail, READ_CHUNK_HEADER_BYTES);
          frame[0] = op;
          if (op !== Op.ReadChunk) {
            view.setUint32(1, high);
            view.setUint32(5, low);
          } else {
            view.setUint32(1, low);
            view.setUint32(5, high);
            view.setUint32(9, low);
            frame[13] = tail[0] % 3; // 0, 1, or a stream that does not exist
            view.setFloat64(14, [0, 1.7e12, -1, Number.NaN, Infinity][tail[1] % 5]);
          }
          return frame;
        }),
    ),
    fc.nat({ max: 16 }),
    fc.nat({ max: 16 }),
  )
  .map(([frame, before, after]) => {
    const backing = new Uint8Array(before + frame.byteLength + after).fill(0xee);
    backing.set(frame, before);
    return backing.subarray(before, before + frame.byteLength);
  });

// ---- Oracles ----

/** The offset a u64 big-endian field at `at` holds, exactly (as a bigint). */
function u64(frame: Uint8Array, at: number): bigint {
  return new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getBigUint64(at);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function hasExactly(value: Record<string, unknown>, keys: string[]): boolean {
  const own = Object.keys(value).sort();
  return own.length === keys.length && [...keys].sort().every((k, i) => own[i] === k);
}

const isDimension = (v: unknown) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 1000;
const isOffset = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

/** Whether a parsed JSON value is a valid ClientMessage, written without zod. */
function isClientMessage(value: unknown): boolean {
  if (!isPlainObject(value)) return false;
  switch (value.type) {
    case "resize":
      return hasExactly(value, ["type", "cols", "rows"]) && isDimension(value.cols) && isDimension(value.rows);
    case "signal":
      return hasExactly(value, ["type", "signal"]) && (SIGNALS as readonly unknown[]).includes(value.signal);
    case "ping":
      return hasExactly(value, ["type"]);
    case "ack":
      return hasExactly(value, ["type", "offset"]) && isOffset(value.offset);
    default:
      return false;
  }
}

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

function tryJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

// ---- Frames ----

describe("frame encoders round-trip through decodeFrame", () => {
  it("encodeOutput: any safe offset and any bytes", () => {
    fc.assert(
      fc.property(fc.maxSafeNat(), bytes(512), (offset, data) => {
        const frame = encodeOutput(offset, data);
        expect(frame.byteLength).toBe(OUTPUT_HEADER_BYTES + data.byteLength);
        expect(frame[0]).toBe(Op.Output);
        expect(u64(frame, 1)).toBe(BigInt(offset));
        const decoded = decodeFrame(frame);
        if (decoded.op !== "output") throw new Error(`decoded as ${decoded.op}`);
        expect(decoded.offset).toBe(offset);
        expect(Array.from(decoded.data)).toEqual(Array.from(data));
      }),
      params,
    );
  });

  const anyOffset = fc.oneof(fc.double(), fc.integer(), fc.constantFrom(MAX_SAFE, MAX_SAFE + 1, -1, 2 ** 64));

  it("encodeOutput refuses exactly the offsets that are not safe non-negative integers", () => {
    fc.assert(
      fc.property(anyOffset, (offset) => {
        const valid = Number.isSafeInteger(offset) && offset >= 0;
        if (valid) expect(decodeFrame(encodeOutput(offset, new Uint8Array())).op).toBe("output");
        else expect(() => encodeOutput(offset, new Uint8Array())).toThrow(RangeError);
      }),
      params,
    );
  });

  it("encodeInput: any bytes", () => {
    fc.assert(
      fc.property(bytes(1024), (data) => {
        const frame = encodeInput(data);
        expect(frame.byteLength).toBe(1 + data.byteLength);
        expect(frame[0]).toBe(Op.Input);
        const decoded = decodeFrame(frame);
        if (decoded.op !== "input") throw new Error(`decoded as ${decoded.op}`);
        expect(Array.from(decoded.data)).toEqual(Array.from(data));
      }),
      params,
    );
  });

  it("encodeReadChunk: any u32 read id, safe offset and bytes", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: TWO_32 - 1 }), fc.maxSafeNat(), bytes(512), (readId, offset, data) => {
        const frame = encodeReadChunk(readId, offset, data);
        expect(frame.byteLength).toBe(READ_CHUNK_HEADER_BYTES + data.byteLength);
        expect(frame[0]).toBe(Op.ReadChunk);
        expect(new DataView(frame.buffer).getUint32(1)).toBe(readId);
        expect(u64(frame, 5)).toBe(BigInt(offset));
        const decoded = decodeFrame(frame);
        if (decoded.op !== "readChunk") throw new Error(`decoded as ${decoded.op}`);
        expect(decoded.readId).toBe(readId);
        expect(decoded.offset).toBe(offset);
        expect(Array.from(decoded.data)).toEqual(Array.from(data));
      }),
      params,
    );
  });

  it("encodeReadChunk refuses exactly the read ids outside u32", () => {
    fc.assert(
      fc.property(fc.oneof(fc.double(), fc.integer({ min: -10, max: TWO_32 + 10 }), fc.maxSafeInteger()), (readId) => {
        const valid = Number.isInteger(readId) && readId >= 0 && readId < TWO_32;
        if (valid) expect(decodeFrame(encodeReadChunk(readId, 0, new Uint8Array())).op).toBe("readChunk");
        else expect(() => encodeReadChunk(readId, 0, new Uint8Array())).toThrow(RangeError);
      }),
      params,
    );
  });
});

describe("decodeFrame on arbitrary bytes", () => {
  it("never throws, answers the op the first byte and length call for, and views lie within the input", () => {
    fc.assert(
      fc.property(frameBytes, (frame) => {
        const copy = frame.slice();
        const decoded = decodeFrame(frame);
        expect(["output", "stderr", "screen", "input", "readChunk", "invalid"]).toContain(decoded.op);
        // Decoding reads, never writes.
        expect(Array.from(frame)).toEqual(Array.from(copy));

        const first = frame.byteLength === 0 ? undefined : frame[0];
        let expected: string;
        const atOffset: Record<number, string> = { [Op.Output]: "output", [Op.Stderr]: "stderr", [Op.Screen]: "screen" };
        if (first === Op.Input) expected = "input";
        else if (first !== undefined && atOffset[first]) {
          expected =
            frame.byteLength >= OUTPUT_HEADER_BYTES && u64(frame, 1) <= BigInt(MAX_SAFE) ? atOffset[first] : "invalid";
        } else if (first === Op.ReadChunk) {
          const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
          const at = frame.byteLength >= READ_CHUNK_HEADER_BYTES ? view.getFloat64(14) : Number.NaN;
          expected =
            frame.byteLength >= READ_CHUNK_HEADER_BYTES && u64(frame, 5) <= BigInt(MAX_SAFE) && frame[13] <= 1 && Number.isFinite(at) && at >= 0
              ? "readChunk"
              : "invalid";
        } else expected = "invalid";
        expect(decoded.op).toBe(expected);

        if (decoded.op === "invalid") {
          expect(typeof decoded.reason).toBe("string");
          expect(decoded.reason.length).toBeGreaterThan(0);
          return;
        }
        const header =
          decoded.op === "input" ? 1 : decoded.op === "readChunk" ? READ_CHUNK_HEADER_BYTES : OUTPUT_HEADER_BYTES;
        // The payload is a view of the same memory, exactly the bytes after the header.
        expect(decoded.data.buffer).toBe(frame.buffer);
        expect(decoded.data.byteOffset).toBe(frame.byteOffset + header);
        expect(decoded.data.byteOffset + decoded.data.byteLength).toBe(frame.byteOffset + frame.byteLength);
        if (decoded.op === "output" || decoded.op === "stderr" || decoded.op === "screen") expect(BigInt(decoded.offset)).toBe(u64(frame, 1));
        if (decoded.op === "readChunk") {
          expect(decoded.readId).toBe(new DataView(frame.buffer, frame.byteOffset).getUint32(1));
          expect(BigInt(decoded.offset)).toBe(u64(frame, 5));
          expect(decoded.meta.stream).toBe(frame[13] === 1 ? "stderr" : "stdout");
        }
        if (decoded.op !== "input") expect(Number.isSafeInteger(decoded.offset)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});

// ---- Control messages ----

describe("parseMessage on arbitrary text", () => {
  it.each(SCHEMAS)("never throws against %s, and what it accepts re-validates", (_name, schema) => {
    fc.assert(
      fc.property(anyText, (text) => {
        let result: ReturnType<typeof parseMessage<unknown>> | undefined;
        expect(() => {
          result = parseMessage(schema, text);
        }).not.toThrow();
        if (result === undefined) throw new Error("no result");
        if (!result.ok) {
          expect(typeof result.reason).toBe("string");
          expect(result.reason.length).toBeGreaterThan(0);
          return;
        }
        expect(utf8Bytes(text)).toBeLessThanOrEqual(MAX_CONTROL_BYTES);
        expect(schema.safeParse(result.value).success).toBe(true);
        expect(isPlainObject(result.value)).toBe(true);
        expect(MESSAGE_TYPES).toContain((result.value as { type: unknown }).type);
      }),
      params,
    );
  });

  it("ClientMessage accepts exactly what an independent check calls valid, with one of the known types", () => {
    let accepted = 0;
    fc.assert(
      fc.property(anyText, (text) => {
        const result = parseMessage(ClientMessage, text);
        const json = tryJson(text);
        const valid = utf8Bytes(text) <= MAX_CONTROL_BYTES && json.ok && isClientMessage(json.value);
        expect(result.ok, text).toBe(valid);
        if (!result.ok) return;
        accepted++;
        expect(CLIENT_TYPES).toContain(result.value.type);
        expect(ClientMessage.safeParse(result.value).success).toBe(true);
        // Nothing is added or dropped: the value is the JSON it came from.
        if (json.ok) expect(result.value).toEqual(json.value);
      }),
      { numRuns: 1000 },
    );
    // The generators reach the accepting side too, or this property would prove little.
    expect(accepted).toBeGreaterThan(0);
  });
});

describe("parseMessage size limit", () => {
  /** One character of 1, 2, 3 or 4 UTF-8 bytes, or a lone surrogate (3 bytes once encoded). */
  const char = fc.constantFrom("a", " ", "é", "€", "😀", "\ud800", "\udfff", "\u07ff", "\u0800");
  /** Runs of repeated characters: cheap to build, and long enough to cross any limit. */
  const longText = fc
    .array(fc.tuple(char, fc.integer({ min: 1, max: 1500 })), { minLength: 1, maxLength: 5 })
    .map((runs) => runs.map(([c, n]) => c.repeat(n)).join(""));

  /** An explicit limit, or none (the default MAX_CONTROL_BYTES). */
  const maybeLimit = fc.option(fc.integer({ min: 0, max: 3 * MAX_CONTROL_BYTES }), { nil: undefined });

  it("refuses any text whose UTF-8 length exceeds the limit, and accepts a valid message within it", () => {
    fc.assert(
      fc.property(longText, maybeLimit, (s, max) => {
        const limit = max ?? MAX_CONTROL_BYTES;
        // A raw (unescaped) string in JSON: lone surrogates included, JSON.parse takes them.
        const text = `{"type":"failed","error":"${s}"}`;
        const result = parseMessage(RunnerLinkMessage, text, max);
        if (utf8Bytes(text) > limit) {
          expect(result.ok).toBe(false);
          if (!result.ok) expect(result.reason).toBe(`control message over ${limit} bytes`);
        } else {
          expect(result).toEqual({ ok: true, value: { type: "failed", error: s } });
        }
      }),
      params,
    );
  });

  it("refuses any over-limit text against every schema, whatever it holds", () => {
    fc.assert(
      fc.property(anyText, fc.integer({ min: 0, max: 64 }), fc.constantFrom(...SCHEMAS), (text, limit, [, schema]) => {
        const result = parseMessage(schema, text, limit);
        if (utf8Bytes(text) > limit) {
          expect(result).toEqual({ ok: false, reason: `control message over ${limit} bytes` });
        }
      }),
      params,
    );
  });

  it("measures padding to the byte: a ping padded to n bytes passes iff n <= the limit", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 15, max: 200 }), (pad, limit) => {
        const text = `{"type":"ping"}${" ".repeat(pad)}`;
        expect(parseMessage(ClientMessage, text, limit).ok).toBe(text.length <= limit);
      }),
      params,
    );
  });
});

describe("ClientMessage numbers", () => {
  const dims = fc.oneof(
    fc.integer(),
    fc.integer({ min: -5, max: 1010 }),
    fc.double(),
    fc.double({ min: -2, max: 1002 }),
    fc.constantFrom(0, 1, 1000, 1001, -0, 0.5, 1000.5, 1e-300, 999.9999999999999),
  );

  it("accepts exactly integers 1..1000 for cols and rows", () => {
    fc.assert(
      fc.property(dims, dims, (cols, rows) => {
        const text = JSON.stringify({ type: "resize", cols, rows });
        // What arrives is what JSON carries (NaN and Infinity become null, -0 becomes 0).
        const sent = JSON.parse(text) as { cols: unknown; rows: unknown };
        const result = parseMessage(ClientMessage, text);
        expect(result.ok).toBe(isDimension(sent.cols) && isDimension(sent.rows));
        if (result.ok) expect(result.value).toEqual({ type: "resize", cols: sent.cols, rows: sent.rows });
      }),
      { numRuns: 1000 },
    );
  });

  it("ack accepts exactly the safe non-negative integers as its offset", () => {
    const offsets = fc.oneof(
      fc.integer(),
      fc.maxSafeInteger(),
      fc.double(),
      fc.constantFrom(0, -0, -1, 0.5, MAX_SAFE, MAX_SAFE + 1, MAX_SAFE + 2, 2 ** 64, -MAX_SAFE),
    );
    fc.assert(
      fc.property(offsets, (offset) => {
        const text = JSON.stringify({ type: "ack", offset });
        const sent = (JSON.parse(text) as { offset: unknown }).offset;
        const result = parseMessage(ClientMessage, text);
        expect(result.ok, text).toBe(isOffset(sent));
        if (result.ok) expect(result.value).toEqual({ type: "ack", offset: sent });
      }),
      { numRuns: 1000 },
    );
  });

  it("signal accepts exactly the listed signal names", () => {
    const names = fc.oneof(
      fc.constantFrom<unknown>(...SIGNALS),
      fc.constantFrom(...SIGNALS).chain((name) =>
        fc.constantFrom<unknown>(name.toLowerCase(), name.slice(3), ` ${name}`, `${name}\u0000`, `${name}X`, [name]),
      ),
      fc.constantFrom<unknown>("SIGFOO", "SIGSEGV", "SIGKILL9", 2, 9, null, ""),
      fc.string({ maxLength: 10 }),
    );
    fc.assert(
      fc.property(names, (signal) => {
        const result = parseMessage(ClientMessage, JSON.stringify({ type: "signal", signal }));
        expect(result.ok).toBe((SIGNALS as readonly unknown[]).includes(signal));
        if (result.ok) expect(result.value).toEqual({ type: "signal", signal });
      }),
      params,
    );
  });

  it("accepts every JSON spelling of an in-range integer (1e3, 24.0, 240e-1) and none out of range", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -3, max: 1003 }),
        fc.constantFrom(
          (n: number) => `${n}`,
          (n: number) => `${n}.0`,
          (n: number) => `${n}.000`,
          (n: number) => `${n}e0`,
          (n: number) => `${n}E+0`,
          (n: number) => `${n * 10}e-1`,
          (n: number) => `${n}.5`,
        ),
        (n, spell) => {
          const literal = spell(n);
          const value = Number(JSON.parse(literal));
          const result = parseMessage(ClientMessage, `{"type":"resize","cols":${literal},"rows":24}`);
          expect(result.ok, literal).toBe(isDimension(value));
          if (result.ok) expect(result.value).toEqual({ type: "resize", cols: value, rows: 24 });
        },
      ),
      params,
    );
  });
});

describe("valid ClientMessages", () => {
  const validMessage: fc.Arbitrary<ClientMessage> = fc.oneof(
    fc.record({
      type: fc.constant("resize" as const),
      cols: fc.integer({ min: 1, max: 1000 }),
      rows: fc.integer({ min: 1, max: 1000 }),
    }),
    fc.record({ type: fc.constant("signal" as const), signal: fc.constantFrom(...SIGNALS) }),
    fc.record({ type: fc.constant("ping" as const) }),
    fc.record({ type: fc.constant("ack" as const), offset: fc.maxSafeNat() }),
  );

  it("are always accepted and round-trip through JSON.stringify unchanged", () => {
    fc.assert(
      fc.property(validMessage, (message) => {
        expect(ClientMessage.safeParse(message).success).toBe(true);
        expect(parseMessage(ClientMessage, JSON.stringify(message))).toEqual({ ok: true, value: message });
      }),
      params,
    );
  });

  it("are accepted whatever the key order and JSON whitespace", () => {
    const space = fc.constantFrom("", " ", "\n", "\t", "\r\n  ");
    fc.assert(
      fc.property(validMessage, fc.infiniteStream(space), fc.nat(), (message, spaces, turn) => {
        const entries = Object.entries(message);
        const rotated = [...entries.slice(turn % entries.length), ...entries.slice(0, turn % entries.length)];
        const ws = () => spaces.next().value as string;
        const members = rotated.map(
          ([k, v]) => `${ws()}${JSON.stringify(k)}${ws()}:${ws()}${JSON.stringify(v)}${ws()}`,
        );
        const text = `${ws()}{${members.join(",")}}${ws()}`;
        expect(parseMessage(ClientMessage, text)).toEqual({ ok: true, value: message });
      }),
      params,
    );
  });

  it("are refused with one extra key of any name", () => {
    fc.assert(
      fc.property(
        validMessage,
        fc.oneof(fc.string({ minLength: 1, maxLength: 8 }), fc.constantFrom("__proto__", "constructor", "toString")),
        fc.jsonValue({ maxDepth: 1 }),
        (message, key, value) => {
          fc.pre(!(key in message) || key === "__proto__" || key === "constructor" || key === "toString");
          const body = JSON.stringify(message).slice(0, -1);
          const text = `${body},${JSON.stringify(key)}:${JSON.stringify(value)}}`;
          expect(parseMessage(ClientMessage, text).ok).toBe(false);
        },
      ),
      params,
    );
  });
});
