// For the agent layer's tests (runner/agent/*.test.ts; test code only, no source imports it): a
// real bash on a real PTY (node-pty), started as a hosted session starts it (with or without the
// shell integration), its output fed to an AgentHost in offset order, and what the host says on the
// link collected. No mocks.
import type { ScreenSnapshot } from "../../shared/agent.js";
import type { RunnerLinkMessage } from "../../shared/protocol.js";
import { type ShellMark, ShellMarkScanner } from "../../shared/shell-marks.js";
import { AgentHost } from "./agent-host.js";
import type { OutputLog } from "../log/output-log.js";
import { type PtyExit, type PtyProcess, spawnPty } from "../process/pty.js";
import type { RunOutcome } from "./shell-tracker.js";
import { integratedBashArgs } from "./shell-integration.js";

export type CommandMessage = Extract<RunnerLinkMessage, { type: "command" }>;

export interface TestShellOptions {
  /** The user's home (their dotfiles), and the shell's working directory. */
  home: string;
  /** The integration's init file: started with it; absent: `bash -l`, as without the integration. */
  initFile?: string;
  cols?: number;
  rows?: number;
  /** Output is appended here too, under `key` (for rebuilt screens). */
  log?: OutputLog;
  key?: string;
  env?: Record<string, string>;
}

/** Polls `condition` until it holds; fails at the deadline (no fixed sleeps in tests). */
export async function until(what: string, condition: () => boolean, deadlineMs = 10_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export class TestShell {
  readonly pty: PtyProcess;
  readonly agent: AgentHost;
  /** Every OSC 133 mark in the output, in order (scanned here, apart from the host's own tracker). */
  readonly marks: ShellMark[] = [];
  readonly messages: RunnerLinkMessage[] = [];
  offset = 0;
  exit: PtyExit | null = null;
  private readonly chunks: Buffer[] = [];
  private readonly scanner = new ShellMarkScanner(0);
  private nextId = 1;
  private appends: Promise<void> = Promise.resolve();

  constructor(readonly options: TestShellOptions) {
    const cols = options.cols ?? 80;
    const rows = options.rows ?? 24;
    this.pty = spawnPty({
      command: "/bin/bash",
      args: options.initFile ? integratedBashArgs(options.initFile) : ["-l"],
      cwd: options.home,
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: options.home, TERM: "xterm-256color", LANG: "C.UTF-8", ...options.env },
      cols,
      rows,
    });
    this.agent = new AgentHost(
      "test",
      {
        send: (message) => this.messages.push(message),
        type: (bytes) => this.pty.write(bytes),
        screenBehind: (behind) => (behind ? this.pty.pause() : this.pty.resume()),
        failed: (error) => {
          throw new Error(`the agent layer failed: ${error}`);
        },
      },
      { cols, rows, shellIntegration: options.initFile !== undefined },
    );
    this.pty.onData((bytes) => {
      const offset = this.offset;
      this.offset += bytes.byteLength;
      this.chunks.push(bytes);
      this.marks.push(...this.scanner.push(offset, bytes));
      const { log, key } = this.options;
      if (log) this.appends = this.appends.then(() => log.append(key ?? "test", offset, bytes));
      this.agent.output(offset, bytes);
    });
    this.pty.onExit((exit) => {
      this.agent.processExited(exit.exitCode);
      this.exit = exit;
    });
  }

  /** Everything the shell has printed so far. */
  output(): Buffer {
    return Buffer.concat(this.chunks);
  }

  write(text: string): void {
    this.pty.write(Buffer.from(text, "utf8"));
  }

  /** The marks of one kind seen so far. */
  count(kind: ShellMark["kind"]): number {
    return this.marks.filter((mark) => mark.kind === kind).length;
  }

  /** The commands reported so far (duplicates sent after a resume included). */
  commands(): CommandMessage[] {
    return this.messages.filter((message): message is CommandMessage => message.type === "command");
  }

  /** Waits for the shell's next prompt after the `n`-th B mark (for the first prompt: n = 0). */
  async prompt(n = this.count("B")): Promise<void> {
    await until(`prompt ${n + 1}`, () => this.count("B") > n);
  }

  /** What the link would answer a `run`. */
  async run(command: string, timeoutMs = 10_000): Promise<RunOutcome> {
    const answer = await this.call({ type: "run", id: this.nextId++, command, timeoutMs }, timeoutMs + 10_000);
    if (answer.type === "run_result") return { ok: true, result: answer.result };
    if (answer.type === "call_failed") return { ok: false, code: answer.code, message: answer.message };
    throw new Error(`unexpected answer ${answer.type}`);
  }

  /** A run that must succeed. */
  async ran(command: string, timeoutMs?: number): Promise<Extract<RunOutcome, { ok: true }>["result"]> {
    const outcome = await this.run(command, timeoutMs);
    if (!outcome.ok) throw new Error(`run ${command}: ${outcome.code} ${outcome.message}`);
    return outcome.result;
  }

  /** What the link would answer a `screen`. */
  async screen(): Promise<ScreenSnapshot> {
    const answer = await this.call({ type: "screen", id: this.nextId++ }, 10_000);
    if (answer.type !== "screen_result") throw new Error(`unexpected answer ${answer.type}`);
    return answer.screen;
  }

  /** Resolves once every output byte so far is in the log. */
  logged(): Promise<void> {
    return this.appends;
  }

  /** Ends the shell (SIGKILL) and everything the test made of it. */
  async close(): Promise<void> {
    if (!this.exit) {
      try {
        this.pty.signalProcess("SIGKILL");
      } catch {
        // gone already
      }
      await until("the shell exited", () => this.exit !== null);
    }
    this.agent.dispose();
  }

  private async call(
    message: { type: "run"; id: number; command: string; timeoutMs: number } | { type: "screen"; id: number },
    deadlineMs: number,
  ): Promise<Extract<RunnerLinkMessage, { type: "run_result" | "screen_result" | "call_failed" }>> {
    this.agent.handle(message);
    type Answer = Extract<RunnerLinkMessage, { type: "run_result" | "screen_result" | "call_failed" }>;
    let answer: Answer | undefined;
    await until(
      `the answer to ${message.type} ${message.id}`,
      () =>
        (answer = this.messages.find(
          (m): m is Answer => (m.type === "run_result" || m.type === "screen_result" || m.type === "call_failed") && m.id === message.id,
        )) !== undefined,
      deadlineMs,
    );
    return answer as Answer;
  }
}
