// What every row builder shares: one row of the table, the run's settings (set by main.ts from
// its flags) and how a row prints repeated measurements.
import { medianRange, percentile } from "../stats.js";

/** One line of the table in docs/benchmarks.md. */
export interface Row {
  n: number;
  what: string;
  ours: string;
  baseline: string;
  ratio: string;
  target: string;
  met: boolean | undefined;
}

/** How much each row measures: `--quick` and `--runs` set these in main.ts. */
export interface BenchConfig {
  runs: number;
  keystrokes: number;
  floodBytes: number;
  /** Row 3's flood: base64 of /dev/zero (compresses ~1000×, the default) or of /dev/urandom (~1.33×). */
  floodSource: "/dev/zero" | "/dev/urandom";
  viewers: number[];
  replayBytes: number;
  sessions: number;
  /** Row 9: runs of `true` per repetition; row 10: expects per repetition. */
  agentRuns: number;
  expects: number;
  /** Row 12: viewers with onLag=screen, how many of them paused, and the lag bound that makes them skip. */
  lagViewers: number;
  lagPaused: number;
  lagBytes: number;
  /** Row 8: idle sessions watched, and for how long (seconds). */
  idleSessions: number;
  idleWindowSec: number;
  /** Row 15: creates (to a first prompt) and execs per run and variant. */
  sandboxTrips: number;
  /** Row 19: creates per run with each kind of key. */
  keyCreates: number;
}

/** A line on stderr while the rows run (`[bench] …`). */
export type Progress = (message: string) => void;

export const median = (xs: number[]) => percentile(xs, 50);
export const fmt = (xs: number[], digits = 1, unit = "") => `${medianRange(xs, digits)}${unit}`;

/** A row that could not be measured: its error where the numbers would be. */
export function failedRow(n: number, what: string, error: unknown): Row {
  const message = (error instanceof Error ? error.message : String(error)).split("\n")[0].replaceAll("|", "\\|").slice(0, 300);
  return { n, what, ours: `failed: ${message}`, baseline: "", ratio: "", target: "", met: false };
}
