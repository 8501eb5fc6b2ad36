// `npm run bench [-- --quick] [--runs N] [--only 1,2,...]`: the measurements of issue 6 against
// the local stack (wrangler dev → workerd, a real redis-server, one runner), each beside a
// baseline measured in the same run (node-pty in this process; WeTTY for row 6). Prints the
// table and writes it into docs/benchmarks.md with the machine, the command and the date.
import { readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ROOT } from "../scripts/stack.js";
import { echoRoundTrips, fanOut, interrupt, replay, throughput } from "./measures.js";
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
} finally {
  await stack.stop();
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
const table = [
  "| # | what | ptybroker | baseline (same run) | ratio | target | met |",
  "|---|---|---|---|---|---|---|",
  ...rows.map(
    (r) => `| ${r.n} | ${r.what} | ${r.ours} | ${r.baseline} | ${r.ratio} | ${r.target} | ${r.met === undefined ? "" : r.met ? "yes" : "**no**"} |`,
  ),
].join("\n");
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
  writeFileSync(file, doc);
  progress("wrote the tables to docs/benchmarks.md");
}
