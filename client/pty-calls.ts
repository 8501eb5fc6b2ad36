// What a Pty asks of the API over REST alone, socket or none (pty.ts adds the socket): the
// session's recording, kill, update and tokens, and the agent layer (docs/protocol.md §3,
// "Agents"). A viewer token's terminal refuses here what it may not do, before any request.
import type { CommandRecord, ExpectResult, RunResult, ScreenState } from "../shared/agent.js";
import type { Session } from "../shared/session.js";
import type { ExpectOptions, InputOptions, InputResult, RunOptions, ScreenRepaint } from "./agent.js";
import { Emitter } from "./emitter.js";
import { PtyBrokerError } from "./errors.js";
import type { PtyEvents, PtyTransport, SessionPatch } from "./pty-types.js";

export class PtyCalls extends Emitter<PtyEvents> {
  /** The session as last heard: from `hello`, then kept up to date by resize and exit. */
  session: Session | undefined;

  constructor(
    readonly id: string,
    protected readonly transport: PtyTransport,
    /** A viewer token's terminal: input, resize and signal are refused. */
    readonly readOnly: boolean,
  ) {
    super();
  }

  /** The session's output as an asciicast v2 recording (`asciinema play` plays it), from `from` to `to`. */
  recording(range: { from?: number | undefined; to?: number | undefined } = {}): Promise<string> {
    return this.transport.recording(this.id, range);
  }

  /** Ends the process (SIGHUP, then SIGKILL after a grace) and answers once it is gone. */
  kill(): Promise<Session> {
    return this.transport.rest<Session>("DELETE", `/v1/sessions/${encodeURIComponent(this.id)}`);
  }

  /**
   * Changes the session's timers, label or tags (API key only) and answers the session as it is
   * now, which `pty.session` then holds.
   */
  async update(patch: SessionPatch): Promise<Session> {
    const session = await this.transport.rest<Session>("PATCH", `/v1/sessions/${encodeURIComponent(this.id)}`, patch);
    this.session = session;
    return session;
  }

  /**
   * A session token for this session (`viewer` reads, `writer` also types), for a browser or
   * another process to attach without the API key. API key only. `broker.createToken(id, role)`
   * is the same call by id, answering `expiresAt` too.
   */
  async token(role: "viewer" | "writer", options: { ttlSec?: number | undefined } = {}): Promise<string> {
    const { token } = await this.transport.rest<{ token: string }>("POST", this.path("tokens"), {
      role,
      ttlSec: options.ttlSec,
    });
    return token;
  }

  // ---- the agent layer (REST; docs/protocol.md §3, "Agents") ----

  /**
   * Types `data` through `POST .../input` and answers `{bytes, offset}`: `offset` is the output
   * offset when the server took the input, the `from` for an `expect` that must match only what
   * the input caused. Use it to drive a program (an agent); `sendInput` is for keystrokes: over
   * the socket, faster, and it answers nothing.
   */
  async input(data: string | Uint8Array, options: InputOptions = {}): Promise<InputResult> {
    this.assertWritable();
    return this.transport.calls.input(data, options);
  }

  /**
   * Waits on the server until the output matches `pattern`: a string is matched literally
   * (unless `literal: false`), a RegExp as a regular expression (its flags from `imsu`).
   */
  expect(pattern: string | RegExp, options: ExpectOptions = {}): Promise<ExpectResult> {
    return this.transport.calls.expect(pattern, options);
  }

  /** Runs one command line in the session's shell and answers its exit code and output. */
  async run(command: string, options: RunOptions = {}): Promise<RunResult> {
    this.assertWritable();
    return this.transport.calls.run(command, options);
  }

  /** The commands the shell ran, oldest first (the last `limit`, at most 1000). */
  commands(options: { limit?: number | undefined } = {}): Promise<CommandRecord[]> {
    return this.transport.calls.commands(options);
  }

  /** The terminal as it looks now (from the server's emulator): lines, cursor, size. */
  screen(): Promise<ScreenState> {
    return this.transport.calls.screen();
  }

  /** The screen's lines as text, joined with `\n`. */
  screenText(): Promise<string> {
    return this.transport.calls.screenText();
  }

  /** Bytes that repaint the screen on an empty terminal of its size. */
  screenAnsi(): Promise<ScreenRepaint> {
    return this.transport.calls.screenAnsi();
  }

  protected assertWritable(): void {
    if (this.readOnly) throw this.viewerRefusal();
  }

  protected viewerRefusal(): PtyBrokerError {
    return new PtyBrokerError("FORBIDDEN", "a viewer token may not send input, eof, resize or signal");
  }

  protected path(action: string): string {
    return `/v1/sessions/${encodeURIComponent(this.id)}/${action}`;
  }
}
