// The agent layer's public shapes (docs/protocol.md §3, "Agents"): what `expect`, `run`,
// `commands` and `screen` answer. Pure types and limits, shared by the Worker, the runner and the
// clients.

/** `POST .../expect`: the match, or why there is none. `start`/`end` are raw output offsets. */
export type ExpectResult =
  | { matched: true; match: string; groups: (string | null)[]; start: number; end: number }
  | { matched: false; reason: "timeout" | "exited"; offset: number };

/** One command the shell ran (OSC 133 C…D), typed by anyone or by `run`. */
export interface CommandRecord {
  /** Per session, from 1, in the order the commands ended. */
  seq: number;
  command: string;
  /** null when the shell did not say (or the command was cut short). */
  exitCode: number | null;
  /** The command's own output: raw offsets [from, to). */
  from: number;
  to: number;
  /** ISO times. */
  startedAt: string;
  endedAt: string;
}

/** `POST .../run`. `output` is the command's own output, escapes removed, lines ending in `\n`. */
export interface RunResult {
  command: string;
  exitCode: number | null;
  output: string;
  from: number;
  to: number;
  /** ISO time */
  startedAt: string;
  durationMs: number;
  timedOut: boolean;
  truncated: boolean;
}

/** `GET .../screen?format=json`: the terminal as it looks at `offset`. */
export interface ScreenState {
  offset: number;
  cols: number;
  rows: number;
  cursor: { x: number; y: number; visible: boolean };
  /** The alternate screen (vim, less, htop) is showing. */
  alternate: boolean;
  title: string | null;
  /** One per row, trailing spaces removed. */
  lines: string[];
}

/** A screen with the bytes that repaint it on an empty terminal of its size (`format=ansi`, `0x04`). */
export interface ScreenSnapshot extends ScreenState {
  ansi: string;
}

/** Most text `run` answers with; `truncated` beyond. */
export const MAX_RUN_OUTPUT_BYTES = 1 << 20;
/** `expect` and `run`: default and largest `timeoutSec`. */
export const EXPECT_TIMEOUT_SEC = { default: 30, max: 300 } as const;
export const RUN_TIMEOUT_SEC = { default: 30, max: 3600 } as const;
/** `commands` keeps at least this many per session. */
export const MAX_COMMANDS_KEPT = 1000;
