// The agent layer's calls (docs/protocol.md §3, "Agents"), for one session, over REST: input that
// answers with the output offset it was accepted at, expect, run, commands and the screen.
// `PtyBroker` offers them by session id and `Pty` for its own session; neither needs a socket open.
import type { CommandRecord, ExpectResult, RunResult, ScreenState } from "../shared/agent.js";
import { bytesToBase64 } from "../shared/base64.js";
import { PtyBrokerError } from "./errors.js";
import type { Http } from "./http.js";
import { PATIENCE_NEEDED_SEC } from "./patience.js";

export interface InputOptions {
  /**
   * Sent as `Idempotency-Key` (1..128 visible ASCII characters): the server applies the input
   * once however often the same key comes within 10 minutes, and answers each time alike. With a
   * key, the SDK also retries a request that got no answer (twice), which is then safe.
   */
  idempotencyKey?: string | undefined;
  signal?: AbortSignal | undefined;
  /**
   * Closes the process's stdin after `data` (`data` may be empty): a `pty: false` process reads
   * end of file; a terminal gets Ctrl+D. Input after it is refused (`CONFLICT`) on `pty: false`.
   */
  eof?: boolean | undefined;
}

/** What `input` answers: bytes taken, and the session's output offset when they were accepted. */
export interface InputResult {
  bytes: number;
  /** Whatever the input causes is output at or after this offset: `expect`'s `from`. */
  offset: number;
}

export interface ExpectOptions {
  /**
   * Match output from this offset on (the `offset` an `input` answered, say). Default: the
   * session's offset when the request reaches the server, so earlier output is not searched.
   */
  from?: number | undefined;
  /** How long the server waits for a match: default 30, at most 300. */
  timeoutSec?: number | undefined;
  /**
   * A string pattern is matched literally unless this is false (then it is a regular
   * expression's source). Not for a RegExp, which is always a regular expression.
   */
  literal?: boolean | undefined;
  /** Flags for a string pattern, from `imsu`. A RegExp carries its own. */
  flags?: string | undefined;
  signal?: AbortSignal | undefined;
}

export interface RunOptions {
  /** How long to wait for the command to finish: default 30, at most 3600. Past it the answer
   * has `timedOut: true` and the command keeps running. */
  timeoutSec?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** Bytes that repaint a screen on an empty terminal of `cols`×`rows`, as it is at `offset`. */
export interface ScreenRepaint {
  /** Output continues at this offset: the repaint shows every byte below it. */
  offset: number;
  cols: number;
  rows: number;
  data: Uint8Array;
}

/** The `command` message: a shell command ended (framed WebSocket clients). */
export type CommandEvent = Omit<CommandRecord, "startedAt" | "endedAt">;

/** Flags the server takes; `g`, `y` and `d` of a RegExp mean nothing for one search and are left out. */
const SERVER_FLAGS = "imsu";
const IGNORED_FLAGS = "gyd";
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/;
/** Retries of a keyed input that got no answer, and the pause before each. */
const INPUT_RETRY_DELAYS_MS = [250, 1000];

/** The body of `POST .../expect` for a pattern and its options (pure; exported for tests). */
export function expectBody(pattern: string | RegExp, options: ExpectOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (pattern instanceof RegExp) {
    if (options.literal !== undefined || options.flags !== undefined) {
      throw new PtyBrokerError("INVALID_REQUEST", "a RegExp carries its own flags and is never literal: pass a string for literal or flags");
    }
    const unknown = [...pattern.flags].filter((f) => !SERVER_FLAGS.includes(f) && !IGNORED_FLAGS.includes(f));
    if (unknown.length) {
      throw new PtyBrokerError("INVALID_REQUEST", `expect takes the flags ${SERVER_FLAGS}; ${pattern} has ${unknown.join("")}`);
    }
    body.pattern = pattern.source;
    body.literal = false;
    const flags = [...pattern.flags].filter((f) => SERVER_FLAGS.includes(f)).join("");
    if (flags) body.flags = flags;
  } else {
    if (typeof pattern !== "string" || pattern === "") {
      throw new PtyBrokerError("INVALID_REQUEST", "expect needs a pattern: a non-empty string or a RegExp");
    }
    body.pattern = pattern;
    body.literal = options.literal ?? true;
    if (options.flags !== undefined) body.flags = options.flags;
  }
  if (options.from !== undefined) body.from = options.from;
  if (options.timeoutSec !== undefined) body.timeoutSec = options.timeoutSec;
  return body;
}

/** The REST calls of the agent layer for one session. */
export class AgentCalls {
  constructor(
    private readonly http: Http,
    readonly id: string,
  ) {}

  /**
   * Types `data` (text as UTF-8, bytes as they are) through `POST .../input` and answers
   * `{bytes, offset}`: pass `offset` as `expect`'s `from` to match only what the input caused.
   */
  async input(data: string | Uint8Array, options: InputOptions = {}): Promise<InputResult> {
    const { idempotencyKey, signal, eof } = options;
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new PtyBrokerError("INVALID_REQUEST", "an idempotency key is 1 to 128 visible ASCII characters");
    }
    const body = {
      ...(typeof data === "string" ? { data } : { data: bytesToBase64(data), encoding: "base64" }),
      ...(eof ? { eof: true } : {}),
    };
    const headers = idempotencyKey === undefined ? undefined : { "idempotency-key": idempotencyKey };
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.http.json<InputResult>("POST", this.path("input"), body, { headers, signal });
      } catch (error) {
        const retry = idempotencyKey !== undefined && error instanceof PtyBrokerError && error.code === "NETWORK";
        const delay = INPUT_RETRY_DELAYS_MS[attempt];
        if (!retry || delay === undefined || signal?.aborted) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /**
   * Waits on the server until the output (escape sequences removed, `\r\n` read as `\n`) matches:
   * `{matched: true, match, groups, start, end}` (raw offsets), or `{matched: false, reason:
   * "timeout" | "exited", offset}`. A string is matched literally unless `literal: false`.
   */
  async expect(pattern: string | RegExp, options: ExpectOptions = {}): Promise<ExpectResult> {
    const body = expectBody(pattern, options);
    const patient = (options.timeoutSec ?? 30) > PATIENCE_NEEDED_SEC;
    return this.http.json<ExpectResult>("POST", this.path("expect"), body, { signal: options.signal, patient, holds: true });
  }

  /**
   * Types `command` (one line) into the session's shell at its prompt and answers once it has
   * finished: its exit code and its own output as text. Throws `PtyBrokerError` with code `BUSY`
   * (the shell is not at its prompt), `NO_SHELL_INTEGRATION` (the session is not the default
   * login shell) or `SESSION_EXITED`.
   */
  async run(command: string, options: RunOptions = {}): Promise<RunResult> {
    if (typeof command !== "string" || command.trim() === "") {
      throw new PtyBrokerError("INVALID_REQUEST", "run needs a command");
    }
    if (/[\r\n]/.test(command)) throw new PtyBrokerError("INVALID_REQUEST", "command is one line (no \\r or \\n)");
    const body: Record<string, unknown> = { command };
    if (options.timeoutSec !== undefined) body.timeoutSec = options.timeoutSec;
    const patient = (options.timeoutSec ?? 30) > PATIENCE_NEEDED_SEC;
    return this.http.json<RunResult>("POST", this.path("run"), body, { signal: options.signal, patient, holds: true });
  }

  /** The commands the shell ran (typed by anyone, or by `run`), oldest first: the last `limit` (≤ 1000). */
  async commands(options: { limit?: number | undefined } = {}): Promise<CommandRecord[]> {
    const query = options.limit === undefined ? "" : `?limit=${options.limit}`;
    const { commands } = await this.http.json<{ commands: CommandRecord[] }>("GET", `${this.path("commands")}${query}`);
    return commands;
  }

  /** The terminal as it looks now: lines of text, cursor, size, alternate screen, title. */
  screen(): Promise<ScreenState> {
    return this.http.json<ScreenState>("GET", `${this.path("screen")}?format=json`);
  }

  /** The screen's lines as text, joined with `\n` (trailing spaces removed). */
  async screenText(): Promise<string> {
    const res = await this.http.send("GET", `${this.path("screen")}?format=text`);
    return res.text();
  }

  /** Bytes that repaint the screen on an empty terminal of its size, with its offset and size. */
  async screenAnsi(): Promise<ScreenRepaint> {
    const res = await this.http.send("GET", `${this.path("screen")}?format=ansi`);
    const data = new Uint8Array(await res.arrayBuffer());
    const header = (name: string) => Number(res.headers.get(name) ?? NaN);
    return { offset: header("x-offset"), cols: header("x-cols"), rows: header("x-rows"), data };
  }

  private path(action: string): string {
    return `/v1/sessions/${encodeURIComponent(this.id)}/${action}`;
  }
}
