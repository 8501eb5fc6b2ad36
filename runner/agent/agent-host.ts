// The agent layer of one hosted session (docs/protocol.md §3, "Agents"), runner side: its screen
// (screen.ts) and what its shell is doing (shell-tracker.ts), both fed the session's output in
// offset order; the link's `screen` and `run` answered from them; each command that ends reported
// as `command`, and the newest ones again after every `resume` (the edge keeps each `from` once).
import { log } from "../../shared/log.js";
import type { EdgeLinkMessage, RunnerLinkMessage } from "../../shared/protocol.js";
import { TerminalScreen } from "./screen.js";
import { ShellTracker } from "./shell-tracker.js";

export interface AgentHostPort {
  send(message: RunnerLinkMessage): void;
  /** Types into the session (its input path, with its bound). */
  type(bytes: Uint8Array): void;
  /** The screen fell behind the output (pause the process) or caught up. */
  screenBehind(behind: boolean): void;
  /** The agent layer failed (its emulator threw): off for this session from here on. */
  failed(error: string): void;
}

export interface AgentOptions {
  cols: number;
  rows: number;
  shellIntegration: boolean;
  /** RUNNER_SCREEN_IDLE_MS: the screen's emulator is dropped after this long unused (0 or absent: never). */
  screenIdleMs?: number;
}

/** What a hosted session asks of its agent layer, here or in the agent thread (agent-thread.ts). */
export interface AgentLayer {
  output(offset: number, bytes: Uint8Array): void;
  resize(cols: number, rows: number): void;
  handle(message: EdgeLinkMessage): boolean;
  resumed(): void;
  processExited(exitCode: number | null): void;
  dispose(): void;
}

export class AgentHost implements AgentLayer {
  readonly screen: TerminalScreen;
  private readonly tracker: ShellTracker;

  constructor(
    private readonly key: string,
    private readonly port: AgentHostPort,
    options: AgentOptions,
  ) {
    this.screen = new TerminalScreen({
      cols: options.cols,
      rows: options.rows,
      onBehind: (behind) => port.screenBehind(behind),
      onFailed: (error) => {
        log.error("agent.screen", { key, outcome: "emulator_threw", error });
        port.failed(`the screen's emulator failed: ${error instanceof Error ? error.message : String(error)}`);
      },
      // An idle screen's emulator is dropped and made again when needed (docs/architecture.md, "Idle screens").
      idleMs: options.screenIdleMs ?? 0,
      onIdle: (outcome) => log.debug("agent.screen", { key, outcome }),
    });
    this.tracker = new ShellTracker(
      {
        screen: this.screen,
        type: (bytes) => port.type(bytes),
        onCommand: (report) => port.send({ type: "command", ...report }),
      },
      { integrated: options.shellIntegration },
    );
  }

  /** The session's output, in offset order (the coalescer's chunks). */
  output(offset: number, bytes: Uint8Array): void {
    this.tracker.push(offset, bytes);
  }

  /** The terminal was resized: the screen follows, after the output before it. */
  resize(cols: number, rows: number): void {
    this.screen.resize(cols, rows);
  }

  /** Answers `screen` and `run`; false for other messages. */
  handle(message: EdgeLinkMessage): boolean {
    if (message.type === "screen") {
      const { id } = message;
      // The live screen, also when asked for a rebuild: it is what the log would draw, and more.
      this.screen.snapshot().then(
        (screen) => this.port.send({ type: "screen_result", id, screen }),
        (error: unknown) => this.failed(id, "INTERNAL", "the screen could not be read", error),
      );
      return true;
    }
    if (message.type === "run") {
      const { id } = message;
      this.tracker.run(message.command, message.timeoutMs).then(
        (outcome) =>
          outcome.ok
            ? this.port.send({ type: "run_result", id, result: outcome.result })
            : this.port.send({ type: "call_failed", id, code: outcome.code, message: outcome.message }),
        (error: unknown) => this.failed(id, "INTERNAL", "the command could not be run", error),
      );
      return true;
    }
    return false;
  }

  /** A link has opened and resumed: the newest commands again (one may have been lost with the old link). */
  resumed(): void {
    for (const report of this.tracker.recent()) this.port.send({ type: "command", ...report });
  }

  /** The process has exited; its last output has been passed to output(). */
  processExited(exitCode: number | null): void {
    this.tracker.processExited(exitCode);
  }

  dispose(): void {
    this.tracker.dispose();
    this.screen.dispose();
  }

  private failed(id: number, code: "INTERNAL", message: string, error: unknown): void {
    log.warn("agent.call", { key: this.key, id, error });
    this.port.send({ type: "call_failed", id, code, message });
  }
}
