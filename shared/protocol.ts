// The wire protocol: every frame and message that crosses a socket, in one module.
// Binary frames carry terminal bytes; text frames carry JSON control messages.
// Pure functions only: used by the Worker (workerd), the runner (Node) and clients.
import { z } from "zod";
import { TENANT_BOUNDS_MAX, TENANT_BOUNDS_MIN } from "./keys.js";
import {
  END_REASONS,
  SESSION_LIMITS_MAX,
  SESSION_LIMITS_MIN,
  SESSION_NETWORKS,
  SESSION_SANDBOXES,
  SESSION_STATUSES,
  SIGNALS,
  type EndReason,
  type Session,
} from "./session.js";
import { utf8ByteLength } from "./utf8.js";

/** First byte of every binary frame. */
export const Op = {
  /** server → client and runner → edge: `0x01 · u64 BE offset of the first byte · output bytes` (the terminal, or stdout) */
  Output: 0x01,
  /** client → server and edge → runner: `0x02 · input bytes` */
  Input: 0x02,
  /** server → client and runner → edge: `0x03 · u64 BE offset · stderr bytes` (`pty: false` only; one offset space with 0x01) */
  Stderr: 0x03,
  /** server → client: `0x04 · u64 BE offset · bytes that repaint the screen as it is at offset` (not output: they take no offsets) */
  Screen: 0x04,
  /**
   * runner → edge: `0x05 · u32 BE read id · u64 BE offset · u8 stream (0 stdout, 1 stderr) ·
   * f64 BE read time (ms since epoch, 0 unknown) · u16 BE cols · u16 BE rows (0 × 0: no terminal) · bytes`,
   * log bytes answering a `read`, with what the log keeps about them
   */
  ReadChunk: 0x05,
  /**
   * server → client, only to a framed client that connected with `compress=deflate`:
   * `0x06 · u64 BE offset · u8 stream (0 stdout, 1 stderr) · u32 BE length of the output bytes ·
   * the output bytes compressed as raw DEFLATE` (RFC 1951, one whole stream per frame), made
   * once per chunk for every such viewer (docs/protocol.md §5, "Compressed output")
   */
  Deflated: 0x06,
  /**
   * client → server, framed, from a client that connected with `writer=`: `0x07 · u64 BE offset
   * of the first byte in this writer's input · input bytes` (docs/protocol.md §5, "Input exactly once")
   */
  NumberedInput: 0x07,
  /**
   * edge → runner: `0x08 · u8 length of the writer key · the writer key (printable ASCII) · u64 BE
   * offset · u64 BE base · input bytes`: a writer's numbered input, which the runner writes once;
   * `base` is what the writer had acknowledged when it connected (docs/protocol.md §7)
   */
  WriterInput: 0x08,
} as const;

/** A client's writer id (`connect?writer=`): one per client, kept across its reconnects. */
export const WRITER_ID_PATTERN = /^[A-Za-z0-9_-]{8,64}$/;
/** Longest writer key on a runner link (the edge's `<actor>|<writer id>`), printable ASCII. */
export const MAX_WRITER_KEY_BYTES = 255;
const WRITER_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** Whether `key` can name a writer on a runner link. */
export const isWriterKey = (key: string): boolean => WRITER_KEY_PATTERN.test(key);
/** Bytes before the payload of a NumberedInput frame. */
export const NUMBERED_INPUT_HEADER_BYTES = 9;

/** Which of a process's outputs a chunk came from: a terminal's output counts as stdout. */
export type OutputStream = "stdout" | "stderr";

/**
 * What the output log keeps with each chunk besides its bytes (docs/protocol.md §3, "Processes
 * without a terminal" and "Recordings").
 */
export interface ChunkMeta {
  stream: OutputStream;
  /** When the runner read the chunk (ms since epoch); 0 when the log does not know. */
  at: number;
  /** The terminal's size when the chunk was read; 0 × 0 for a process without a terminal. */
  cols: number;
  rows: number;
}

/** Bytes before the payload of a ReadChunk frame. */
export const READ_CHUNK_HEADER_BYTES = 26;

/** Bytes before the payload of an Output frame. */
export const OUTPUT_HEADER_BYTES = 9;
/** Bytes before the compressed payload of a Deflated frame. */
export const DEFLATED_HEADER_BYTES = 14;
/** Largest output a Deflated frame may inflate to: a chunk is never larger than a link message. */
export const MAX_DEFLATED_OUTPUT_BYTES = 16 << 20;
/**
 * The heartbeat, from clients and runner links alike. The edge answers it with PONG_TEXT through
 * the hibernation API's auto-response, so a heartbeat never wakes a Durable Object.
 */
export const PING_TEXT = '{"type":"ping"}';
export const PONG_TEXT = '{"type":"pong"}';
/** Largest JSON control message a client may send, in bytes. */
export const MAX_CONTROL_BYTES = 4096;

const TWO_32 = 2 ** 32;

/** Output at `offset`: a 0x01 frame, or 0x03 for stderr. */
export function encodeOutput(offset: number, bytes: Uint8Array, stream: OutputStream = "stdout"): Uint8Array {
  return encodeAtOffset(stream === "stderr" ? Op.Stderr : Op.Output, offset, bytes);
}

/** A repaint of the screen as it is at `offset` (from=screen, onLag=screen). */
export function encodeScreen(offset: number, bytes: Uint8Array): Uint8Array {
  return encodeAtOffset(Op.Screen, offset, bytes);
}

function encodeAtOffset(op: typeof Op.Output | typeof Op.Stderr | typeof Op.Screen, offset: number, bytes: Uint8Array): Uint8Array {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad offset ${offset}`);
  const frame = new Uint8Array(OUTPUT_HEADER_BYTES + bytes.byteLength);
  const view = new DataView(frame.buffer);
  frame[0] = op;
  view.setUint32(1, Math.floor(offset / TWO_32));
  view.setUint32(5, offset >>> 0);
  frame.set(bytes, OUTPUT_HEADER_BYTES);
  return frame;
}

/**
 * Output at `offset` whose `length` bytes are `compressed` (raw DEFLATE, made by the caller:
 * the edge with CompressionStream("deflate-raw")).
 */
export function encodeDeflated(offset: number, length: number, compressed: Uint8Array, stream: OutputStream = "stdout"): Uint8Array {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad offset ${offset}`);
  if (!Number.isInteger(length) || length < 0 || length > MAX_DEFLATED_OUTPUT_BYTES) throw new RangeError(`bad length ${length}`);
  const frame = new Uint8Array(DEFLATED_HEADER_BYTES + compressed.byteLength);
  const view = new DataView(frame.buffer);
  frame[0] = Op.Deflated;
  view.setUint32(1, Math.floor(offset / TWO_32));
  view.setUint32(5, offset >>> 0);
  frame[9] = stream === "stderr" ? 1 : 0;
  view.setUint32(10, length);
  frame.set(compressed, DEFLATED_HEADER_BYTES);
  return frame;
}

/**
 * Checks what a Deflated frame's payload inflated to: exactly the length its header names, or a
 * clear error. Clients inflate with their own zlib (Node) or DecompressionStream (browsers).
 */
export function checkInflated(frame: { offset: number; length: number }, inflated: Uint8Array): void {
  if (inflated.byteLength !== frame.length) {
    throw new Error(`deflated frame at offset ${frame.offset}: inflated to ${inflated.byteLength} bytes, its header says ${frame.length}`);
  }
}

/** The stream, time and size that a ReadChunk carries when the log knows nothing more. */
export const UNKNOWN_META: ChunkMeta = { stream: "stdout", at: 0, cols: 0, rows: 0 };

export function encodeReadChunk(readId: number, offset: number, bytes: Uint8Array, meta: ChunkMeta = UNKNOWN_META): Uint8Array {
  if (!Number.isInteger(readId) || readId < 0 || readId >= TWO_32) throw new RangeError(`bad read id ${readId}`);
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad offset ${offset}`);
  if (!Number.isFinite(meta.at) || meta.at < 0) throw new RangeError(`bad read time ${meta.at}`);
  const frame = new Uint8Array(READ_CHUNK_HEADER_BYTES + bytes.byteLength);
  const view = new DataView(frame.buffer);
  frame[0] = Op.ReadChunk;
  view.setUint32(1, readId);
  view.setUint32(5, Math.floor(offset / TWO_32));
  view.setUint32(9, offset >>> 0);
  frame[13] = meta.stream === "stderr" ? 1 : 0;
  view.setFloat64(14, meta.at);
  view.setUint16(22, clampU16(meta.cols));
  view.setUint16(24, clampU16(meta.rows));
  frame.set(bytes, READ_CHUNK_HEADER_BYTES);
  return frame;
}

function clampU16(n: number): number {
  return Number.isInteger(n) && n > 0 ? Math.min(n, 0xffff) : 0;
}

export function encodeInput(bytes: Uint8Array): Uint8Array {
  const frame = new Uint8Array(1 + bytes.byteLength);
  frame[0] = Op.Input;
  frame.set(bytes, 1);
  return frame;
}

/** A writer's input at `offset` in its own input stream (client → edge). */
export function encodeNumberedInput(offset: number, bytes: Uint8Array): Uint8Array {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad offset ${offset}`);
  const frame = new Uint8Array(NUMBERED_INPUT_HEADER_BYTES + bytes.byteLength);
  const view = new DataView(frame.buffer);
  frame[0] = Op.NumberedInput;
  view.setUint32(1, Math.floor(offset / TWO_32));
  view.setUint32(5, offset >>> 0);
  frame.set(bytes, NUMBERED_INPUT_HEADER_BYTES);
  return frame;
}

/**
 * A writer's numbered input on a runner link (edge → runner), named by its writer key; `base`:
 * every byte of the writer's input below it was acknowledged to it before it connected.
 */
export function encodeWriterInput(writer: string, offset: number, base: number, bytes: Uint8Array): Uint8Array {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad offset ${offset}`);
  if (!Number.isSafeInteger(base) || base < 0 || base > offset) throw new RangeError(`bad base ${base} for offset ${offset}`);
  if (!WRITER_KEY_PATTERN.test(writer)) throw new RangeError("a writer key is 1 to 255 printable ASCII characters");
  const head = 2 + writer.length + 16;
  const frame = new Uint8Array(head + bytes.byteLength);
  const view = new DataView(frame.buffer);
  frame[0] = Op.WriterInput;
  frame[1] = writer.length;
  for (let i = 0; i < writer.length; i++) frame[2 + i] = writer.charCodeAt(i);
  view.setUint32(2 + writer.length, Math.floor(offset / TWO_32));
  view.setUint32(6 + writer.length, offset >>> 0);
  view.setUint32(10 + writer.length, Math.floor(base / TWO_32));
  view.setUint32(14 + writer.length, base >>> 0);
  frame.set(bytes, head);
  return frame;
}

export type Frame =
  | { op: "output"; offset: number; data: Uint8Array }
  | { op: "stderr"; offset: number; data: Uint8Array }
  | { op: "screen"; offset: number; data: Uint8Array }
  /** `data` is still compressed: it inflates to `length` bytes of `stream` at `offset`. */
  | { op: "deflated"; offset: number; stream: OutputStream; length: number; data: Uint8Array }
  | { op: "input"; data: Uint8Array }
  | { op: "numberedInput"; offset: number; data: Uint8Array }
  | { op: "writerInput"; writer: string; offset: number; base: number; data: Uint8Array }
  | { op: "readChunk"; readId: number; offset: number; meta: ChunkMeta; data: Uint8Array }
  | { op: "invalid"; reason: string };

/** Decodes a binary frame; payloads are views into `frame`, not copies. */
export function decodeFrame(frame: Uint8Array): Frame {
  if (frame.byteLength === 0) return { op: "invalid", reason: "empty frame" };
  switch (frame[0]) {
    case Op.Output:
    case Op.Stderr:
    case Op.Screen: {
      const op = frame[0] === Op.Output ? "output" : frame[0] === Op.Stderr ? "stderr" : "screen";
      if (frame.byteLength < OUTPUT_HEADER_BYTES) {
        return { op: "invalid", reason: `${op} frame shorter than its header` };
      }
      const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
      const offset = view.getUint32(1) * TWO_32 + view.getUint32(5);
      if (!Number.isSafeInteger(offset)) return { op: "invalid", reason: "offset out of range" };
      return { op, offset, data: frame.subarray(OUTPUT_HEADER_BYTES) };
    }
    case Op.Input:
      return { op: "input", data: frame.subarray(1) };
    case Op.NumberedInput: {
      if (frame.byteLength < NUMBERED_INPUT_HEADER_BYTES) return { op: "invalid", reason: "numbered input frame shorter than its header" };
      const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
      const offset = view.getUint32(1) * TWO_32 + view.getUint32(5);
      if (!Number.isSafeInteger(offset)) return { op: "invalid", reason: "offset out of range" };
      return { op: "numberedInput", offset, data: frame.subarray(NUMBERED_INPUT_HEADER_BYTES) };
    }
    case Op.WriterInput: {
      if (frame.byteLength < 2) return { op: "invalid", reason: "writer input frame shorter than its header" };
      const length = frame[1];
      const head = 2 + length + 16;
      if (length === 0) return { op: "invalid", reason: "writer input frame with an empty writer key" };
      if (frame.byteLength < head) return { op: "invalid", reason: "writer input frame shorter than its header" };
      const writer = String.fromCharCode(...frame.subarray(2, 2 + length));
      if (!WRITER_KEY_PATTERN.test(writer)) return { op: "invalid", reason: "writer key is not printable ASCII" };
      const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
      const offset = view.getUint32(2 + length) * TWO_32 + view.getUint32(6 + length);
      if (!Number.isSafeInteger(offset)) return { op: "invalid", reason: "offset out of range" };
      const base = view.getUint32(10 + length) * TWO_32 + view.getUint32(14 + length);
      if (!Number.isSafeInteger(base) || base > offset) return { op: "invalid", reason: "base out of range" };
      return { op: "writerInput", writer, offset, base, data: frame.subarray(head) };
    }
    case Op.Deflated: {
      if (frame.byteLength < DEFLATED_HEADER_BYTES) return { op: "invalid", reason: "deflated frame shorter than its header" };
      const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
      const offset = view.getUint32(1) * TWO_32 + view.getUint32(5);
      if (!Number.isSafeInteger(offset)) return { op: "invalid", reason: "offset out of range" };
      if (frame[9] > 1) return { op: "invalid", reason: "unknown stream" };
      const length = view.getUint32(10);
      if (length > MAX_DEFLATED_OUTPUT_BYTES) return { op: "invalid", reason: `deflated frame of ${length} bytes, more than ${MAX_DEFLATED_OUTPUT_BYTES}` };
      const stream: OutputStream = frame[9] === 1 ? "stderr" : "stdout";
      return { op: "deflated", offset, stream, length, data: frame.subarray(DEFLATED_HEADER_BYTES) };
    }
    case Op.ReadChunk: {
      if (frame.byteLength < READ_CHUNK_HEADER_BYTES) {
        return { op: "invalid", reason: "read chunk frame shorter than its header" };
      }
      const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
      const offset = view.getUint32(5) * TWO_32 + view.getUint32(9);
      if (!Number.isSafeInteger(offset)) return { op: "invalid", reason: "offset out of range" };
      if (frame[13] > 1) return { op: "invalid", reason: "unknown stream" };
      const at = view.getFloat64(14);
      if (!Number.isFinite(at) || at < 0) return { op: "invalid", reason: "bad read time" };
      const meta: ChunkMeta = { stream: frame[13] === 1 ? "stderr" : "stdout", at, cols: view.getUint16(22), rows: view.getUint16(24) };
      return { op: "readChunk", readId: view.getUint32(1), offset, meta, data: frame.subarray(READ_CHUNK_HEADER_BYTES) };
    }
    default:
      return { op: "invalid", reason: `unknown opcode 0x${frame[0].toString(16).padStart(2, "0")}` };
  }
}

// ---- Client control messages (JSON text frames, docs/protocol.md §5) ----

const dimension = z.number().int().min(1).max(1000);
const offsetSchema = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** Largest JSON message on a runner link (a `run_result` carries up to 1 MiB of output, escaped). */
export const MAX_LINK_MESSAGE_BYTES = 16 << 20;

/** Longest command text `run` types or a `command` message carries. */
export const MAX_COMMAND_TEXT = 16384;

const ScreenSnapshotSchema = z.object({
  offset: offsetSchema,
  cols: dimension,
  rows: dimension,
  cursor: z.object({ x: z.number().int().min(0), y: z.number().int().min(0), visible: z.boolean() }),
  alternate: z.boolean(),
  title: z.string().nullable(),
  lines: z.array(z.string()),
  ansi: z.string(),
});
export const SignalSchema = z.enum(SIGNALS);

/** client → server */
export const ClientMessage = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("resize"), cols: dimension, rows: dimension }),
  z.strictObject({ type: z.literal("signal"), signal: SignalSchema }),
  z.strictObject({ type: z.literal("ping") }),
  /** the client has received every byte below `offset`: how the edge measures its lag */
  z.strictObject({ type: z.literal("ack"), offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER) }),
  /** close the process's stdin (`pty: false`); on a terminal, type Ctrl+D */
  z.strictObject({ type: z.literal("eof") }),
]);
export type ClientMessage = z.infer<typeof ClientMessage>;

export type ExitInfo = {
  status: "exited" | "lost" | "failed";
  exitCode: number | null;
  signal: string | null;
  /** Why the session ended (docs/protocol.md §4). */
  reason: EndReason | null;
  /** The session's final output offset: every byte below it was sent before `exit`. */
  offset: number;
};

/** server → client */
export type ServerMessage =
  /**
   * `input` answers a client that connected with `writer=`: every byte of its input below `acked`
   * has been written to the process (null: the edge does not know now; the runner drops a resend)
   */
  | { type: "hello"; session: Session; input?: { writer: string; acked: number | null } }
  /**
   * every byte of this client's numbered input below `offset` has been written to the process;
   * `resend`: the runner dropped a frame past a hole, so send again from `offset`
   */
  | { type: "input_ack"; offset: number; resend?: true }
  /**
   * a numbered input frame at `offset` was not taken (`code` as in errors): the client keeps it
   * and sends it again later, unless the code is final (FORBIDDEN, SESSION_EXITED, ...) or
   * `final` says this refusal will not change (stdin closed by eof)
   */
  | { type: "input_refused"; offset: number; code: string; message: string; final?: true }
  | { type: "replay"; from: number; to: number }
  | { type: "live"; offset: number }
  | { type: "gap"; from: number; to: number }
  | { type: "resize"; cols: number; rows: number }
  /** before a 0x04 frame: the screen as it is at `offset`; live output continues there */
  | { type: "screen"; offset: number; cols: number; rows: number }
  /** a shell command ended (docs/protocol.md §3, "Agents") */
  | { type: "command"; seq: number; command: string; exitCode: number | null; from: number; to: number }
  | ({ type: "exit" } & ExitInfo)
  | { type: "error"; code: string; message: string }
  | { type: "pong" };

export type ParseResult<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Parses a JSON text frame against a schema, with a size bound; never throws. */
export function parseMessage<T>(schema: z.ZodType<T>, text: string, maxBytes = MAX_CONTROL_BYTES): ParseResult<T> {
  // A UTF-16 unit is at least one UTF-8 byte and at most three: count only when it matters.
  if (text.length > maxBytes || (text.length * 3 > maxBytes && utf8ByteLength(text) > maxBytes)) {
    return { ok: false, reason: `control message over ${maxBytes} bytes` };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, reason: "control message is not JSON" };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? ` at ${issue.path.join(".")}` : "";
    return { ok: false, reason: `bad control message${where}: ${issue?.message ?? "invalid"}` };
  }
  return { ok: true, value: parsed.data };
}

// ---- A session's sandbox: what a create asks for, what the runner applied ----

// Calls on these schemas are written from `z` (`z.enum(...).optional()`), never on the exported
// name: scripts/pack-client.ts marks only calls on `z` pure, and the SDK's bundle must be able to
// drop every schema (and zod with it).
export const SessionNetworkSchema = z.enum(SESSION_NETWORKS);

/**
 * The limits a create may ask for, each optional and within SESSION_LIMITS_MIN..MAX; messages
 * name the bound. The REST body takes them strictly (`z.strictObject(LIMITS_ASKED)`), the spawn
 * order as the protocol's other messages do.
 */
export const LIMITS_ASKED = {
  memoryMiB: z
    .number()
    .int("a whole number of MiB")
    .min(SESSION_LIMITS_MIN.memoryMiB, `at least ${SESSION_LIMITS_MIN.memoryMiB} MiB`)
    .max(SESSION_LIMITS_MAX.memoryMiB, `at most ${SESSION_LIMITS_MAX.memoryMiB} MiB, the maximum`)
    .optional(),
  pids: z
    .number()
    .int("a whole number of processes")
    .min(SESSION_LIMITS_MIN.pids, `at least ${SESSION_LIMITS_MIN.pids}`)
    .max(SESSION_LIMITS_MAX.pids, `at most ${SESSION_LIMITS_MAX.pids}, the maximum`)
    .optional(),
  cpus: z
    .number()
    .min(SESSION_LIMITS_MIN.cpus, `at least ${SESSION_LIMITS_MIN.cpus}`)
    .max(SESSION_LIMITS_MAX.cpus, `at most ${SESSION_LIMITS_MAX.cpus}, the maximum`)
    .optional(),
};

/** A tenant's own workspace size and log bound (admin API), within TENANT_BOUNDS_MIN..MAX. */
export const TENANT_BOUNDS = {
  diskMiB: z
    .number()
    .int("a whole number of MiB")
    .min(TENANT_BOUNDS_MIN.diskMiB, `at least ${TENANT_BOUNDS_MIN.diskMiB} MiB`)
    .max(TENANT_BOUNDS_MAX.diskMiB, `at most ${TENANT_BOUNDS_MAX.diskMiB} MiB`)
    .optional(),
  logBytes: z
    .number()
    .int("a whole number of bytes")
    .min(TENANT_BOUNDS_MIN.logBytes, `at least ${TENANT_BOUNDS_MIN.logBytes} bytes`)
    .max(TENANT_BOUNDS_MAX.logBytes, `at most ${TENANT_BOUNDS_MAX.logBytes} bytes`)
    .optional(),
};

/** The limits a runner applied: all three, whatever its own defaults are. */
const LIMITS_APPLIED = {
  memoryMiB: z.number().int().min(1),
  pids: z.number().int().min(1),
  cpus: z.number().positive(),
};

// ---- Runner link: one socket per session, runner ↔ PtySession object ----

/** runner → edge */
export const RunnerLinkMessage = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("started"),
    pid: z.number().int(),
    /** how the runner contained the process, and the network and limits it applied (absent: it did not say) */
    sandbox: z.enum(SESSION_SANDBOXES).optional(),
    network: z.enum(SESSION_NETWORKS).optional(),
    limits: z.object(LIMITS_APPLIED).optional(),
  }),
  z.object({
    type: z.literal("exited"),
    exitCode: z.number().int().nullable(),
    signal: z.string().nullable(),
    /**
     * set when the runner ended the process itself: `drain` (it was shutting down), or when the
     * kernel did: `oom` (the session passed its memory limit)
     */
    reason: z.enum(["drain", "oom"]).optional(),
  }),
  z.object({ type: z.literal("failed"), error: z.string() }),
  /** the log now holds output from `from` on (older bytes were trimmed) */
  z.object({ type: z.literal("retained"), from: offsetSchema }),
  /** part of a read that the log does not hold */
  z.object({ type: z.literal("read_gap"), id: z.number().int().min(0), from: offsetSchema, to: offsetSchema }),
  /** a read is complete up to `to` (ReadChunk frames and gaps before it cover the range); or it failed */
  z.object({
    type: z.literal("read_end"),
    id: z.number().int().min(0),
    to: offsetSchema,
    error: z.string().optional(),
  }),
  /**
   * input waiting for the process passed its bound (`full`), or has drained (edge: refuse or
   * accept input). The one that answers a `resume` also says how many input bytes the runner has
   * taken for the session over all its links (`taken`) and whether its stdin is closed (`eof`,
   * pipes): the edge sends again what a dead link lost (docs/protocol.md §7).
   */
  z.object({
    type: z.literal("input_state"),
    full: z.boolean(),
    taken: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
    eof: z.boolean().optional(),
  }),
  /** input that arrived while the bound was passed was dropped */
  z.object({ type: z.literal("input_dropped"), bytes: z.number().int().min(0) }),
  /**
   * each writer's numbered input below `offset` has been written to the process (docs/protocol.md
   * §7, "Input exactly once"); sent as writes complete, and for a writer whose frame was a resend
   */
  z.object({
    type: z.literal("input_ack"),
    acks: z
      .array(z.object({ writer: z.string().regex(WRITER_KEY_PATTERN), offset: offsetSchema, resend: z.literal(true).optional() }))
      .min(1)
      .max(1024),
  }),
  /** the output log may have lost data (Redis came back after an outage): drop copies of it */
  z.object({ type: z.literal("log_reset") }),
  /** heartbeat; answered with `pong` by the edge without waking the object */
  z.object({ type: z.literal("ping") }),
  /**
   * a shell command ended (OSC 133 C…D). Sent again for recent commands after every `resume`
   * (a link may drop with one in flight): the edge keeps each `from` once.
   */
  z.object({
    type: z.literal("command"),
    command: z.string().max(MAX_COMMAND_TEXT),
    exitCode: z.number().int().nullable(),
    from: offsetSchema,
    to: offsetSchema,
    startedAt: z.number().int(),
    endedAt: z.number().int(),
  }),
  /** answers `screen` */
  z.object({ type: z.literal("screen_result"), id: z.number().int().min(0), screen: ScreenSnapshotSchema }),
  /** answers `run` */
  z.object({
    type: z.literal("run_result"),
    id: z.number().int().min(0),
    result: z.object({
      command: z.string(),
      exitCode: z.number().int().nullable(),
      output: z.string(),
      from: offsetSchema,
      to: offsetSchema,
      startedAt: z.number().int(),
      durationMs: z.number().min(0),
      timedOut: z.boolean(),
      truncated: z.boolean(),
    }),
  }),
  /** a `screen` or `run` could not be answered */
  z.object({
    type: z.literal("call_failed"),
    id: z.number().int().min(0),
    code: z.enum(["BUSY", "NO_SHELL_INTEGRATION", "SESSION_EXITED", "INTERNAL"]),
    message: z.string().max(1000),
  }),
]);
export type RunnerLinkMessage = z.infer<typeof RunnerLinkMessage>;

/** edge → runner */
export const EdgeLinkMessage = z.discriminatedUnion("type", [
  z.object({ type: z.literal("resize"), cols: dimension, rows: dimension }),
  z.object({ type: z.literal("signal"), signal: SignalSchema }),
  /** end the process: SIGHUP (or `signal`) now, SIGKILL to everything it started after graceMs */
  z.object({ type: z.literal("kill"), graceMs: z.number().int().min(0), signal: z.enum(SIGNALS).optional() }),
  /** close the process's stdin after the input sent before this (`pty: false`); a terminal gets Ctrl+D */
  z.object({ type: z.literal("eof") }),
  /** first message on every link: the edge holds output below `offset`; send from there */
  z.object({ type: z.literal("resume"), offset: offsetSchema }),
  /** the edge has stored every output byte below `offset` */
  z.object({ type: z.literal("ack"), offset: offsetSchema }),
  /** read [from, to) from the output log and answer with ReadChunk frames, read_gap and read_end */
  z.object({ type: z.literal("read"), id: z.number().int().min(0), from: offsetSchema, to: offsetSchema }),
  /** the read's client has gone: stop reading (no read_end follows) */
  z.object({ type: z.literal("read_cancel"), id: z.number().int().min(0) }),
  z.object({ type: z.literal("pong") }),
  /**
   * the screen as it is now (host link: the runner's live emulator, answered with the offset it
   * has read up to); with `rebuild` (reader link, no live emulator): an emulator of that size
   * fed the log's [from, to)
   */
  z.object({
    type: z.literal("screen"),
    id: z.number().int().min(0),
    rebuild: z.object({ from: offsetSchema, to: offsetSchema, cols: dimension, rows: dimension }).optional(),
  }),
  /** type `command` and Enter into the shell at its prompt; answer with run_result when it ends or times out */
  z.object({
    type: z.literal("run"),
    id: z.number().int().min(0),
    command: z.string().min(1).max(MAX_COMMAND_TEXT),
    timeoutMs: z.number().int().min(1),
  }),
]);
export type EdgeLinkMessage = z.infer<typeof EdgeLinkMessage>;

// ---- Runner control: one socket per runner, runner ↔ RunnerPool object ----

/** runner → edge */
export const RunnerControlMessage = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("register"),
    runnerId: z.string().min(1).max(128),
    capacity: z.number().int().min(0),
    /** keys of the sessions the runner hosts right now (after a reconnect) */
    sessions: z.array(z.string()),
    /** the only tenants whose sessions this runner takes (a per-tenant OS boundary); absent = any */
    tenants: z.array(z.string().min(1).max(64)).max(1000).optional(),
    /** the runner is draining (a reconnect during a drain): place nothing on it */
    draining: z.boolean().optional(),
    /** how it contains sessions: `bwrap`, or `none` (local development only) */
    sandbox: z.enum(SESSION_SANDBOXES).optional(),
  }),
  z.object({ type: z.literal("released"), key: z.string() }),
  /** the runner is shutting down (SIGTERM): place nothing more on it; its sessions go on until it ends them */
  z.object({ type: z.literal("draining") }),
]);
export type RunnerControlMessage = z.infer<typeof RunnerControlMessage>;

export const SpawnSpecSchema = z.object({
  command: z.string(),
  args: z.array(z.string()),
  cwd: z.string().nullable(),
  env: z.record(z.string(), z.string()),
  cols: dimension,
  rows: dimension,
  /** false: pipes for stdin, stdout and stderr instead of a terminal (absent: a terminal) */
  pty: z.boolean().optional(),
  /** what the client asked for; absent: the runner's default */
  network: z.enum(SESSION_NETWORKS).optional(),
  limits: z.object(LIMITS_ASKED).optional(),
  /** the tenant's maxima: a limit not asked for is the runner's default, but at most this */
  limitsMax: z.object(LIMITS_ASKED).optional(),
  /** the tenant's own bounds when the session was created; absent: TENANT_DISK_MIB, TENANT_LOG_BYTES */
  tenantLimits: z.object(TENANT_BOUNDS).optional(),
});

/** edge → runner */
export const PoolMessage = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("spawn"),
    /** `tenant/sessionId/incarnation`: this incarnation of the session, and its output log's name */
    key: z.string(),
    tenant: z.string(),
    sessionId: z.string(),
    spec: SpawnSpecSchema,
    /** the host link's credential for this one session (and incarnation): sent as `x-link-token` */
    linkToken: z.string().min(16).max(256),
  }),
  /** open a reader link to this session (its log is needed for a replay and it has no host link) */
  z.object({
    type: z.literal("serve"),
    key: z.string(),
    tenant: z.string(),
    sessionId: z.string(),
    /** the reader link's credential for this session: sent as `x-link-token` */
    linkToken: z.string().min(16).max(256),
  }),
  /** drop this session's output log now */
  z.object({ type: z.literal("purge"), key: z.string() }),
]);
export type PoolMessage = z.infer<typeof PoolMessage>;

export const StatusSchema = z.enum(SESSION_STATUSES);
export const EndReasonSchema = z.enum(END_REASONS);
