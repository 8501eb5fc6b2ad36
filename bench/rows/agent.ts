// Rows 9, 10 and 11: the agent layer through the edge (agent.ts's measures): `run`, `expect`, and
// attaching with `from=screen` against a full replay.
import { attach, expectLatency, historySession, rawRunTrips, restFloor, runRoundTrips } from "../agent.js";
import type { BenchStack } from "../stack.js";
import { percentile } from "../stats.js";
import { type BenchConfig, type Progress, type Row, fmt, median } from "./row.js";

/** Row 9: `run` of `true` against `true` typed into bash on node-pty, where its time goes, and the edge's HTTP floor. */
export async function runRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const run = { p50: [] as number[], p99: [] as number[], toStart: [] as number[], afterEnd: [] as number[], typed: [] as number[] };
  const raw = { p50: [] as number[], p99: [] as number[] };
  const floor: number[] = [];
  for (let n = 1; n <= config.runs; n++) {
    const ours = await runRoundTrips(stack, config.agentRuns);
    const base = await rawRunTrips(config.agentRuns);
    const http = await restFloor(stack, 100);
    run.p50.push(percentile(ours.runMs, 50));
    run.p99.push(percentile(ours.runMs, 99));
    run.toStart.push(percentile(ours.toStartMs, 50));
    run.afterEnd.push(percentile(ours.afterEndMs, 50));
    run.typed.push(percentile(ours.typedMs, 50));
    raw.p50.push(percentile(base, 50));
    raw.p99.push(percentile(base, 99));
    floor.push(percentile(http, 50));
    progress(
      `9 run ${n}: run p50 ${run.p50.at(-1)?.toFixed(2)} ms, p99 ${run.p99.at(-1)?.toFixed(2)} ms ` +
        `(request → C ${run.toStart.at(-1)?.toFixed(1)} ms, D → answer ${run.afterEnd.at(-1)?.toFixed(1)} ms); ` +
        `typed over the socket ${run.typed.at(-1)?.toFixed(2)} ms; node-pty ${raw.p50.at(-1)?.toFixed(2)}/${raw.p99.at(-1)?.toFixed(2)} ms; GET /healthz ${floor.at(-1)?.toFixed(2)} ms`,
    );
  }
  rows.push({
    n: 9,
    what: `\`run\` of \`true\` through the edge (POST …/run → answer), p50 (${config.agentRuns} runs × ${config.runs}); baseline: \`true\` typed into bash on node-pty (the sessions' shell integration) → its D mark`,
    ours: fmt(run.p50, 2, " ms"),
    baseline: fmt(raw.p50, 2, " ms"),
    ratio: `+${(median(run.p50) - median(raw.p50)).toFixed(2)} ms`,
    target: "≤ 10 ms",
    met: median(run.p50) <= 10,
  });
  rows.push({
    n: 9,
    what: "`run` of `true`, p99",
    ours: fmt(run.p99, 2, " ms"),
    baseline: fmt(raw.p99, 2, " ms"),
    ratio: `+${(median(run.p99) - median(raw.p99)).toFixed(2)} ms`,
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 9,
    what: "where a run's time goes, p50s by the runner's clock: request → its C mark (typed, started) + D mark (answered at the runner) → answer at the client",
    ours: `${median(run.toStart).toFixed(1)} + ${median(run.afterEnd).toFixed(1)} ms`,
    baseline: "",
    ratio: "",
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 9,
    what: "`true` typed over a framed socket on the same session → its D mark at that client, p50 (no REST, no `run`)",
    ours: fmt(run.typed, 2, " ms"),
    baseline: fmt(raw.p50, 2, " ms"),
    ratio: `+${(median(run.typed) - median(raw.p50)).toFixed(2)} ms`,
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 9,
    what: "the edge's HTTP floor under wrangler dev: GET /healthz (no session object), p50 (100 × runs)",
    ours: fmt(floor, 2, " ms"),
    baseline: "",
    ratio: "",
    target: "reported",
    met: undefined,
  });
  return rows;
}

/** Row 10: `expect` waiting for a marker, against the same output at a framed client. */
export async function expectRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const expectP50: number[] = [];
  const expectP99: number[] = [];
  const socketP50: number[] = [];
  const socketP99: number[] = [];
  const extra: number[] = [];
  for (let n = 1; n <= config.runs; n++) {
    const r = await expectLatency(stack, config.expects);
    expectP50.push(percentile(r.expectMs, 50));
    expectP99.push(percentile(r.expectMs, 99));
    socketP50.push(percentile(r.socketMs, 50));
    socketP99.push(percentile(r.socketMs, 99));
    extra.push(percentile(r.expectMs.map((ms, i) => ms - (r.socketMs[i] ?? NaN)), 50));
    progress(
      `10 expect run ${n}: input → answer p50 ${expectP50.at(-1)?.toFixed(2)} ms (p99 ${expectP99.at(-1)?.toFixed(2)}), ` +
        `input → framed client p50 ${socketP50.at(-1)?.toFixed(2)} ms (p99 ${socketP99.at(-1)?.toFixed(2)}), answer after the client by ${extra.at(-1)?.toFixed(2)} ms`,
    );
  }
  rows.push({
    n: 10,
    what: `\`expect\` waiting for a marker, input → answer, p50 (${config.expects} × ${config.runs}; answer after the framed client by ${median(extra).toFixed(2)} ms, p50 of differences); baseline: the same output at a framed client`,
    ours: fmt(expectP50, 2, " ms"),
    baseline: fmt(socketP50, 2, " ms"),
    ratio: `${(median(expectP50) / median(socketP50)).toFixed(2)}×`,
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 10,
    what: "`expect`, p99",
    ours: fmt(expectP99, 2, " ms"),
    baseline: fmt(socketP99, 2, " ms"),
    ratio: `${(median(expectP99) / median(socketP99)).toFixed(2)}×`,
    target: "reported",
    met: undefined,
  });
  return rows;
}

/** Row 11: attaching to a long history with `from=screen` against a full replay. */
export async function attachRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const history = await historySession(stack, config.replayBytes);
  const screen = { first: [] as number[], live: [] as number[], bytes: [] as number[], wire: [] as number[] };
  const full = { first: [] as number[], live: [] as number[], bytes: [] as number[], wire: [] as number[] };
  try {
    for (let n = 1; n <= config.runs; n++) {
      // Each first in turn, so neither always finds the other's reads cached.
      const order: ("screen" | undefined)[] = n % 2 ? ["screen", undefined] : [undefined, "screen"];
      for (const from of order) {
        const r = await attach(stack, history.id, from, history.offset);
        const into = from ? screen : full;
        into.first.push(r.firstFrameMs);
        into.live.push(r.liveMs);
        into.bytes.push(r.bytes);
        into.wire.push(r.wireBytes);
      }
      progress(
        `11 attach run ${n}: from=screen ${screen.bytes.at(-1)} bytes (wire ${screen.wire.at(-1)}), first paint ${screen.first.at(-1)?.toFixed(0)} ms, live ${screen.live.at(-1)?.toFixed(0)} ms; ` +
          `full ${full.bytes.at(-1)} bytes (wire ${full.wire.at(-1)}), first frame ${full.first.at(-1)?.toFixed(0)} ms, live ${full.live.at(-1)?.toFixed(0)} ms`,
      );
    }
  } finally {
    await stack.api.destroy(history.id);
  }
  const kib = (xs: number[]) => `${(median(xs) / 1024).toFixed(1)} KiB`;
  rows.push({
    n: 11,
    what: `attach to ${(history.offset / 2 ** 20).toFixed(1)} MiB of history (random base64), \`from=screen\` vs full replay (\`from\` omitted): payload received until \`live\` (on the wire ${kib(screen.wire)} vs ${kib(full.wire)}, permessage-deflate)`,
    ours: kib(screen.bytes),
    baseline: kib(full.bytes),
    ratio: `${((100 * median(screen.bytes)) / median(full.bytes)).toFixed(2)}%`,
    target: "a few KiB (docs/protocol.md §5)",
    met: median(screen.bytes) <= 16 * 1024,
  });
  rows.push({
    n: 11,
    what: "… connect → first paint (the screen frame; full replay: its first output frame, though the screen is right only at `live`)",
    ours: fmt(screen.first, 0, " ms"),
    baseline: fmt(full.first, 0, " ms"),
    ratio: `${(median(screen.first) / median(full.first)).toFixed(2)}×`,
    target: "reported",
    met: undefined,
  });
  rows.push({
    n: 11,
    what: "… connect → `live`",
    ours: fmt(screen.live, 0, " ms"),
    baseline: fmt(full.live, 0, " ms"),
    ratio: `${(median(screen.live) / median(full.live)).toFixed(2)}×`,
    target: "reported",
    met: undefined,
  });
  return rows;
}
