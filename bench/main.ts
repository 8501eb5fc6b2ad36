// `npm run bench [-- --quick] [--runs N] [--only 1,2,...] [--knobs] [--no-write] [--viewers 1,50] [--flood-mb N] [--flood-random]`: the measurements
// of issue 6 (and of the agent layer, issue 15: rows 9–12; processes without a terminal, issue 16:
// rows 13–14; the session sandbox, issue 23: rows 15–16; keys as data, issue 28: row 19) against the local stack (wrangler dev → workerd, a real redis-server, one runner),
// each beside a baseline measured in the same run (node-pty in this process; WeTTY for row 6).
// Prints the table and writes it into docs/benchmarks.md with the machine, the command and the
// date. This file reads the flags, starts the stacks and runs the wanted rows in order; what each
// row measures and prints is in rows/ (see README.md).
import { readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ROOT, secret } from "../scripts/stack.js";
import { measureKnobs } from "./knobs.js";
import { attachRows, expectRows, runRows } from "./rows/agent.js";
import { idleCostRows } from "./rows/idle-cost.js";
import { lagRows } from "./rows/lag.js";
import { peerRows } from "./rows/peer.js";
import { execRows, pipeFloodRows } from "./rows/processes.js";
import { emulatorRows } from "./rows/emulator.js";
import { type BenchConfig, type Row, failedRow } from "./rows/row.js";
import { keyRows } from "./rows/keys.js";
import { sandboxRows } from "./rows/sandbox.js";
import { scaleRows } from "./rows/scale.js";
import { type EchoSamples, echoRows, fanOutRows, floodNeighbourRows, interruptRows, replayRows, throughputRows } from "./rows/terminal.js";
import { scaleStackOptions } from "./scale.js";
import { startBenchStack } from "./stack.js";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean" },
    runs: { type: "string" },
    only: { type: "string" },
    knobs: { type: "boolean" },
    "no-write": { type: "boolean" },
    viewers: { type: "string" },
    "flood-mb": { type: "string" },
    "flood-random": { type: "boolean" },
  },
});
const quick = values.quick ?? false;
const config: BenchConfig = {
  runs: Number(values.runs ?? (quick ? 2 : 5)),
  keystrokes: quick ? 200 : 1000,
  floodBytes: values["flood-mb"] ? Number(values["flood-mb"]) * 1e6 : quick ? 5_000_000 : 30_000_000,
  floodSource: values["flood-random"] ? "/dev/urandom" : "/dev/zero",
  viewers: values.viewers ? values.viewers.split(",").map(Number) : quick ? [1, 10] : [1, 10, 50],
  replayBytes: 8 * 1024 * 1024,
  sessions: quick ? 50 : 500,
  /** Row 9: runs of `true` per repetition; row 10: expects per repetition. */
  agentRuns: quick ? 50 : 200,
  expects: quick ? 20 : 60,
  /** Row 12: viewers with onLag=screen, how many of them paused, and the lag bound that makes them skip. */
  lagViewers: 50,
  lagPaused: 10,
  lagBytes: 1 << 20,
  idleSessions: quick ? 10 : 25,
  idleWindowSec: quick ? 30 : 120,
  sandboxTrips: quick ? 20 : 50,
  keyCreates: quick ? 30 : 100,
};
const only = values.only ? new Set(values.only.split(",").map(Number)) : undefined;
const wanted = (row: number) => !only || only.has(row);
const progress = (message: string) => process.stderr.write(`[bench] ${message}\n`);

const rows: Row[] = [];
// A row that throws is in the table as failed, with its error: the rows after it still run.
const guarded = async (n: number, what: string, measure: () => Promise<Row[]>) => {
  try {
    rows.push(...(await measure()));
  } catch (error) {
    progress(`row ${n} failed: ${error instanceof Error ? error.message : String(error)}`);
    rows.push(failedRow(n, what, error));
  }
};

const started = new Date();
const scaleOptions = scaleStackOptions(config.sessions);

// Row 5 first, on a stack of its own: memory per session needs a fresh runner and workerd,
// before any flood has grown their heaps.
if (wanted(5)) await guarded(5, "500 idle bash sessions", () => scaleRows(config, scaleOptions, progress));

// Row 19 mints a key through the admin API.
const adminKey = secret();
const stack = await startBenchStack({
  vars: { ...scaleOptions.vars, MAX_CLIENTS_PER_SESSION: "64", ADMIN_KEY: adminKey },
  runnerEnv: scaleOptions.runnerEnv,
});
progress(`stack up at ${stack.url}`);
try {
  // Row 6 compares with rows 1 and 2: their samples, empty when they did not run.
  let echoOurs: EchoSamples = { p50: [], p99: [] };
  if (wanted(1)) {
    await guarded(1, "keystroke echo", async () => {
      const echo = await echoRows(stack, config, progress);
      echoOurs = echo.ours;
      return echo.rows;
    });
  }
  let ourMBps: number[] = [];
  if (wanted(2)) {
    await guarded(2, "throughput, one viewer", async () => {
      const flood = await throughputRows(stack, config, progress);
      ourMBps = flood.ours;
      return flood.rows;
    });
  }
  if (wanted(3)) await guarded(3, "fan-out", () => fanOutRows(stack, config, progress));
  if (wanted(4)) await guarded(4, "replay 8 MiB", () => replayRows(stack, config, progress));
  if (wanted(6)) await guarded(6, "peer: WeTTY", () => peerRows(config, echoOurs, ourMBps, progress));
  if (wanted(7)) await guarded(7, "`yes` flood, Ctrl+C", () => interruptRows(stack, config, progress));
  if (wanted(9)) await guarded(9, "run", () => runRows(stack, config, progress));
  if (wanted(10)) await guarded(10, "expect", () => expectRows(stack, config, progress));
  if (wanted(11)) await guarded(11, "attach", () => attachRows(stack, config, progress));
  if (wanted(13)) await guarded(13, "exec", () => execRows(stack, config, progress));
  if (wanted(14)) await guarded(14, "floods at a framed client", () => pipeFloodRows(stack, config, progress));
  if (wanted(17)) await guarded(17, "neighbour echo under a flood", () => floodNeighbourRows(stack, config, progress));
  if (wanted(19)) await guarded(19, "create with a minted key", () => keyRows(stack, adminKey, config, progress));
} finally {
  await stack.stop();
}

// Row 18 in this process, no stack: the screen's emulator on plain floods.
if (wanted(18)) await guarded(18, "the screen's emulator per MB", () => emulatorRows(config, progress));

// Row 12 on a stack of its own: a lag bound small enough that paused viewers skip many times.
if (wanted(12)) await guarded(12, "fan-out with lagging viewers", () => lagRows(config, scaleOptions.runnerEnv, progress));

// Row 8 on a stack of its own, at LOG_LEVEL=debug: the edge says each time it wakes a session.
if (wanted(8)) await guarded(8, "idle session wake-ups", () => idleCostRows(config, progress));

// Rows 15–16 on a stack of their own: two runners, unsandboxed and sandboxed. A row that fails is
// in the table as failed, with its error; it stops neither the others nor the table.
if (wanted(15) || wanted(16)) rows.push(...(await sandboxRows(config, { cost: wanted(15), neighbour: wanted(16) }, progress)));

// Each knob setting needs a runner of its own, so after the main stack is gone.
const knobs = values.knobs
  ? await measureKnobs({
      runs: config.runs,
      bytes: config.floodBytes,
      keystrokes: config.keystrokes,
      progress: (m) => progress(`knobs: ${m}`),
    })
  : undefined;

rows.sort((a, b) => a.n - b.n);
const tableOf = (some: Row[]) =>
  [
    "| # | what | ptybroker | baseline (same run) | ratio | target | met |",
    "|---|---|---|---|---|---|---|",
    ...some.map(
      (r) => `| ${r.n} | ${r.what} | ${r.ours} | ${r.baseline} | ${r.ratio} | ${r.target} | ${r.met === undefined ? "" : r.met ? "yes" : "**no**"} |`,
    ),
  ].join("\n");
const table = tableOf(rows);
const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`;
const header = [
  `Measured ${started.toISOString().slice(0, 16).replace("T", " ")} UTC with \`${command}\` on ${cpus().length} × ${cpus()[0]?.model.trim()}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}.`,
  "Values are medians of the runs with (min–max); ratios compare numbers measured in the same run.",
].join("\n");
console.log(`\n${header}\n\n${table}\n`);

if (knobs) console.log(`${knobs}\n`);

/** `doc` with the block between `<!-- name:start -->` and `<!-- name:end -->` replaced (or added). */
function withBlock(doc: string, name: string, content: string): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const block = `${start}\n${content}\n${end}`;
  if (!doc.includes(start)) return `${doc.trimEnd()}\n\n${block}\n`;
  return doc.slice(0, doc.indexOf(start)) + block + doc.slice(doc.indexOf(end) + end.length);
}

if (!values["no-write"]) {
  const file = join(ROOT, "docs/benchmarks.md");
  let doc = readFileSync(file, "utf8");
  // A partial run (--only) prints its rows but leaves the full table in place.
  if (!only) doc = withBlock(doc, "bench", `${header}\n\n${table}`);
  if (knobs) doc = withBlock(doc, "knobs", `${header}\n\n${knobs}`);
  // The agent layer's rows (issue 15, with row 5 when it ran) in their own section too, also
  // from a partial run, as long as all four ran.
  if ([9, 10, 11, 12].every(wanted)) doc = withBlock(doc, "agent", `${header}\n\n${tableOf(rows.filter((r) => r.n === 5 || (r.n >= 9 && r.n <= 12)))}`);
  // Processes without a terminal (issue 16): rows 13 and 14 in their own section.
  if ([13, 14].every(wanted)) doc = withBlock(doc, "processes", `${header}\n\n${tableOf(rows.filter((r) => r.n >= 13))}`);
  writeFileSync(file, doc);
  progress("wrote the tables to docs/benchmarks.md");
}
