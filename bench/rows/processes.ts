// Rows 13 and 14: processes without a terminal (processes.ts's measures): `POST /v1/exec` against
// `run`, and a flood on pipes against one on a PTY.
import { restFloor, runRoundTrips } from "../agent.js";
import { execTrips, localFlood, sessionFlood, spawnTrips } from "../processes.js";
import type { BenchStack } from "../stack.js";
import { percentile } from "../stats.js";
import { type BenchConfig, type Progress, type Row, fmt, median } from "./row.js";

/** Row 13: exec of `true` against `run` of `true`, with its floors. */
export async function execRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const exec = { p50: [] as number[], p99: [] as number[], server: [] as number[] };
  const run: number[] = [];
  const spawned: number[] = [];
  const floor: number[] = [];
  for (let n = 1; n <= config.runs; n++) {
    const e = await execTrips(stack, config.agentRuns);
    exec.p50.push(percentile(e.ms, 50));
    exec.p99.push(percentile(e.ms, 99));
    exec.server.push(percentile(e.serverMs, 50));
    run.push(percentile((await runRoundTrips(stack, config.agentRuns)).runMs, 50));
    spawned.push(percentile(await spawnTrips(config.agentRuns), 50));
    floor.push(percentile(await restFloor(stack, 100), 50));
    progress(
      `13 run ${n}: exec true p50 ${exec.p50.at(-1)?.toFixed(2)} ms (p99 ${exec.p99.at(-1)?.toFixed(2)}, durationMs p50 ${exec.server.at(-1)?.toFixed(0)}); ` +
        `run true ${run.at(-1)?.toFixed(2)} ms; spawn true here ${spawned.at(-1)?.toFixed(2)} ms; GET /healthz ${floor.at(-1)?.toFixed(2)} ms`,
    );
  }
  rows.push({
    n: 13,
    what: `\`POST /v1/exec\` of \`true\` (a new pty: false session each time), request → answer, p50 (${config.agentRuns} × ${config.runs}); baseline: \`run\` of \`true\` in a session's shell (row 9's measure, same stack)`,
    ours: fmt(exec.p50, 2, " ms"),
    baseline: fmt(run, 2, " ms"),
    ratio: `${(median(exec.p50) / median(run)).toFixed(2)}×`,
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 13,
    what: "exec of `true`, p99",
    ours: fmt(exec.p99, 2, " ms"),
    baseline: "",
    ratio: "",
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 13,
    what: "… its floors: `true` spawned on pipes by this process (spawn → close), and GET /healthz through the edge; the answer's durationMs (createdAt → exitedAt at the edge), p50",
    ours: `${median(exec.server).toFixed(0)} ms`,
    baseline: `${fmt(spawned, 2, " ms")} + ${fmt(floor, 2, " ms")}`,
    ratio: "",
    target: "reported",
    met: undefined,
  });
  return rows;
}

/** Row 14: a flood on a `pty: false` session against a PTY session, half on stderr, and the floors in this process. */
export async function pipeFloodRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const bytes = config.floodBytes;
  const cases = { pipes: [] as number[], pty: [] as number[], split: [] as number[], localPipes: [] as number[], localPty: [] as number[], localSplit: [] as number[] };
  for (let n = 1; n <= config.runs; n++) {
    cases.pipes.push(await sessionFlood(stack, bytes, false));
    cases.pty.push(await sessionFlood(stack, bytes, true));
    cases.split.push(await sessionFlood(stack, bytes, false, true));
    cases.localPipes.push(await localFlood(bytes, false));
    cases.localPty.push(await localFlood(bytes, true));
    cases.localSplit.push(await localFlood(bytes, false, true));
    progress(
      `14 run ${n}: pty:false ${cases.pipes.at(-1)?.toFixed(1)} MB/s, PTY ${cases.pty.at(-1)?.toFixed(1)} MB/s, half on stderr ${cases.split.at(-1)?.toFixed(1)} MB/s; ` +
        `here on pipes ${cases.localPipes.at(-1)?.toFixed(0)}, on node-pty ${cases.localPty.at(-1)?.toFixed(0)}, pipes split ${cases.localSplit.at(-1)?.toFixed(0)} MB/s`,
    );
  }
  const mb = (xs: number[]) => fmt(xs, 1, " MB/s");
  rows.push({
    n: 14,
    what: `flood of ${(bytes / 1e6).toFixed(0)} MB on a \`pty: false\` session at a framed client that acks; baseline: the same flood on a PTY session`,
    ours: mb(cases.pipes),
    baseline: mb(cases.pty),
    ratio: `${(median(cases.pipes) / median(cases.pty)).toFixed(2)}×`,
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 14,
    what: "… the same, half of it on stderr (0x03 frames interleaved with 0x01); baseline: all on stdout",
    ours: mb(cases.split),
    baseline: mb(cases.pipes),
    ratio: `${(median(cases.split) / median(cases.pipes)).toFixed(2)}×`,
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 14,
    what: "… the floors: this process reading the same command on pipes (all on stdout / half on stderr) and on node-pty",
    ours: `${mb(cases.localPipes)} / ${mb(cases.localSplit)}`,
    baseline: mb(cases.localPty),
    ratio: `pty:false at ${(median(cases.pipes) / median(cases.localPipes)).toFixed(2)}× of pipes; PTY at ${(median(cases.pty) / median(cases.localPty)).toFixed(2)}× of node-pty`,
    target: "reported",
    met: undefined,
  });
  return rows;
}
