// Hostile input on a live framed socket: 1,000 random invalid frames (seeded, reproducible
// with HOSTILE_SEED=<seed>) each answered by exactly one error message, in order, while the
// session, its process and its socket stay exactly as they were.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ClientMessage, MAX_CONTROL_BYTES, decodeFrame, parseMessage } from "../shared/protocol.js";
import { SIGNALS, type Session } from "../shared/session.js";
import { type TermClient, line, onSharedStack, until } from "./harness.js";

const suite = onSharedStack({ clients: "close" });
const { api } = suite;
let s: Session;

/** The edge's MAX_INPUT_BYTES in the shared stack (test/global-setup.ts). */
const MAX_INPUT_BYTES = 65536;
const FRAMES = 1000;
/** A round trip through the session object every this many frames paces the sends. */
const BATCH = 50;
const SEED = process.env.HOSTILE_SEED ? Number(process.env.HOSTILE_SEED) : Date.now() % 2 ** 31;
/** A ping that is not byte-for-byte PING_TEXT, so the object (not the runtime's auto-response)
 * answers it, after every frame sent before it. */
const ORDERED_PING = '{ "type": "ping" }';

type Code = "INVALID_REQUEST" | "PAYLOAD_TOO_LARGE";
interface Hostile {
  kind: string;
  data: string | Uint8Array;
  code: Code;
  /** The error message the protocol module gives for this frame, where it decides it. */
  reason: string | RegExp;
}

// ---- Generators (fast-check, sampled with a fixed seed) ----

/** Deterministic filler bytes for frames too big to generate byte by byte. */
function filler(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Bytes a shell would run if they ever reached it. */
const COMMAND = new TextEncoder().encode("\necho pwned-$((3*3))\n");

const firstByte = fc.oneof(
  fc.constantFrom(0x00, 0x01, 0x03, 0x04, 0x7f, 0x80, 0xff),
  fc.integer({ min: 0, max: 255 }).filter((b) => b !== 0x02),
);

const binaryFrame: fc.Arbitrary<Uint8Array> = fc.oneof(
  { weight: 1, arbitrary: fc.constant(new Uint8Array()) },
  // Small frames of any opcode but Input: around the Output (9) and ReadChunk (13) headers and beyond.
  {
    weight: 8,
    arbitrary: fc
      .tuple(firstByte, fc.uint8Array({ maxLength: 300 }), fc.boolean())
      .map(([op, rest, withCommand]) => Uint8Array.from([op, ...rest, ...(withCommand ? COMMAND : [])])),
  },
  // Big frames of any opcode but Input.
  {
    weight: 1,
    arbitrary: fc
      .tuple(firstByte, fc.integer({ min: 1, max: 70 * 1024 }), fc.integer())
      .map(([op, length, seed]) => {
        const frame = filler(length, seed);
        frame[0] = op;
        return frame;
      }),
  },
  // Input frames over MAX_INPUT_BYTES, just over or well over, carrying a command.
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: MAX_INPUT_BYTES + 1, max: 70 * 1024 }), fc.integer(), fc.boolean())
      .map(([payload, seed, exact]) => {
        const frame = filler(1 + (exact ? MAX_INPUT_BYTES + 1 : payload), seed);
        frame[0] = 0x02;
        frame.set(COMMAND, 1);
        return frame;
      }),
  },
);

const dimension = fc.oneof(
  fc.constantFrom<unknown>(0, -1, 1001, 100000, 1.5, 80.5, "80", null, true, [80], Infinity),
  fc.integer({ min: 1, max: 1000 }),
  fc.integer(),
  fc.double(),
);
const badSignal = fc.oneof(
  fc.constantFrom<unknown>("SIGFOO", "SIGSEGV", "sigint", "INT", " SIGINT", 2, 9, null, ""),
  fc.constantFrom(...SIGNALS).map((name) => `${name}X`),
  fc.string({ maxLength: 12 }),
);
const badOffset = fc.oneof(
  fc.constantFrom<unknown>(-1, -0.5, 1.5, "0", null, Number.MAX_SAFE_INTEGER + 2, 2 ** 64, [], {}),
  fc.integer({ max: -1 }),
  fc.double(),
);

/** JSON messages with a real type and wrong, missing or extra fields. */
const wrongFields = fc.oneof(
  fc.record({ type: fc.constant("resize"), cols: dimension, rows: dimension }, { requiredKeys: ["type"] }),
  fc.record({ type: fc.constant("signal"), signal: badSignal }, { requiredKeys: ["type"] }),
  fc.record({ type: fc.constant("ack"), offset: badOffset }, { requiredKeys: ["type"] }),
  fc
    .tuple(
      fc.constantFrom("resize", "signal", "ping", "ack", "hello", "pong", "input", "kill", "resume"),
      fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
    )
    .map(([type, rest]) => ({ ...rest, type })),
  fc.constant({ type: "ack", offset: -1 }),
  fc.constant({ type: "ping", id: 1 }),
  fc.constant({ type: "resize", cols: 0, rows: 24 }),
  fc.constant({ type: "signal", signal: "SIGFOO" }),
);

/** Over MAX_CONTROL_BYTES: well-formed messages (even valid ones) padded, or long strings. */
const hugeText = fc
  .tuple(
    fc.constantFrom(
      '{"type":"resize","cols":1,"rows":1}',
      '{"type":"signal","signal":"SIGKILL"}',
      '{"type":"ping"}',
      '{"type":"ack","offset":0}',
    ),
    fc.integer({ min: 1, max: 64 * 1024 }),
    fc.constantFrom(" ", "\n", "é", "€", "😀"),
    fc.boolean(),
  )
  .map(([message, extra, pad, nearLimit]) => {
    const over = nearLimit ? 1 + (extra % 4) : extra;
    if (pad === " " || pad === "\n") return message + pad.repeat(MAX_CONTROL_BYTES - message.length + over);
    // Multi-byte padding in a string field: fewer UTF-16 units than bytes.
    const head = `${message.slice(0, -1)},"pad":"`;
    const units = Math.ceil((MAX_CONTROL_BYTES - head.length + over) / Buffer.byteLength(pad));
    return `${head}${pad.repeat(units)}"}`;
  });

const textFrame: fc.Arbitrary<string> = fc.oneof(
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 200 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 100 }) },
  { weight: 2, arbitrary: fc.json({ maxDepth: 3 }) },
  { weight: 4, arbitrary: wrongFields.map((m) => JSON.stringify(m)) },
  { weight: 1, arbitrary: hugeText },
  { weight: 1, arbitrary: fc.constantFrom("", " ", "null", "{}", "[]", '"ping"', '{"type":"ping"', "{type:ping}") },
);

/** Text as the server decodes it (lone surrogates become U+FFFD on the wire). */
function asSent(text: string): string {
  return Buffer.from(text, "utf8").toString("utf8");
}

function classify(data: string | Uint8Array): Hostile | undefined {
  if (typeof data === "string") {
    const parsed = parseMessage(ClientMessage, data);
    if (parsed.ok) return undefined; // valid: never sent
    return { kind: "text", data, code: "INVALID_REQUEST", reason: parsed.reason };
  }
  const frame = decodeFrame(data);
  if (frame.op === "input") {
    if (frame.data.byteLength <= MAX_INPUT_BYTES) return undefined; // valid: never sent
    return { kind: "input", data, code: "PAYLOAD_TOO_LARGE", reason: new RegExp(`\\b${frame.data.byteLength}\\b`) };
  }
  if (frame.op === "invalid") return { kind: "binary", data, code: "INVALID_REQUEST", reason: frame.reason };
  return { kind: `binary ${frame.op}`, data, code: "INVALID_REQUEST", reason: /input/ };
}

const hostileFrame: fc.Arbitrary<Hostile> = fc
  .oneof(binaryFrame, textFrame.map(asSent))
  .map(classify)
  .filter((h): h is Hostile => h !== undefined);

function describeFrame(h: Hostile): string {
  if (typeof h.data === "string") return `${h.kind} ${JSON.stringify(h.data.slice(0, 80))} (${h.data.length} chars)`;
  return `${h.kind} [${Array.from(h.data.subarray(0, 16)).join(",")}…] (${h.data.byteLength} bytes)`;
}

// ---- Terminal text ----

const ESC = String.fromCharCode(0x1b);
const BEL = String.fromCharCode(0x07);
/** CSI sequences (colours, bracketed paste on/off), OSC strings (titles), keypad modes. */
const ESCAPES = new RegExp(
  `${ESC}\\[[0-9;?]*[ -/]*[@-~]|${ESC}\\][^${BEL}${ESC}]*(?:${BEL}|${ESC}\\\\)|${ESC}[=>]`,
  "g",
);

/** Output as a terminal shows it, minus escape sequences and carriage returns. */
function plain(bytes: Buffer): string {
  return bytes.toString("utf8").replace(ESCAPES, "").replace(/\r/g, "");
}

function stateOf(session: Session) {
  const { status, cols, rows, pid, offset } = session;
  return { status, cols, rows, pid, offset };
}

function connect(): TermClient {
  return suite.connect(s.id);
}

beforeAll(async () => {
  s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"], cols: 97, rows: 31 });
});

describe("hostile input on a live socket", () => {
  it(`answers ${FRAMES} random invalid frames with one error each and changes nothing`, async ({
    onTestFailed,
  }) => {
    onTestFailed(() => console.error(`hostile-input: reproduce with HOSTILE_SEED=${SEED}`));
    const frames = fc.sample(hostileFrame, { seed: SEED, numRuns: FRAMES });
    expect(frames).toHaveLength(FRAMES);
    expect(frames.some((f) => f.code === "PAYLOAD_TOO_LARGE")).toBe(true);
    expect(frames.some((f) => typeof f.data === "string" && Buffer.byteLength(f.data) > MAX_CONTROL_BYTES)).toBe(true);

    const client = connect();
    await client.opened;
    await client.waitForMessage((m) => m.type === "live", "live");
    expect(s).toMatchObject({ status: "running", cols: 97, rows: 31 });

    // The shell works, and has printed its prompt after the command: the output is at rest.
    client.send("echo ready-$((2+5))\n");
    await client.waitForOutput(line("ready-7"));
    await client.waitFor(() => /ready-7\n[^\n]*[$#] $/.test(plain(client.output)), "the prompt after ready-7");
    const before = stateOf(
      await until(
        async () => {
          const now = await api.get(s.id);
          return now.offset === client.nextOffset ? now : undefined;
        },
        10_000,
        "the session's offset to match what the client received",
      ),
    );
    expect(before).toEqual({ status: "running", cols: 97, rows: 31, pid: s.pid, offset: client.nextOffset });
    const noted = before.offset;
    const prompt = plain(client.output).split("\n").at(-1) as string;
    expect(prompt).toMatch(/[$#] $/);

    // The garbage, paced by an ordered ping every BATCH frames.
    const firstMessage = client.messages.length;
    const errors = () => client.messages.slice(firstMessage).filter((m) => m.type === "error");
    const pongs = () => client.messages.slice(firstMessage).filter((m) => m.type === "pong").length;
    for (let sent = 0; sent < FRAMES; ) {
      const batch = frames.slice(sent, sent + BATCH);
      for (const frame of batch) client.socket.send(frame.data);
      sent += batch.length;
      client.socket.send(ORDERED_PING);
      const round = Math.ceil(sent / BATCH);
      await client.waitFor(
        () => pongs() >= round || client.closeCode !== undefined,
        `pong ${round} after ${sent} frames (seed ${SEED})`,
        30_000,
      );
      expect(client.closeCode, `socket closed after ${sent} frames (seed ${SEED})`).toBeUndefined();
      // The object answers in order: every frame before the ping has had its answer.
      expect(errors().length, `errors after ${sent} frames (seed ${SEED})`).toBe(sent);
    }

    expect(client.socket.readyState).toBe(WebSocket.OPEN);
    expect(client.closeCode).toBeUndefined();
    const answered = errors();
    expect(answered).toHaveLength(FRAMES);
    const others = client.messages.slice(firstMessage).filter((m) => m.type !== "error" && m.type !== "pong");
    expect(others).toEqual([]);
    expect(pongs()).toBe(Math.ceil(FRAMES / BATCH));
    frames.forEach((frame, i) => {
      const error = answered[i];
      const what = `frame ${i}: ${describeFrame(frame)} (seed ${SEED})`;
      expect(Object.keys(error).sort(), what).toEqual(["code", "message", "type"]);
      expect(error.code, what).toBe(frame.code);
      if (typeof frame.reason === "string") expect(error.message, what).toBe(frame.reason);
      else expect(error.message, what).toMatch(frame.reason);
    });

    // Nothing changed, and nothing reached the process: it printed not one byte.
    expect(stateOf(await api.get(s.id))).toEqual(before);
    expect(client.nextOffset).toBe(noted);
    expect(client.offsetErrors).toEqual([]);

    // The next valid input runs, and the output from `noted` on is its echo, its answer and the prompt.
    client.send("echo marker-$((6*7))\n");
    await client.waitForOutput(line("marker-42"));
    const expected = `echo marker-$((6*7))\nmarker-42\n${prompt}`;
    await client.waitFor(
      () => plain(client.bytesFrom(noted)).length >= expected.length,
      "the prompt after marker-42",
    );
    expect(plain(client.bytesFrom(noted))).toBe(expected);
    expect(client.bytesFrom(noted).toString("utf8")).not.toContain("pwned");
    const after = await api.get(s.id);
    expect(stateOf(after)).toEqual({ ...before, offset: client.nextOffset });

    // A second client connects and works; the first is still served.
    const second = connect();
    await second.opened;
    const hello = await second.waitForMessage((m) => m.type === "hello", "hello");
    expect(hello.session).toMatchObject({ id: s.id, status: "running", cols: 97, rows: 31, pid: s.pid });
    await second.waitForMessage((m) => m.type === "live", "live");
    second.send("echo second-$((1+1))\n");
    await second.waitForOutput(line("second-2"));
    await client.waitForOutput(line("second-2"));
    expect(second.messages.filter((m) => m.type === "error")).toEqual([]);
    expect(client.messages.slice(firstMessage).filter((m) => m.type === "error")).toHaveLength(FRAMES);
    expect(stateOf(await api.get(s.id))).toMatchObject({ status: "running", cols: 97, rows: 31, pid: s.pid });
    expect(client.offsetErrors).toEqual([]);
    expect(second.offsetErrors).toEqual([]);
  });
});
