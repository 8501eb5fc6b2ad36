// The two terminals every benchmark drives the same way: a session through the whole stack
// (framed WebSocket: client → edge → runner → PTY and back) and node-pty in this process, the
// baseline. Both count bytes and look for a marker without keeping the output.
import { randomUUID } from "node:crypto";
import { inflateRaw } from "node:zlib";
import WebSocket from "ws";
import { checkInflated, decodeFrame, encodeInput, encodeNumberedInput } from "../shared/protocol.js";
import { spawnPty } from "../runner/process/pty.js";
import type { BenchStack } from "./stack.js";

export interface BenchTerm {
  readonly name: string;
  send(input: string | Uint8Array): void;
  /** Every output chunk, in order; returns the unsubscribe. */
  onData(listener: (bytes: Buffer) => void): () => void;
  /** Output bytes received since the terminal was opened. */
  readonly received: number;
  /** Slow-consumer cuts the stack made (each resumed by offset); always 0 for node-pty. */
  readonly cuts: number;
  /** Bytes read from the socket(s), framing and compression included; 0 for node-pty. */
  readonly wireBytes: number;
  /** The edge's `error` messages to this client (a refused input, say); none for node-pty. */
  readonly errors?: readonly string[];
  close(): Promise<void>;
}

export const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };
/** How often the framed client acknowledges (the edge cuts clients more than 8 MiB behind). */
const ACK_EVERY_BYTES = 256 * 1024;

/** How a framed bench client connects: `ws`'s defaults unless said otherwise. */
export interface StackTermOptions {
  /** Offer permessage-deflate (ws's default, as browsers do). */
  perMessageDeflate?: boolean;
  /** Ask for output compressed once per chunk (`compress=deflate`, 0x06 frames), as the SDK does. */
  deflate?: boolean;
  /**
   * Type as a writer, as the SDK does: `writer=` on connect, input as numbered 0x07 frames
   * (docs/protocol.md §5, "Input exactly once"); otherwise plain 0x02 frames, as raw clients do.
   */
  numbered?: boolean;
}

/** A framed WebSocket client of `sessionId` that resumes by offset when cut (4008). */
export async function stackTerm(
  stack: Pick<BenchStack, "url" | "apiKey">,
  sessionId: string,
  from: number | "live" = "live",
  options: StackTermOptions = {},
): Promise<BenchTerm> {
  const listeners: ((bytes: Buffer) => void)[] = [];
  let next: number | undefined;
  let acked = 0;
  let cuts = 0;
  let received = 0;
  /** The edge's `error` messages (a refused input, say), in order. */
  const errors: string[] = [];
  /** Bytes read by the sockets closed so far, and the open one's TCP socket. */
  let wireClosed = 0;
  let tcp: { bytesRead: number } | undefined;
  let socket: WebSocket;
  let closing = false;
  let ended: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (ended = resolve));

  const dial = (query: string) =>
    new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`${stack.url.replace(/^http/, "ws")}/v1/sessions/${sessionId}/connect?${query}`, {
        headers: { authorization: `Bearer ${stack.apiKey}` },
        // As the SDK connects from Node (ws's defaults: permessage-deflate offered, and workerd
        // accepts it, as it does for browsers).
        perMessageDeflate: options.perMessageDeflate ?? true,
      });
      socket = ws;
      ws.once("upgrade", (response) => (tcp = response.socket));
      ws.once("error", reject);
      // In order, each 0x06 frame inflated on zlib's thread pool (as `ws` inflates
      // permessage-deflate), so 50 viewers' inflating does not all wait on this one thread.
      const waiting: { ready: boolean; run: () => void }[] = [];
      const pump = () => {
        while (waiting[0]?.ready) waiting.shift()?.run();
      };
      const inOrder = (run: () => void) => {
        if (waiting.length === 0) run();
        else waiting.push({ ready: true, run });
      };
      const output = (offset: number, data: Uint8Array) => {
        if (next !== undefined && offset !== next) throw new Error(`offset ${offset}, expected ${next}`);
        next = offset + data.byteLength;
        received += data.byteLength;
        const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
        for (const listener of [...listeners]) listener(bytes);
        if (next - acked >= ACK_EVERY_BYTES) {
          acked = next;
          ws.send(JSON.stringify({ type: "ack", offset: next }));
        }
      };
      ws.on("message", (data: Buffer, isBinary) => {
        if (!isBinary) {
          return inOrder(() => {
            const message = JSON.parse(data.toString("utf8")) as { type: string; offset?: number; code?: string; message?: string };
            if (message.type === "error") errors.push(`${message.code}: ${message.message}`);
            if (message.type === "live") {
              next ??= message.offset;
              resolve();
            }
          });
        }
        const frame = decodeFrame(data);
        if (frame.op === "deflated") {
          const entry = { ready: false, run: () => undefined as void };
          waiting.push(entry);
          inflateRaw(frame.data, { maxOutputLength: Math.max(1, frame.length) }, (error, inflated) => {
            entry.ready = true;
            entry.run = () => {
              if (error) throw error;
              checkInflated(frame, inflated);
              output(frame.offset, inflated);
            };
            pump();
          });
          return;
        }
        // stdout (or the terminal) and stderr share one offset space (pty: false sessions).
        if (frame.op === "output" || frame.op === "stderr") inOrder(() => output(frame.offset, frame.data));
      });
      ws.once("open", () => ws.send(JSON.stringify({ type: "ack", offset: next ?? 0 })));
      ws.once("close", (code) => {
        wireClosed += tcp?.bytesRead ?? 0;
        tcp = undefined;
        // After every frame that came before it: a redial resumes where those end.
        inOrder(() => {
          if (code === 4008 && !closing) {
            cuts++;
            void dial(`from=${next}${options.deflate ? "&compress=deflate" : ""}`);
          } else ended();
        });
      });
    });

  const compress = options.deflate ? "&compress=deflate" : "";
  const writer = options.numbered ? `&writer=bench-${randomUUID()}` : "";
  await dial(`from=${from}${compress}${writer}`);
  /** The next numbered input byte's offset in this writer's input. */
  let typed = 0;
  return {
    name: "ptybroker",
    send: (input) => {
      const bytes = typeof input === "string" ? Buffer.from(input) : input;
      if (!options.numbered) return socket.send(encodeInput(bytes));
      socket.send(encodeNumberedInput(typed, bytes));
      typed += bytes.byteLength;
    },
    onData: (listener) => subscribe(listeners, listener),
    get cuts() {
      return cuts;
    },
    get received() {
      return received;
    },
    errors,
    get wireBytes() {
      return wireClosed + (tcp?.bytesRead ?? 0);
    },
    async close() {
      closing = true;
      socket.close(1000);
      await done;
    },
  };
}

/** A session on the stack (of its `api`'s tenant) with one client attached live. */
export async function stackSession(
  stack: Pick<BenchStack, "url" | "apiKey" | "api">,
  options: StackTermOptions = {},
): Promise<{ id: string; term: BenchTerm }> {
  const session = await stack.api.create(BASH);
  return { id: session.id, term: await stackTerm(stack, session.id, "live", options) };
}

/**
 * bash on node-pty in this process: the baseline, with nothing between the PTY and the reader.
 * `shell` is BASH unless said otherwise (the agent rows start bash as the runner's sessions do).
 */
export function rawTerm(shell: { command: string; args: string[]; home?: string } = BASH): BenchTerm {
  const home = shell.home ?? process.env.HOME ?? "/";
  const pty = spawnPty({
    command: shell.command,
    args: shell.args,
    cwd: shell.home ?? process.cwd(),
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TERM: "xterm-256color", HOME: home },
    cols: 80,
    rows: 24,
  });
  const listeners: ((bytes: Buffer) => void)[] = [];
  let received = 0;
  pty.onData((bytes) => {
    received += bytes.byteLength;
    for (const listener of [...listeners]) listener(bytes);
  });
  const exited = new Promise<void>((resolve) => pty.onExit(() => resolve()));
  return {
    name: "node-pty",
    send: (input) => pty.write(typeof input === "string" ? Buffer.from(input) : input),
    onData: (listener) => subscribe(listeners, listener),
    cuts: 0,
    wireBytes: 0,
    get received() {
      return received;
    },
    async close() {
      pty.signalProcess("SIGKILL");
      await exited;
    },
  };
}

export function subscribe<T>(list: T[], item: T): () => void {
  list.push(item);
  return () => {
    const at = list.indexOf(item);
    if (at >= 0) list.splice(at, 1);
  };
}

/** Resolves when `marker` has appeared in `term`'s output after this call; counts bytes meanwhile. */
export function waitForMarker(term: BenchTerm, marker: string, deadlineMs = 120_000): Promise<{ bytes: number; at: number }> {
  const needle = Buffer.from(marker);
  let carry = Buffer.alloc(0);
  let bytes = 0;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`${term.name}: no ${marker} after ${deadlineMs} ms`));
    }, deadlineMs);
    const off = term.onData((chunk) => {
      bytes += chunk.byteLength;
      const window = carry.byteLength ? Buffer.concat([carry, chunk]) : chunk;
      if (window.indexOf(needle) >= 0) {
        off();
        clearTimeout(timer);
        resolve({ bytes, at: performance.now() });
        return;
      }
      carry = Buffer.from(window.subarray(Math.max(0, window.byteLength - needle.byteLength + 1)));
    });
  });
}

/** Sends `command` and waits for `READY-<n>` printed by it: the shell has run everything before. */
let readyCount = 0;
export async function settle(term: BenchTerm, command = ""): Promise<void> {
  const n = ++readyCount;
  const seen = waitForMarker(term, `READY-${n * 2}`, 30_000);
  term.send(`${command}${command ? "; " : ""}echo READY-$((${n}*2))\r`);
  await seen;
}
