// A terminal client over the public WebSocket for the end-to-end tests: it checks offsets as
// frames arrive, keeps what came in order, and waits on events with deadlines (never fixed sleeps).
import { inflateRawSync } from "node:zlib";
import WebSocket from "ws";
import { type Frame, checkInflated, decodeFrame, encodeInput } from "../shared/protocol.js";

type Waiter = { check: () => boolean; resolve: () => void; closed: (code: number) => void };

/** One thing a framed client received, in order. */
export type TimelineEntry =
  | { kind: "message"; message: any }
  /** a `0x01` frame: the terminal's output, or stdout (`pty: false`) */
  | { kind: "output"; offset: number; length: number }
  /** a `0x03` frame: stderr (`pty: false`), in the same offset space as `output` */
  | { kind: "stderr"; offset: number; length: number }
  | { kind: "screen"; offset: number; data: Buffer };

/** An output frame as a framed client received it: `stdout` for 0x01 (a terminal's output too), `stderr` for 0x03. */
export interface OutputFrame {
  op: "stdout" | "stderr";
  offset: number;
  data: Buffer;
}

/** How often a framed client acknowledges what it received (the edge cuts clients that lag). */
const ACK_EVERY_BYTES = 256 * 1024;
/** Text kept for matching output as it arrives; patterns waited for are far shorter. */
const RECENT_CHARS = 64 * 1024;

/** How a TermClient connects: `query` (`from=`, `mode=raw`...), subprotocols, and whether it acknowledges (default yes). */
export interface TermClientOptions {
  query?: string;
  protocols?: string[];
  ack?: boolean;
}

/**
 * A terminal client over the public WebSocket, framed mode unless `raw`. Output of both streams
 * (0x01 and 0x03 frames: one offset space) is kept merged in `output`, in the order it came;
 * `frames()`, `stdout`, `stderr` and `stderrFrames` tell the streams apart.
 */
export class TermClient {
  readonly socket: WebSocket;
  /** Output bytes received (both streams, merged), starting at `startOffset`. */
  private chunks: Buffer[] = [];
  private size = 0;
  startOffset: number | undefined;
  nextOffset: number | undefined;
  /** Frames whose offset did not continue the previous one: must stay empty. */
  readonly offsetErrors: string[] = [];
  readonly messages: any[] = [];
  /** Framed mode: every `0x04` frame (the bytes that repaint the screen as it is at `offset`). */
  readonly screens: { offset: number; data: Buffer }[] = [];
  /** Framed mode: every `0x03` frame (stderr of a `pty: false` session), with its offset. */
  readonly stderrFrames: { offset: number; data: Buffer }[] = [];
  /**
   * Framed mode: what arrived, in order: control messages, output frames (offset and length)
   * and screen frames, for tests of what comes before what.
   */
  readonly timeline: TimelineEntry[] = [];
  /**
   * Runs of contiguous output: `from` its first offset, `start` where it begins in `output`.
   * A screen frame starts a new one at its offset (output continues there); before any, one run
   * starts at the first output frame.
   */
  readonly segments: { from: number; start: number }[] = [];
  /** Framed mode with `compress=deflate`: how many 0x06 frames came, and their bytes on the wire. */
  deflatedFrames = 0;
  deflatedBytes = 0;
  closeCode: number | undefined;
  readonly opened: Promise<void>;
  readonly closed: Promise<number>;
  private waiters = new Set<Waiter>();

  /** Highest offset acknowledged to the server (framed mode acknowledges as it receives). */
  private acked = 0;
  private readonly autoAck: boolean;

  constructor(url: string, sessionId: string, key: string, options: TermClientOptions = {}) {
    this.autoAck = options.ack ?? true;
    const wsUrl = `${url.replace(/^http/, "ws")}/v1/sessions/${sessionId}/connect${options.query ? `?${options.query}` : ""}`;
    this.socket = new WebSocket(wsUrl, options.protocols ?? [], { headers: { authorization: `Bearer ${key}` } });
    const raw = options.query?.includes("mode=raw") || options.protocols?.includes("raw");
    this.opened = new Promise((resolve, reject) => {
      this.socket.once("open", () => {
        // Local quirk (wrangler dev): a socket that has never sent a frame sees the server's
        // close ~10 s late. A framed client's first frame is an empty acknowledgement.
        if (!raw && this.autoAck) this.socket.send(JSON.stringify({ type: "ack", offset: 0 }));
        resolve();
      });
      this.socket.once("error", reject);
    });
    this.closed = new Promise((resolve) => {
      this.socket.once("close", (code) => {
        this.closeCode = code;
        resolve(code);
        this.notify();
        // Nothing more will come: a wait that does not hold now never will, and says why at once.
        for (const waiter of [...this.waiters]) waiter.closed(code);
      });
    });
    this.socket.on("message", (data: Buffer, isBinary) => {
      if (!isBinary) {
        const message = JSON.parse(data.toString("utf8"));
        this.messages.push(message);
        this.timeline.push({ kind: "message", message });
      } else if (raw) this.append(data);
      else {
        const frame = this.inflated(decodeFrame(new Uint8Array(data)));
        if (frame.op === "screen") {
          // Not output: output goes on at its offset, in a run of its own.
          const copy = Buffer.from(frame.data);
          this.screens.push({ offset: frame.offset, data: copy });
          this.timeline.push({ kind: "screen", offset: frame.offset, data: copy });
          this.segments.push({ from: frame.offset, start: this.size });
          this.nextOffset = frame.offset;
          // Acknowledged at once, as the SDK does: the client's position is now the screen's offset.
          if (this.autoAck) this.ack();
        } else if (frame.op !== "output" && frame.op !== "stderr") this.offsetErrors.push(`unexpected frame ${frame.op}`);
        else {
          // stdout and stderr share one offset space: each frame continues the previous one, whichever its stream.
          if (this.nextOffset !== undefined && frame.offset !== this.nextOffset) {
            this.offsetErrors.push(`expected offset ${this.nextOffset}, got ${frame.offset}`);
          }
          this.startOffset ??= frame.offset;
          if (this.segments.length === 0) this.segments.push({ from: frame.offset, start: 0 });
          this.nextOffset = frame.offset + frame.data.byteLength;
          this.timeline.push({ kind: frame.op, offset: frame.offset, length: frame.data.byteLength });
          const bytes = Buffer.from(frame.data);
          if (frame.op === "stderr") this.stderrFrames.push({ offset: frame.offset, data: bytes });
          this.append(bytes);
          if (this.autoAck && this.nextOffset - this.acked >= ACK_EVERY_BYTES) this.ack();
        }
      }
      this.notify();
    });
  }

  /** A 0x06 frame as the 0x01 or 0x03 frame it stands for (inflated with Node's zlib: independent of the SDK's DecompressionStream). */
  private inflated(frame: Frame): Frame {
    if (frame.op !== "deflated") return frame;
    this.deflatedFrames++;
    this.deflatedBytes += frame.data.byteLength;
    const data = new Uint8Array(inflateRawSync(frame.data, { maxOutputLength: Math.max(1, frame.length) }));
    checkInflated(frame, data);
    return { op: frame.stream === "stderr" ? "stderr" : "output", offset: frame.offset, data };
  }

  /** The last RECENT_CHARS of output as text, kept as frames arrive so waits stay cheap. */
  private recent = "";
  private readonly decoder = new TextDecoder();

  private append(bytes: Buffer): void {
    this.chunks.push(bytes);
    this.size += bytes.byteLength;
    this.recent = (this.recent + this.decoder.decode(bytes, { stream: true })).slice(-RECENT_CHARS);
  }

  get output(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.size)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  get text(): string {
    return this.output.toString("utf8");
  }

  /** Output from absolute offset `from` on (to the end of the run of contiguous output holding it). */
  bytesFrom(from: number): Buffer {
    const run = this.runs()
      .reverse()
      .find((r) => r.from <= from && from <= r.to);
    if (run === undefined) throw new Error(`no bytes at ${from}: runs ${JSON.stringify(this.runs().map((r) => [r.from, r.to]))}`);
    return run.bytes.subarray(from - run.from);
  }

  /** The runs of contiguous output received (one unless screen frames moved it on), with their bytes. */
  runs(): { from: number; to: number; bytes: Buffer }[] {
    const output = this.output;
    return this.segments.map((segment, i) => {
      const end = this.segments[i + 1]?.start ?? output.byteLength;
      const bytes = output.subarray(segment.start, end);
      return { from: segment.from, to: segment.from + bytes.byteLength, bytes };
    });
  }

  /**
   * Framed mode: every output frame received (0x01 as `stdout`, 0x03 as `stderr`), in order, with
   * its offset and bytes.
   */
  frames(): OutputFrame[] {
    const output = this.output;
    const frames: OutputFrame[] = [];
    let at = 0;
    for (const entry of this.timeline) {
      if (entry.kind !== "output" && entry.kind !== "stderr") continue;
      frames.push({
        op: entry.kind === "stderr" ? "stderr" : "stdout",
        offset: entry.offset,
        data: output.subarray(at, at + entry.length),
      });
      at += entry.length;
    }
    return frames;
  }

  /** Framed mode: the stdout bytes received (0x01 frames; a terminal's output is all stdout). */
  get stdout(): Buffer {
    return Buffer.concat(this.frames().flatMap((f) => (f.op === "stdout" ? [f.data] : [])));
  }

  /** Framed mode: the stderr bytes received (0x03 frames). */
  get stderr(): Buffer {
    return Buffer.concat(this.stderrFrames.map((f) => f.data));
  }

  /** The `command` messages received (a shell command ended). */
  get commands(): { type: "command"; seq: number; command: string; exitCode: number | null; from: number; to: number }[] {
    return this.messages.filter((m) => m.type === "command");
  }

  send(input: string | Uint8Array): void {
    const bytes = typeof input === "string" ? Buffer.from(input, "utf8") : input;
    this.socket.send(encodeInput(bytes));
  }

  /** Tells the server every byte below `nextOffset` has arrived. */
  ack(): void {
    if (this.nextOffset === undefined || this.socket.readyState !== WebSocket.OPEN) return;
    this.acked = this.nextOffset;
    this.socket.send(JSON.stringify({ type: "ack", offset: this.nextOffset }));
  }

  control(message: unknown): void {
    this.socket.send(JSON.stringify(message));
  }

  /** `{"type":"eof"}`: closes the process's stdin (`pty: false`); on a terminal, types Ctrl+D. */
  eof(): void {
    this.control({ type: "eof" });
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) {
      if (waiter.check()) {
        this.waiters.delete(waiter);
        waiter.resolve();
      }
    }
  }

  /** Resolves once `check` holds, re-checked on every frame; rejects at the deadline. */
  waitFor(check: () => boolean, what: string, deadlineMs = 15_000): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        check,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        closed: (code) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          reject(new Error(`the socket closed (${code}) while waiting for ${what}; output tail: ${JSON.stringify(this.recent.slice(-400))}`));
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(
          new Error(
            `timed out after ${deadlineMs} ms waiting for ${what}; output tail: ${JSON.stringify(this.recent.slice(-400))}`,
          ),
        );
      }, deadlineMs);
      this.waiters.add(waiter);
    });
  }

  /** Waits for `pattern` in the output: the whole of it now, then the recent text of each new frame. */
  waitForOutput(pattern: RegExp | string, deadlineMs?: number): Promise<void> {
    const test = typeof pattern === "string" ? (t: string) => t.includes(pattern) : (t: string) => pattern.test(t);
    if (test(this.text)) return Promise.resolve();
    return this.waitFor(() => test(this.recent), `output ${pattern}`, deadlineMs);
  }

  async waitForMessage(predicate: (m: any) => boolean, what: string, deadlineMs?: number): Promise<any> {
    await this.waitFor(() => this.messages.some(predicate), what, deadlineMs);
    return this.messages.find(predicate);
  }

  waitForClose(deadlineMs?: number): Promise<number> {
    return this.waitFor(() => this.closeCode !== undefined, "close", deadlineMs).then(() => this.closeCode as number);
  }

  close(): Promise<number> {
    if (this.closeCode === undefined) this.socket.close(1000);
    return this.closed;
  }
}

let marks = 0;

/**
 * What `command` prints in the session's shell (a bash at its prompt), exactly, lines joined
 * with \n. It is typed between two markers the shell computes, so that the echo of the typed
 * line never matches them.
 */
export async function shellOutput(client: TermClient, command: string, deadlineMs?: number): Promise<string> {
  const n = 1000 + ++marks;
  const begin = `@@${n}<\r\n`;
  const end = `@@${n}>\r\n`;
  client.send(`echo "@@$((${n}))<"; ${command}; echo "@@$((${n}))>"\n`);
  await client.waitForOutput(end, deadlineMs);
  const text = client.text;
  return text.slice(text.lastIndexOf(begin) + begin.length, text.lastIndexOf(end)).replaceAll("\r\n", "\n");
}

