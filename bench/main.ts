// `npm run bench [-- --quick] [--runs N] [--only 1,2,...]`: the measurements of issue 6 (and
// of the agent layer, issue 15: rows 9–12; processes without a terminal, issue 16: rows 13–14) against the local stack (wrangler dev → workerd, a
// real redis-server, one runner), each beside a baseline measured in the same run (node-pty in
// this process; WeTTY for row 6). Prints the table and writes it into docs/benchmarks.md with
// the machine, the command and the date.
import { readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ROOT } from "../scripts/stack.js";
import { attach, expectLatency, historySession, lagFanOut, rawRunTrips, restFloor, runRoundTrips, screenMemory } from "./agent.js";
import { echoRoundTrips, fanOut, interrupt, replay, throughput } from "./measures.js";
import { execTrips, localFlood, sessionFlood, spawnTrips } from "./processes.js";
import { measureIdleCost } from "./idle-cost.js";
import { measureKnobs } from "./knobs.js";
import { measureWetty } from "./peer-wetty.js";
import { measureScale, scaleStackOptions } from "./scale.js";
import { startBenchStack } from "./stack.js";
import { medianRange, percentile } from "./stats.js";
import { rawTerm, stackSession } from "./terminals.js";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean" },
    runs: { type: "string" },
    only: { type: "string" },
    knobs: { type: "boolean" },
    "no-write": { type: "boolean" },
  },
});
const quick = values.quick ?? false;
const config = {
  runs: Number(values.runs ?? (quick ? 2 : 5)),
  keystrokes: quick ? 200 : 1000,
  floodBytes: quick ? 5_000_000 : 30_000_000,
  viewers: quick ? [1, 10] : [1, 10, 50],
  replayBytes: 8 * 1024 * 1024,
  sessions: quick ? 50 : 500,
  /** Row 9: runs of `true` per repetition; row 10: expects per repetition. */
  agentRuns: quick ? 50 : 200,
  expects: quick ? 20 : 60,
  /** Row 12: viewers with onLag=screen, how many of them paused, and the lag bound that makes them skip. */
  lagViewers: 50,
  lagPaused: 10,
  lagBytes: 1 << 20,
};
const only = values.only ? new Set(values.only.split(",").map(Number)) : undefined;
const wanted = (row: number) => !only || only.has(row);
const progress = (message: string) => process.stderr.write(`[bench] ${message}\n`);

interface Row {
  n: number;
  what: string;
  ours: string;
  baseline: string;
  ratio: string;
  target: string;
  met: boolean | undefined;
}
const rows: Row[] = [];
const median = (xs: number[]) => percentile(xs, 50);
const fmt = (xs: number[], digits = 1, unit = "") => `${medianRange(xs, digits)}${unit}`;

const started = new Date();
const scaleOptions = scaleStackOptions(config.sessions);

// Row 5 first, on a stack of its own: memory per session needs a fresh runner and workerd,
// before any flood has grown their heaps.
if (wanted(5)) {
  const scaleStack = await startBenchStack(scaleOptions);
  try {
    const r = await measureScale(scaleStack, { sessions: config.sessions, progress: (m) => progress(`5 ${m}`) });
    const p50 = percentile(r.firstPromptMs, 50);
    rows.push({
      n: 5,
      what: `${r.sessions} idle bash sessions on one runner: create → first prompt, p50 (p99 ${percentile(r.firstPromptMs, 99).toFixed(0)} ms)`,
      ours: `${p50.toFixed(0)} ms`,
      baseline: "",
      ratio: "",
      target: "≤ 50 ms",
      met: p50 <= 50,
    });
    rows.push({
      n: 5,
      what: `runner memory per idle session, shells excluded (${(r.runnerBaseKiB / 1024).toFixed(0)} → ${(r.runnerLoadedKiB / 1024).toFixed(0)} MiB)`,
      ours: `${r.runnerKiBPerSession.toFixed(0)} KiB`,
      baseline: "",
      ratio: "",
      target: "≤ 150 KiB",
      met: r.runnerKiBPerSession <= 150,
    });
    rows.push({
      n: 5,
      what: `workerd memory per session (${(r.workerdBaseKiB / 1024).toFixed(0)} → ${(r.workerdLoadedKiB / 1024).toFixed(0)} MiB)`,
      ours: `${r.workerdKiBPerSession.toFixed(0)} KiB`,
      baseline: "",
      ratio: "",
      target: "reported",
      met: undefined,
    });
    // The emulator's own part, in this process (the runner's heap cannot be read from here).
    const screens = await screenMemory(config.sessions);
    progress(`5 in process: ${(screens.screenBytes / 1024).toFixed(0)} KiB per TerminalScreen, ${(screens.hostBytes / 1024).toFixed(0)} KiB per AgentHost`);
    rows.push({
      n: 5,
      what: `of which the agent layer: JS heap + buffers per idle session's screen and shell tracker (AgentHost, 80×24), ${screens.count} in this process (TerminalScreen alone ${(screens.screenBytes / 1024).toFixed(0)} KiB)`,
      ours: `${(screens.hostBytes / 1024).toFixed(0)} KiB`,
      baseline: `${r.runnerKiBPerSession.toFixed(0)} KiB (runner RSS per session, above)`,
      ratio: `${((100 * screens.hostBytes) / 1024 / r.runnerKiBPerSession).toFixed(0)}%`,
      target: "reported",
      met: undefined,
    });
  } finally {
    await scaleStack.stop();
  }
}

const stack = await startBenchStack({
  vars: { ...scaleOptions.vars, MAX_CLIENTS_PER_SESSION: "64" },
  runnerEnv: scaleOptions.runnerEnv,
});
progress(`stack up at ${stack.url}`);
try {
  const echoOurs = { p50: [] as number[], p99: [] as number[] };
  if (wanted(1)) {
    const echoRaw = { p50: [] as number[], p99: [] as number[] };
    for (let run = 1; run <= config.runs; run++) {
      const { id, term } = await stackSession(stack);
      const ours = await echoRoundTrips(term, config.keystrokes);
      await term.close();
      await stack.api.destroy(id);
      const raw = rawTerm();
      const base = await echoRoundTrips(raw, config.keystrokes);
      await raw.close();
      echoOurs.p50.push(ours.p50);
      echoOurs.p99.push(ours.p99);
      echoRaw.p50.push(base.p50);
      echoRaw.p99.push(base.p99);
      progress(`1 echo run ${run}: p50 ${ours.p50.toFixed(2)} ms, p99 ${ours.p99.toFixed(2)} ms (node-pty ${base.p50.toFixed(2)}/${base.p99.toFixed(2)})`);
    }
    rows.push({
      n: 1,
      what: `keystroke echo, p50 (${config.keystrokes} keys × ${config.runs} runs)`,
      ours: fmt(echoOurs.p50, 2, " ms"),
      baseline: fmt(echoRaw.p50, 2, " ms"),
      ratio: `+${(median(echoOurs.p50) - median(echoRaw.p50)).toFixed(2)} ms`,
      target: "≤ 1 ms",
      met: median(echoOurs.p50) <= 1,
    });
    rows.push({
      n: 1,
      what: "keystroke echo, p99",
      ours: fmt(echoOurs.p99, 2, " ms"),
      baseline: fmt(echoRaw.p99, 2, " ms"),
      ratio: `+${(median(echoOurs.p99) - median(echoRaw.p99)).toFixed(2)} ms`,
      target: "≤ 5 ms",
      met: median(echoOurs.p99) <= 5,
    });
  }

  const ourMBps: number[] = [];
  if (wanted(2)) {
    const rawMBps: number[] = [];
    const ratios: number[] = [];
    for (let run = 1; run <= config.runs; run++) {
      const { id, term } = await stackSession(stack);
      const ours = await throughput(term, config.floodBytes);
      await term.close();
      await stack.api.destroy(id);
      const raw = rawTerm();
      const base = await throughput(raw, config.floodBytes);
      await raw.close();
      ourMBps.push(ours.mbps);
      rawMBps.push(base.mbps);
      ratios.push(ours.mbps / base.mbps);
      progress(`2 throughput run ${run}: ${ours.mbps.toFixed(1)} MB/s (${ours.cuts} cuts), node-pty ${base.mbps.toFixed(1)} MB/s`);
    }
    rows.push({
      n: 2,
      what: `throughput, one viewer (${config.floodBytes / 1e6} MB)`,
      ours: fmt(ourMBps, 1, " MB/s"),
      baseline: fmt(rawMBps, 1, " MB/s"),
      ratio: `${fmt(ratios, 2)}×`,
      target: "≥ 0.8× node-pty",
      met: median(ratios) >= 0.8,
    });
  }

  if (wanted(3)) {
    const byViewers = new Map<number, { pty: number[]; slowest: number[]; complete: number[]; cuts: number[] }>();
    for (let run = 1; run <= config.runs; run++) {
      for (const viewers of config.viewers) {
        const r = await fanOut(stack, viewers, config.floodBytes);
        const entry = byViewers.get(viewers) ?? { pty: [], slowest: [], complete: [], cuts: [] };
        entry.pty.push(r.ptyMBps);
        entry.slowest.push(r.slowestMBps);
        entry.complete.push(r.complete);
        entry.cuts.push(r.cuts);
        byViewers.set(viewers, entry);
        progress(`3 fan-out run ${run}, ${viewers} viewers: PTY ${r.ptyMBps.toFixed(1)} MB/s, slowest ${r.slowestMBps.toFixed(1)} MB/s, ${r.complete}/${viewers} complete, ${r.cuts} cuts`);
      }
    }
    const one = median(byViewers.get(1)?.pty ?? [NaN]);
    for (const [viewers, r] of byViewers) {
      const ratio = median(r.pty) / one;
      rows.push({
        n: 3,
        what: `fan-out, ${viewers} viewer${viewers > 1 ? "s" : ""}: PTY speed (slowest viewer ${median(r.slowest).toFixed(1)} MB/s; complete ${Math.min(...r.complete)}/${viewers}; cuts ${median(r.cuts)})`,
        ours: fmt(r.pty, 1, " MB/s"),
        baseline: viewers === 1 ? "" : `${one.toFixed(1)} MB/s (1 viewer)`,
        ratio: viewers === 1 ? "" : `${ratio.toFixed(2)}×`,
        target: viewers === 1 ? "" : "≥ 0.5× one viewer; every viewer complete",
        met: viewers === 1 ? undefined : ratio >= 0.5 && Math.min(...r.complete) === viewers,
      });
    }
  }

  if (wanted(4)) {
    const ms: number[] = [];
    for (let run = 1; run <= config.runs; run++) {
      const r = await replay(stack, config.replayBytes);
      ms.push(r.ms);
      progress(`4 replay run ${run}: ${r.replayed} bytes to live in ${r.ms.toFixed(0)} ms`);
    }
    rows.push({
      n: 4,
      what: "replay 8 MiB from Redis, connect → `live`",
      ours: fmt(ms, 0, " ms"),
      baseline: "",
      ratio: `${(8.389 / (median(ms) / 1000)).toFixed(0)} MB/s`,
      target: "≤ 250 ms",
      met: median(ms) <= 250,
    });
  }

  if (wanted(6)) {
    const peer = await measureWetty({
      keystrokes: config.keystrokes,
      bytes: config.floodBytes,
      runs: config.runs,
      progress: (m) => progress(`6 ${m}`),
    });
    const ours = median(echoOurs.p50);
    rows.push({
      n: 6,
      what: `peer: WeTTY ${peer.version}, keystroke echo p50 (p99 ours ${median(echoOurs.p99).toFixed(2)} vs ${median(peer.echoP99Ms).toFixed(2)} ms)`,
      ours: echoOurs.p50.length ? fmt(echoOurs.p50, 2, " ms") : "(row 1 not run)",
      baseline: fmt(peer.echoP50Ms, 2, " ms"),
      ratio: `${(ours / median(peer.echoP50Ms)).toFixed(2)}×`,
      target: "faster than WeTTY",
      met: ours < median(peer.echoP50Ms),
    });
    rows.push({
      n: 6,
      what: `peer: WeTTY ${peer.version}, throughput (${config.floodBytes / 1e6} MB)`,
      ours: ourMBps.length ? fmt(ourMBps, 1, " MB/s") : "(row 2 not run)",
      baseline: fmt(peer.throughputMBps, 1, " MB/s"),
      ratio: `${(median(ourMBps) / median(peer.throughputMBps)).toFixed(2)}×`,
      target: "faster than WeTTY",
      met: median(ourMBps) > median(peer.throughputMBps),
    });
  }

  if (wanted(7)) {
    const ours: number[] = [];
    const raw: number[] = [];
    for (let run = 1; run <= config.runs; run++) {
      const { id, term } = await stackSession(stack);
      ours.push(await interrupt(term));
      await term.close();
      await stack.api.destroy(id);
      const base = rawTerm();
      raw.push(await interrupt(base));
      await base.close();
      progress(`7 interrupt run ${run}: ${ours.at(-1)?.toFixed(0)} ms (node-pty ${raw.at(-1)?.toFixed(0)} ms)`);
    }
    rows.push({
      n: 7,
      what: "`yes` flood, Ctrl+C → prompt back",
      ours: fmt(ours, 0, " ms"),
      baseline: fmt(raw, 0, " ms"),
      ratio: `+${(median(ours) - median(raw)).toFixed(0)} ms`,
      target: "≤ 200 ms",
      met: median(ours) <= 200,
    });
  }

  if (wanted(9)) {
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
  }

  if (wanted(10)) {
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
  }

  if (wanted(11)) {
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
      target: "a few KiB (DESIGN §10)",
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
  }

  if (wanted(13)) {
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
  }

  if (wanted(14)) {
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
  }
} finally {
  await stack.stop();
}

// Row 12 on a stack of its own: a lag bound small enough that paused viewers skip many times.
if (wanted(12)) {
  const lagStack = await startBenchStack({
    vars: { MAX_CLIENTS_PER_SESSION: String(config.lagViewers + 8), MAX_CLIENT_LAG_BYTES: String(config.lagBytes) },
    runnerEnv: scaleOptions.runnerEnv,
  });
  try {
    const many = { pty: [] as number[], slowest: [] as number[], cuts: [] as number[], complete: [] as number[], readingGaps: [] as number[] };
    const paused = { gaps: [] as number[], screens: [] as number[], received: [] as number[], drain: [] as number[], peak: [] as number[] };
    const one = { pty: [] as number[], cuts: [] as number[], peak: [] as number[], gaps: [] as number[] };
    const errors: string[] = [];
    for (let n = 1; n <= config.runs; n++) {
      const single = await lagFanOut(lagStack, 1, 0, config.floodBytes);
      const r = await lagFanOut(lagStack, config.lagViewers, config.lagPaused, config.floodBytes);
      one.pty.push(single.ptyMBps);
      one.cuts.push(single.cuts);
      one.peak.push(single.workerdPeakKiB - single.workerdBaseKiB);
      one.gaps.push(single.readingGaps);
      many.pty.push(r.ptyMBps);
      many.slowest.push(r.slowestMBps);
      many.cuts.push(r.cuts);
      many.complete.push(r.readingComplete);
      many.readingGaps.push(r.readingGaps);
      paused.gaps.push(...r.pausedGaps);
      paused.screens.push(...r.pausedScreens);
      paused.received.push(r.pausedReceived);
      paused.drain.push(r.drainMs);
      paused.peak.push(r.workerdPeakKiB - r.workerdBaseKiB);
      errors.push(...r.offsetErrors, ...single.offsetErrors);
      progress(
        `12 run ${n}: 1 viewer ${single.ptyMBps.toFixed(1)} MB/s (${single.cuts} cuts, ${single.readingGaps} skips); ${r.viewers} viewers (${r.paused} paused) PTY ${r.ptyMBps.toFixed(1)} MB/s, ` +
          `slowest reading ${r.slowestMBps.toFixed(1)} MB/s, cuts ${r.cuts}, reading complete ${r.readingComplete}/${r.viewers - r.paused} (skips among them ${r.readingGaps}), ` +
          `paused skips ${r.pausedGaps.join(",")} screens ${r.pausedScreens.join(",")}, ${(r.pausedReceived / 1e6).toFixed(1)} MB waiting for each, drained in ${r.drainMs.toFixed(0)} ms; ` +
          `workerd +${((r.workerdPeakKiB - r.workerdBaseKiB) / 1024).toFixed(0)} MiB (1 viewer +${((single.workerdPeakKiB - single.workerdBaseKiB) / 1024).toFixed(0)} MiB)` +
          `${r.offsetErrors.length ? `; offset errors: ${r.offsetErrors.slice(0, 3).join("; ")}` : ""}`,
      );
    }
    // Once more with a flood of random bytes: what permessage-deflate cannot shrink (one run).
    const randomOne = await lagFanOut(lagStack, 1, 0, config.floodBytes, "/dev/urandom");
    const random = await lagFanOut(lagStack, config.lagViewers, config.lagPaused, config.floodBytes, "/dev/urandom");
    errors.push(...random.offsetErrors, ...randomOne.offsetErrors);
    progress(
      `12 random flood: 1 viewer ${randomOne.ptyMBps.toFixed(1)} MB/s (${randomOne.readingGaps} skips); ${random.viewers} viewers PTY ${random.ptyMBps.toFixed(1)} MB/s, ` +
        `cuts ${random.cuts + randomOne.cuts}, paused skips ${random.pausedGaps.join(",")}, ${(random.pausedReceived / 1e6).toFixed(1)} MB waiting for each, ` +
        `drained in ${random.drainMs.toFixed(0)} ms; workerd +${((random.workerdPeakKiB - random.workerdBaseKiB) / 1024).toFixed(0)} MiB`,
    );
    const reading = config.lagViewers - config.lagPaused;
    const cuts = Math.max(...many.cuts, ...one.cuts, random.cuts, randomOne.cuts);
    const lag = `MAX_CLIENT_LAG_BYTES ${config.lagBytes / 2 ** 20} MiB`;
    rows.push({
      n: 12,
      what: `${config.lagViewers} framed viewers with \`onLag=screen\`, ${config.lagPaused} of them paused (socket not read, no acks), on a ${config.floodBytes / 1e6} MB flood (${lag}): viewers cut, most in a run${errors.length ? `; offset errors ${errors.length}` : ""}`,
      ours: String(cuts),
      baseline: "",
      ratio: "",
      target: "0",
      met: cuts === 0 && errors.length === 0,
    });
    rows.push({
      n: 12,
      what: `… PTY speed (slowest reading viewer ${median(many.slowest).toFixed(1)} MB/s; reading viewers complete ${Math.min(...many.complete)}/${reading}, skips among them ${median(many.readingGaps)}); baseline: 1 viewer with \`onLag=screen\` (skips ${median(one.gaps)})`,
      ours: fmt(many.pty, 1, " MB/s"),
      baseline: fmt(one.pty, 1, " MB/s"),
      ratio: `${(median(many.pty) / median(one.pty)).toFixed(2)}×`,
      target: "reported",
      met: undefined,
    });
    rows.push({
      n: 12,
      what: `… each paused viewer during the flood: skips (\`gap\`s) and screens, median (min–max); output waiting for it when it read again ${(median(paused.received) / 1e6).toFixed(1)} MB; all viewers at the end offset ${median(paused.drain).toFixed(0)} ms after the paused ones read again`,
      ours: `${fmt(paused.gaps, 0)} skips, ${fmt(paused.screens, 0)} screens`,
      baseline: "",
      ratio: "",
      target: "reported",
      met: undefined,
    });
    rows.push({
      n: 12,
      what: `… the same flood of random bytes (base64 of /dev/urandom: permessage-deflate cannot shrink it), one run: PTY speed (cuts ${random.cuts + randomOne.cuts}; ${(random.pausedReceived / 1e6).toFixed(1)} MB waiting for each paused viewer, ${median(random.pausedGaps)} skips; workerd +${((random.workerdPeakKiB - random.workerdBaseKiB) / 1024).toFixed(0)} MiB)`,
      ours: `${random.ptyMBps.toFixed(1)} MB/s`,
      baseline: `${randomOne.ptyMBps.toFixed(1)} MB/s (1 viewer, ${randomOne.readingGaps} skips)`,
      ratio: `${(random.ptyMBps / randomOne.ptyMBps).toFixed(2)}×`,
      target: "reported",
      met: undefined,
    });
    rows.push({
      n: 12,
      what: "… workerd memory growth during the flood of zeros (peak RSS − before), with the paused viewers; baseline: 1 viewer",
      ours: `${(median(paused.peak) / 1024).toFixed(0)} MiB`,
      baseline: `${(median(one.peak) / 1024).toFixed(0)} MiB`,
      ratio: "",
      target: "reported",
      met: undefined,
    });
  } finally {
    await lagStack.stop();
  }
}

// Row 8 on a stack of its own, at LOG_LEVEL=debug: the edge says each time it wakes a session.
if (wanted(8)) {
  const quiet = await startBenchStack({ vars: { LOG_LEVEL: "debug" }, workerLogs: true });
  try {
    const r = await measureIdleCost(quiet, {
      sessions: quick ? 10 : 25,
      windowSec: quick ? 30 : 120,
      progress: (m) => progress(`8 ${m}`),
    });
    rows.push({
      n: 8,
      what: `idle session, no timer set: Durable Object wake-ups per hour (${r.sessions} sessions, ${r.windowSec} s window)`,
      ours: r.noTimerPerHour.toFixed(1),
      baseline: "120 (the 30 s heartbeat alarm before issue 13; by construction, not run)",
      ratio: "",
      target: "0",
      met: r.noTimerPerHour === 0,
    });
    rows.push({
      n: 8,
      what: "idle session with its three timers set to a day: wake-ups per hour",
      ours: r.farTimersPerHour.toFixed(1),
      baseline: "",
      ratio: "",
      target: "0",
      met: r.farTimersPerHour === 0,
    });
  } finally {
    await quiet.stop();
  }
}

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
