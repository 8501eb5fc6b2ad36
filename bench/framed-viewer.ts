// The framed client of the agent rows (9–12, bench/agent.ts): it knows offsets, screens and
// skips, as the SDK does, and counts what the rows report (cuts, gaps, screens).
import type { Socket } from "node:net";
import WebSocket from "ws";
import { decodeFrame, encodeInput } from "../shared/protocol.js";
import type { BenchStack } from "./stack.js";
import { type BenchTerm, subscribe } from "./terminals.js";

/** A client's acknowledgement step, as the SDK and terminals.ts acknowledge. */
const ACK_EVERY_BYTES = 256 * 1024;

export interface ViewerOptions {
  /** `from` on connect: an offset, `live` or `screen`; omitted, the whole retained history. */
  from?: number | "live" | "screen";
  onLag?: "screen";
}

/**
 * A framed WebSocket client for the agent rows: output frames checked to continue each other,
 * `0x04` screen frames (output goes on at their offset), `gap`s counted, acknowledgements as
 * the SDK sends them (every 256 KiB, and the screen's offset at once), and a pause that stops
 * both reading the socket and acknowledging. Not resumed when cut: a cut is what is counted.
 */
export class FramedViewer implements BenchTerm {
  readonly name = "viewer";
  /** Offset of the next output byte (after a screen frame: the screen's). */
  offset: number | undefined;
  /** Output payload bytes received. */
  received = 0;
  /** Every payload received (output, screens, control messages), bytes. */
  payloadBytes = 0;
  readonly cuts = 0;
  screens = 0;
  screenBytes = 0;
  gaps = 0;
  readonly offsetErrors: string[] = [];
  closeCode: number | undefined;
  /** performance.now() at the dial, the first binary frame, `live`. */
  readonly dialledAt: number;
  firstFrameAt: number | undefined;
  liveAt: number | undefined;
  private acked = 0;
  private paused = false;
  private closing = false;
  private readonly outputListeners: ((bytes: Buffer) => void)[] = [];
  private readonly screenListeners: ((bytes: Buffer) => void)[] = [];
  private readonly liveWaiters: (() => void)[] = [];
  private readonly ws: WebSocket;
  private readonly closed: Promise<void>;

  private constructor(stack: BenchStack, sessionId: string, options: ViewerOptions) {
    const query = new URLSearchParams();
    if (options.from !== undefined) query.set("from", String(options.from));
    if (options.onLag) query.set("onLag", options.onLag);
    this.dialledAt = performance.now();
    this.ws = new WebSocket(`${stack.url.replace(/^http/, "ws")}/v1/sessions/${sessionId}/connect?${query}`, {
      headers: { authorization: `Bearer ${stack.apiKey}` },
    });
    this.closed = new Promise((resolve) => {
      this.ws.once("close", (code) => {
        this.closeCode = code;
        resolve();
      });
    });
    // Local quirk (wrangler dev): a framed client's first frame is an empty acknowledgement.
    this.ws.once("open", () => this.ws.send(JSON.stringify({ type: "ack", offset: 0 })));
    // A failed dial rejects connect() (by its close); later errors end in a close, counted.
    this.ws.on("error", () => undefined);
    this.ws.on("message", (data: Buffer, isBinary) => this.onMessage(data, isBinary));
  }

  /** Connects and resolves once the client is live (after any screen and replay). */
  static async connect(stack: BenchStack, sessionId: string, options: ViewerOptions = {}): Promise<FramedViewer> {
    const viewer = new FramedViewer(stack, sessionId, options);
    await new Promise<void>((resolve, reject) => {
      viewer.liveWaiters.push(resolve);
      void viewer.closed.then(() => reject(new Error(`closed ${viewer.closeCode} before live`)));
    });
    return viewer;
  }

  /** The payload bytes the socket has read so far, compressed as they came (permessage-deflate). */
  get wireBytes(): number {
    return (this.ws as unknown as { _socket?: Socket })._socket?.bytesRead ?? 0;
  }

  /** Closed by the server (not by close()). */
  get cut(): boolean {
    return this.closeCode !== undefined && !this.closing;
  }

  send(input: string | Uint8Array): void {
    this.ws.send(encodeInput(typeof input === "string" ? Buffer.from(input) : input));
  }

  onData(listener: (bytes: Buffer) => void): () => void {
    return subscribe(this.outputListeners, listener);
  }

  /** Each screen frame's repaint bytes. */
  onScreen(listener: (bytes: Buffer) => void): () => void {
    return subscribe(this.screenListeners, listener);
  }

  /** Stops reading the socket (the edge's sends pile up in workerd and the kernel) and acknowledging. */
  pause(): void {
    this.paused = true;
    this.ws.pause();
  }

  resume(): void {
    this.paused = false;
    this.ws.resume();
    this.ack();
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.closeCode === undefined) {
      if (this.paused) this.ws.terminate();
      else this.ws.close(1000);
    }
    await this.closed;
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    this.payloadBytes += data.byteLength;
    if (!isBinary) {
      const message = JSON.parse(data.toString("utf8")) as { type: string; offset?: number; from?: number; to?: number };
      if (message.type === "gap") {
        this.gaps++;
        if (message.from !== this.offset) this.offsetErrors.push(`gap from ${message.from}, at ${this.offset}`);
      } else if (message.type === "live") {
        this.offset ??= message.offset;
        this.liveAt ??= performance.now();
        for (const resolve of this.liveWaiters.splice(0)) resolve();
      }
      return;
    }
    this.firstFrameAt ??= performance.now();
    const frame = decodeFrame(data);
    if (frame.op === "screen") {
      this.screens++;
      this.screenBytes += frame.data.byteLength;
      this.offset = frame.offset;
      const bytes = Buffer.from(frame.data.buffer, frame.data.byteOffset, frame.data.byteLength);
      for (const listener of [...this.screenListeners]) listener(bytes);
      // As the SDK does: the client's position is now the screen's offset.
      this.ack(true);
      return;
    }
    if (frame.op !== "output") return void this.offsetErrors.push(`frame ${frame.op}`);
    if (this.offset !== undefined && frame.offset !== this.offset) this.offsetErrors.push(`offset ${frame.offset}, expected ${this.offset}`);
    this.offset = frame.offset + frame.data.byteLength;
    this.received += frame.data.byteLength;
    const bytes = Buffer.from(frame.data.buffer, frame.data.byteOffset, frame.data.byteLength);
    for (const listener of [...this.outputListeners]) listener(bytes);
    if (this.offset - this.acked >= ACK_EVERY_BYTES) this.ack();
  }

  private ack(always = false): void {
    if (this.paused || this.offset === undefined || this.ws.readyState !== WebSocket.OPEN) return;
    if (!always && this.offset <= this.acked) return;
    this.acked = this.offset;
    this.ws.send(JSON.stringify({ type: "ack", offset: this.offset }));
  }
}
