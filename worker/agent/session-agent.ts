// The agent layer of one session (docs/protocol.md §3, "Agents"): `expect` waits
// (expect-watch.ts, riding the client hub), `run` and `screen` questions to a runner
// (link/link-calls.ts), the commands the shell ran (command-log.ts) and REST input's
// Idempotency-Key (idempotency.ts). The session object checks that the session exists and may be
// acted on; this part does the rest.
import type { CommandRecord, ExpectResult, RunResult, ScreenSnapshot } from "../../shared/agent.js";
import { type Failure, fail } from "../../shared/errors.js";
import type { RunnerLinkMessage, ServerMessage } from "../../shared/protocol.js";
import { CommandLog } from "./command-log.js";
import { ExpectMatcher, MAX_EXPECT_PROGRAM } from "../../shared/expect-matcher.js";
import { ExpectWatch } from "./expect-watch.js";
import { IdempotencyKeys } from "./idempotency.js";
import { type CallsPort, LinkCalls } from "../link/link-calls.js";
import { PromptMarks } from "./prompt-marks.js";
import type { Subscriber } from "../clients/subscribers.js";
import type { ExpectQuery, InputAnswer } from "../rpc.js";

/**
 * The program sizes of one session's waiting expects together (docs/security.md, "Fair share"):
 * every push searches each one's window, so this bounds what one push of output costs; sixteen
 * prompt patterns fit, two of the largest do.
 */
export const SESSION_EXPECT_PROGRAM = 2 * MAX_EXPECT_PROGRAM;

export class SessionAgent {
  readonly calls: LinkCalls;
  private readonly commands: CommandLog;
  readonly idempotency: IdempotencyKeys<InputAnswer>;
  /** Where the shell's command lines are (expect skips them). */
  readonly marks: PromptMarks;
  /** An ended session's screen does not change: kept once asked for. */
  private endedScreen: ScreenSnapshot | undefined;
  /** The program sizes of the expects waiting now, together (SESSION_EXPECT_PROGRAM at most). */
  private waitingProgram = 0;

  constructor(
    sql: SqlStorage,
    kv: SyncKvStorage,
    private readonly port: AgentPort,
  ) {
    this.calls = new LinkCalls(port);
    this.commands = new CommandLog(sql);
    this.idempotency = new IdempotencyKeys(sql);
    this.marks = new PromptMarks(kv);
  }

  /** Answers when the output from `from` (default: now) matches, the session ends, or time is up. */
  expect(request: ExpectQuery): Promise<ExpectResult | Failure> {
    if (this.port.watchFull()) return Promise.resolve(fail("QUOTA_EXCEEDED", "too many expects at once on this session; try again", 1));
    const size = ExpectMatcher.programSize(request.pattern, request.literal, request.flags);
    if (this.waitingProgram + size > SESSION_EXPECT_PROGRAM) {
      const message =
        `the expects waiting on this session compile to ${this.waitingProgram} RE2 instructions together; ` +
        `this one's ${size} would pass ${SESSION_EXPECT_PROGRAM}: try again`;
      return Promise.resolve(fail("QUOTA_EXCEEDED", message, 1));
    }
    this.waitingProgram += size;
    const from = request.from ?? this.port.offset();
    const inCommandLine = this.marks.inCommandLine(from);
    const watch = new ExpectWatch({ ...request, from, inCommandLine }, (over) => {
      this.waitingProgram -= size;
      this.port.unwatch(over);
    });
    this.port.watch(watch, watch.cursor);
    return watch.result;
  }

  /** The host's shell runs `command` (runner/agent/shell-tracker.ts). */
  async run(command: string, timeoutMs: number): Promise<RunResult | Failure> {
    const result = await this.calls.run(command, timeoutMs);
    if ("failure" in result) return result;
    return { ...result, startedAt: new Date(result.startedAt).toISOString() };
  }

  /** The session's storage is going (purge, or never placed): nothing in memory outlives it. */
  forget(): void {
    this.endedScreen = undefined;
    this.marks.forget();
  }

  /** The newest `limit` commands, oldest first. */
  commandList(limit: number): { commands: CommandRecord[] } {
    return { commands: this.commands.list(limit) };
  }

  /** A command the runner reports: kept once, and told to framed clients. */
  commandEnded(msg: Extract<RunnerLinkMessage, { type: "command" }>): void {
    const { command, exitCode, from, to } = msg;
    const startedAt = new Date(msg.startedAt).toISOString();
    const stored = this.commands.add({ command, exitCode, from, to, startedAt, endedAt: new Date(msg.endedAt).toISOString() });
    if (stored) this.port.broadcast({ type: "command", seq: stored.seq, command, exitCode, from, to });
  }

  /**
   * The screen now: the host's live emulator, else rebuilt by a reader from the retained log at
   * the session's size. An ended session's screen is kept once it has been had.
   */
  async screen(): Promise<ScreenSnapshot | Failure> {
    const ended = this.port.ended();
    const offset = this.port.offset();
    if (ended && this.endedScreen?.offset === offset) return this.endedScreen;
    const { cols, rows } = this.port.size();
    const screen = await this.calls.screen({ from: this.port.retainedFrom(), to: offset, cols, rows });
    if (ended && !("failure" in screen) && screen.offset === offset) this.endedScreen = screen;
    return screen;
  }
}

// ---- Shared types ----

/** What the agent layer needs from its session. */
export interface AgentPort extends CallsPort {
  offset(): number;
  retainedFrom(): number;
  ended(): boolean;
  size(): { cols: number; rows: number };
  watch(sub: Subscriber, from: number): void;
  unwatch(sub: Subscriber): void;
  watchFull(): boolean;
  broadcast(message: ServerMessage): void;
}
