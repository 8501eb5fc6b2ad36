// Helpers for end-to-end tests: a small REST client, a WebSocket terminal client that checks
// offsets as frames arrive, and deadline-bound waits driven by events (never fixed sleeps).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import headless from "@xterm/headless";
import { createParser } from "eventsource-parser";
import WebSocket from "ws";
import type { CommandRecord, ExpectResult, RunResult, ScreenState } from "../shared/agent.js";
import { decodeFrame, encodeInput } from "../shared/protocol.js";
import type { Session } from "../shared/session.js";
import { statFields } from "../runner/process/proc.js";
import { sessionMembers } from "../runner/isolation/reaper.js";

export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

export class Api {
  constructor(
    readonly url: string,
    readonly key: string | null,
  ) {}

  async request<T = any>(
    method: string,
    path: string,
    body?: unknown,
    rawBody?: string,
    extraHeaders: Record<string, string> = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...extraHeaders };
    if (this.key) headers.authorization = `Bearer ${this.key}`;
    if (body !== undefined || rawBody !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers,
      body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  async create(body: Record<string, unknown> = {}): Promise<Session> {
    const res = await this.request<Session>("POST", "/v1/sessions", body);
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  async input(id: string, data: string): Promise<void> {
    const res = await this.request("POST", `/v1/sessions/${id}/input`, { data });
    if (res.status !== 202) throw new Error(`input failed: ${res.status} ${JSON.stringify(res.body)}`);
  }

  async get(id: string): Promise<Session> {
    const res = await this.request<Session>("GET", `/v1/sessions/${id}`);
    if (res.status !== 200) throw new Error(`get failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** Deletes with purge, for cleanup; ignores sessions already gone. */
  async destroy(id: string): Promise<void> {
    await this.request("DELETE", `/v1/sessions/${id}?purge=true`);
  }

  // ---- the agent layer (DESIGN §10) ----

  /** `POST .../input` as it answers (202 `{bytes, offset}`), with an `Idempotency-Key` when given. */
  inputRequest(
    id: string,
    body: { data: string; encoding?: "utf8" | "base64"; eof?: boolean },
    idempotencyKey?: string,
  ): Promise<ApiResponse<{ bytes: number; offset: number }>> {
    const headers: Record<string, string> = idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey };
    return this.request("POST", `/v1/sessions/${id}/input`, body, undefined, headers);
  }

  /** `POST .../input`, 202 or throw: `{bytes, offset}`, `offset` being where what it causes starts. */
  async inputAt(id: string, data: string, idempotencyKey?: string): Promise<{ bytes: number; offset: number }> {
    const res = await this.inputRequest(id, { data }, idempotencyKey);
    if (res.status !== 202) throw new Error(`input failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /**
   * `GET .../output?from=&to=&stream=`: only `stream`'s bytes of the merged range [from, to)
   * (`pty: false`), following `X-Offset-To` (a range in the merged offset space) until `to`.
   */
  async outputStream(id: string, stream: "stdout" | "stderr", from: number, to: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let cursor = from;
    while (cursor < to) {
      const res = await fetch(`${this.url}/v1/sessions/${id}/output?from=${cursor}&to=${to}&stream=${stream}`, {
        headers: this.key ? { authorization: `Bearer ${this.key}` } : {},
      });
      if (res.status !== 200) throw new Error(`output failed: ${res.status} ${await res.text()}`);
      const bytes = Buffer.from(await res.arrayBuffer());
      const got = { from: Number(res.headers.get("x-offset-from")), to: Number(res.headers.get("x-offset-to")) };
      if (got.from !== cursor) throw new Error(`output from ${cursor} started at ${got.from} (trimmed?)`);
      if (bytes.byteLength > got.to - got.from) throw new Error(`headers ${JSON.stringify(got)} vs ${bytes.length} bytes`);
      if (got.to > to) throw new Error(`output to ${to} went on to ${got.to}`);
      if (got.to === cursor) throw new Error(`output [${cursor}, ${to}) of ${stream} moved nothing: only ${got.to} produced?`);
      parts.push(bytes);
      cursor = got.to;
    }
    return Buffer.concat(parts);
  }

  /** `POST .../expect` as it answers. */
  expectRequest(
    id: string,
    body: { pattern: string; literal?: boolean; flags?: string; from?: number; timeoutSec?: number },
  ): Promise<ApiResponse<ExpectResult>> {
    return this.request("POST", `/v1/sessions/${id}/expect`, body);
  }

  /** `POST .../expect`, 200 or throw. */
  async expectOutput(
    id: string,
    body: { pattern: string; literal?: boolean; flags?: string; from?: number; timeoutSec?: number },
  ): Promise<ExpectResult> {
    const res = await this.expectRequest(id, body);
    if (res.status !== 200) throw new Error(`expect failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** `POST .../run` as it answers. */
  runRequest(id: string, command: string, timeoutSec?: number): Promise<ApiResponse<RunResult>> {
    return this.request("POST", `/v1/sessions/${id}/run`, timeoutSec === undefined ? { command } : { command, timeoutSec });
  }

  /**
   * `POST .../run`, asked again while it answers 409 BUSY (a shell still starting, or still
   * busy with a command): the result once it ran, or throw on any other answer or at the deadline.
   */
  async run(id: string, command: string, options: { timeoutSec?: number; deadlineMs?: number } = {}): Promise<RunResult> {
    const deadline = Date.now() + (options.deadlineMs ?? 20_000);
    for (;;) {
      const res = await this.runRequest(id, command, options.timeoutSec);
      if (res.status === 200) return res.body;
      const code = (res.body as any)?.error?.code;
      if (res.status !== 409 || code !== "BUSY" || Date.now() > deadline) {
        throw new Error(`run ${JSON.stringify(command)} failed: ${res.status} ${JSON.stringify(res.body)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** `GET .../commands`, 200 or throw. */
  async commands(id: string, limit?: number): Promise<CommandRecord[]> {
    const res = await this.request<{ commands: CommandRecord[] }>(
      "GET",
      `/v1/sessions/${id}/commands${limit === undefined ? "" : `?limit=${limit}`}`,
    );
    if (res.status !== 200) throw new Error(`commands failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.commands;
  }

  /** `GET .../screen` (json), 200 or throw. */
  async screen(id: string): Promise<ScreenState> {
    const res = await this.request<ScreenState>("GET", `/v1/sessions/${id}/screen?format=json`);
    if (res.status !== 200) throw new Error(`screen failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** `GET .../screen?format=text|ansi`: the body's bytes and the headers. */
  async screenRaw(id: string, format: "text" | "ansi"): Promise<{ status: number; bytes: Buffer; headers: Headers }> {
    const res = await fetch(`${this.url}/v1/sessions/${id}/screen?format=${format}`, {
      headers: this.key ? { authorization: `Bearer ${this.key}` } : {},
    });
    return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()), headers: res.headers };
  }

  /** The raw output [from, to) from `GET .../output?from=&to=`, following `X-Offset-To` until `to`. */
  async outputRange(id: string, from: number, to: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let cursor = from;
    while (cursor < to) {
      const res = await fetch(`${this.url}/v1/sessions/${id}/output?from=${cursor}&to=${to}`, {
        headers: this.key ? { authorization: `Bearer ${this.key}` } : {},
      });
      if (res.status !== 200) throw new Error(`output failed: ${res.status} ${await res.text()}`);
      const bytes = Buffer.from(await res.arrayBuffer());
      const got = { from: Number(res.headers.get("x-offset-from")), to: Number(res.headers.get("x-offset-to")) };
      if (got.from !== cursor) throw new Error(`output from ${cursor} started at ${got.from} (trimmed?)`);
      if (got.to - got.from !== bytes.byteLength) throw new Error(`headers ${JSON.stringify(got)} vs ${bytes.length} bytes`);
      if (got.to > to) throw new Error(`output to ${to} went on to ${got.to}`);
      if (bytes.byteLength === 0) throw new Error(`output [${cursor}, ${to}) answered nothing: only ${got.to} produced?`);
      parts.push(bytes);
      cursor = got.to;
    }
    return Buffer.concat(parts);
  }
}

/**
 * Terminal text as the contract defines it for `expect` and `run` (DESIGN §10), written here on
 * its own (not the implementation's): escape sequences removed (CSI, OSC up to BEL or ST, DCS/
 * SOS/PM/APC up to ST, and two-byte escapes), `\r\n` read as `\n`. Enough for the tests'
 * own output; not a terminal.
 */
export function stripEscapes(text: string): string {
  /* eslint-disable no-control-regex -- escape sequences are what is removed */
  return text
    .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, "")
    .replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, "")
    .replace(/\x1b[PX^_][^\x1b]*\x1b\\/g, "")
    .replace(/\x1b[()*+][0-9A-Za-z]/g, "")
    .replace(/\x1b[ -/]*[0-~]/g, "")
    .replaceAll("\r\n", "\n");
  /* eslint-enable no-control-regex */
}

/** What a terminal of `cols`×`rows` shows after reading `bytes` from empty (@xterm/headless). */
export async function renderScreen(
  bytes: Uint8Array,
  cols: number,
  rows: number,
): Promise<{ lines: string[]; alternate: boolean; cursor: { x: number; y: number }; title: string | null }> {
  const term = new headless.Terminal({ cols, rows, allowProposedApi: true, scrollback: 0 });
  let title: string | null = null;
  term.onTitleChange((t) => {
    title = t;
  });
  try {
    await new Promise<void>((resolve) => term.write(bytes, resolve));
    const buffer = term.buffer.active;
    const lines: string[] = [];
    // translateToString(true) keeps spaces that were written: trailing spaces go, as in `lines`.
    for (let y = 0; y < rows; y++) {
      lines.push((buffer.getLine(buffer.viewportY + y)?.translateToString(true) ?? "").replace(/ +$/, ""));
    }
    return { lines, alternate: buffer.type === "alternate", cursor: { x: buffer.cursorX, y: buffer.cursorY }, title };
  } finally {
    term.dispose();
  }
}

/**
 * `text` as a whole line of terminal output. A line starts after \n or \r: bash's
 * bracketed-paste mode ends the echoed command with `\e[?2004l\r` before the output.
 */
export function line(text: string): RegExp {
  // A line starts after a line break, or after the shell's OSC 133 C mark (a command's output starts there).
  return new RegExp(`(?:[\r\n]|\x1b\\]133;C\x07)${text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\r\n`);
}

/** Resolves when `check` returns a value other than undefined/false; polls with a deadline. */
export async function until<T>(check: () => T | Promise<T>, deadlineMs: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false && value !== null) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export { waitForRunners } from "../scripts/stack.js";

type Waiter = { check: () => boolean; resolve: () => void };

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
  closeCode: number | undefined;
  readonly opened: Promise<void>;
  readonly closed: Promise<number>;
  private waiters = new Set<Waiter>();

  /** Highest offset acknowledged to the server (framed mode acknowledges as it receives). */
  private acked = 0;
  private readonly autoAck: boolean;

  constructor(
    url: string,
    sessionId: string,
    key: string,
    options: { query?: string; protocols?: string[]; ack?: boolean } = {},
  ) {
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
      });
    });
    this.socket.on("message", (data: Buffer, isBinary) => {
      if (!isBinary) {
        const message = JSON.parse(data.toString("utf8"));
        this.messages.push(message);
        this.timeline.push({ kind: "message", message });
      } else if (raw) this.append(data);
      else {
        const frame = decodeFrame(new Uint8Array(data));
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

/** Pids still alive (not zombies) in the terminal session led by `sid`. */
export function liveSessionProcesses(sid: number): number[] {
  return sessionMembers(sid).filter((pid) => {
    const state = statFields(pid)?.[0];
    return state !== undefined && state !== "Z";
  });
}

/** The parent pid of `pid` (which runner process owns a session). */
export function parentPid(pid: number): number {
  return Number(statFields(pid)?.[1]);
}

/** A live process (not a zombie). */
export function alive(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== "Z";
}

/** A process's command line, words joined with spaces; "" once it is gone. */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
  } catch {
    return ""; // gone
  }
}

/** Everything `GET .../output` holds from `from`, following `X-Offset-To` across responses. */
export async function fetchOutput(
  api: Api,
  id: string,
  from?: number,
): Promise<{ from: number; to: number; bytes: Buffer }> {
  const session = await api.get(id);
  const parts: Buffer[] = [];
  let start: number | undefined;
  let cursor = from;
  for (;;) {
    const query = cursor === undefined ? "" : `?from=${cursor}`;
    const res = await fetch(`${api.url}/v1/sessions/${id}/output${query}`, {
      headers: { authorization: `Bearer ${api.key}` },
    });
    if (res.status !== 200) throw new Error(`output failed: ${res.status} ${await res.text()}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    const got = { from: Number(res.headers.get("x-offset-from")), to: Number(res.headers.get("x-offset-to")) };
    if (got.to - got.from !== bytes.byteLength) throw new Error(`headers ${JSON.stringify(got)} vs ${bytes.length} bytes`);
    start ??= got.from;
    parts.push(bytes);
    if (got.to >= session.offset || bytes.byteLength === 0) return { from: start, to: got.to, bytes: Buffer.concat(parts) };
    cursor = got.to;
  }
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

// ---- Server-Sent Events ----

export interface SseMessage {
  event: string;
  id: string | undefined;
  data: string;
}

/**
 * A Server-Sent Events reader for any path (`/v1/events`, a session's `/stream`), parsed by
 * `eventsource-parser` (the SDK's parser). Comment lines (keep-alives) are kept apart, with the
 * time each arrived, and are not events.
 */
export class EventStreamClient {
  readonly events: SseMessage[] = [];
  readonly comments: { text: string; at: number }[] = [];
  /** The last `id:` seen. */
  lastEventId: string | undefined;
  status = 0;
  contentType: string | null = null;
  /** The body when the answer was not a stream (an error). */
  body = "";
  ended = false;
  readonly done: Promise<void>;
  private readonly abort = new AbortController();
  private waiters = new Set<() => void>();

  constructor(url: string, path: string, key: string, options: { lastEventId?: string } = {}) {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: "text/event-stream" };
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
    this.done = this.run(`${url}${path}`, headers).finally(() => {
      this.ended = true;
      this.notify();
    });
  }

  /** The `data:` of every event of `type` (all but comments and `gap` when omitted), as JSON. */
  json<T = any>(type?: string): (T & { id: string | undefined; event: string })[] {
    return this.events
      .filter((e) => (type === undefined ? e.event !== "gap" : e.event === type))
      .map((e) => ({ ...(JSON.parse(e.data) as T), id: e.id, event: e.event }));
  }

  close(): void {
    this.abort.abort();
  }

  /**
   * Resolves once `check` holds, re-checked as the stream moves; rejects at the deadline, or as
   * soon as the stream has ended without it.
   */
  waitFor(check: () => boolean, what: string, deadlineMs = 15_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const failure = (why: string) =>
        new Error(
          `${why} waiting for ${what}; status ${this.status}, ` +
            `events ${JSON.stringify(this.events.map((e) => `${e.id}:${e.event}`))}, body ${this.body.slice(0, 300)}`,
        );
      const test = () => {
        if (check()) {
          this.waiters.delete(test);
          clearTimeout(timer);
          resolve();
        } else if (this.ended) {
          this.waiters.delete(test);
          clearTimeout(timer);
          reject(failure("the stream ended"));
        }
      };
      const timer = setTimeout(() => {
        this.waiters.delete(test);
        reject(failure(`timed out after ${deadlineMs} ms`));
      }, deadlineMs);
      this.waiters.add(test);
      test();
    });
  }

  /** Each event as it is parsed (subclasses keep more of it). */
  protected received(message: SseMessage): void {
    this.events.push(message);
    if (message.id !== undefined) this.lastEventId = message.id;
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private async run(target: string, headers: Record<string, string>): Promise<void> {
    let res: Response;
    try {
      res = await fetch(target, { headers, signal: this.abort.signal });
    } catch {
      return;
    }
    this.status = res.status;
    this.contentType = res.headers.get("content-type");
    this.notify();
    if (!res.body) return;
    if (!this.contentType?.startsWith("text/event-stream")) {
      try {
        this.body = await res.text();
      } catch {
        // aborted
      }
      return;
    }
    const parser = createParser({
      onEvent: (m) => this.received({ event: m.event ?? "message", id: m.id, data: m.data }),
      onComment: (text) => this.comments.push({ text, at: Date.now() }),
    });
    const decoder = new TextDecoder();
    try {
      // Typed as Node's stream: a file that pulls in the DOM library (xterm's typings) must not change it.
      for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
        parser.feed(decoder.decode(piece, { stream: true }));
        this.notify();
      }
    } catch {
      // aborted
    }
  }
}

/** A session's output stream (`GET /v1/sessions/:id/stream`): its `data` events' bytes, in order. */
export class SseClient extends EventStreamClient {
  private chunks: Buffer[] = [];

  constructor(url: string, sessionId: string, key: string, options: { lastEventId?: string; query?: string } = {}) {
    super(url, `/v1/sessions/${sessionId}/stream${options.query ? `?${options.query}` : ""}`, key, options);
  }

  /** The bytes of the `data` events (a terminal's output, or stdout), in order. */
  get bytes(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  /** The `data` and `stderr` events (`pty: false`), in order, each with its `id` and decoded bytes. */
  outputEvents(): { event: "data" | "stderr"; id: string | undefined; data: Buffer }[] {
    return this.events.flatMap((e) =>
      e.event === "data" || e.event === "stderr" ? [{ event: e.event, id: e.id, data: Buffer.from(e.data, "base64") }] : [],
    );
  }

  protected override received(message: SseMessage): void {
    super.received(message);
    if (message.event === "data") this.chunks.push(Buffer.from(message.data, "base64"));
  }
}

/** A tenant's lifecycle events (`GET /v1/events`), from the start or after `lastEventId`. */
export function tenantEvents(url: string, key: string, options: { lastEventId?: string; after?: string } = {}) {
  const query = options.after !== undefined ? `?after=${encodeURIComponent(options.after)}` : "";
  return new EventStreamClient(url, `/v1/events${query}`, key, { lastEventId: options.lastEventId });
}

/** `GET /internal/runners` as the runner token sees it. */
export async function listRunners(url: string, runnerToken: string): Promise<Record<string, any>[]> {
  const res = await fetch(`${url}/internal/runners`, { headers: { authorization: `Bearer ${runnerToken}` } });
  if (res.status !== 200) throw new Error(`GET /internal/runners: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { runners: Record<string, any>[] }).runners;
}
