// Test code for the Pty's unit tests (pty.test.ts, pty-reconnect.test.ts), imported by tests only:
// a scripted socket standing in for the server, and agent calls that make no REST call.
import { encodeOutput, encodeScreen } from "../shared/protocol.js";
import { AgentCalls } from "./agent.js";
import { Http } from "./http.js";
import type { SocketLike, SocketQuery } from "./pty-types.js";

/** A socket the test drives: it opens, says hello, and delivers the frames and messages it is told to. */
export class ScriptedSocket implements SocketLike {
  binaryType = "blob";
  readyState = 0;
  sent: (string | Uint8Array)[] = [];
  /** The code it was closed with, by the Pty or the test. */
  closedWith: number | undefined;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;

  readonly from: string | null;
  constructor(readonly query: SocketQuery) {
    this.from = query.from;
  }

  send(data: string | Uint8Array): void {
    this.sent.push(data);
  }
  close(code = 1000, reason = ""): void {
    this.closedWith = code;
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
    this.json({ type: "hello", session: { id: "s", cols: 80, rows: 24 } });
  }
  json(message: unknown): void {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
  output(offset: number, text: string): void {
    this.binary(encodeOutput(offset, new TextEncoder().encode(text)));
  }
  stderr(offset: number, text: string): void {
    this.binary(encodeOutput(offset, new TextEncoder().encode(text), "stderr"));
  }
  screen(offset: number, cols: number, rows: number, text: string): void {
    this.json({ type: "screen", offset, cols, rows });
    this.binary(encodeScreen(offset, new TextEncoder().encode(text)));
  }
  binary(frame: Uint8Array): void {
    this.onmessage?.({ data: frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.byteLength) });
  }
}

/** A transport's agent calls for tests that make none: any REST call fails. */
export function noAgentCalls(): AgentCalls {
  return new AgentCalls(new Http("http://broker.invalid", { apiKey: "k" }, () => Promise.reject(new Error("no REST in this test"))), "s");
}
