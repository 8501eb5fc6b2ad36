// Rows 1, 2, 3, 4, 7 and 17: a terminal through the stack against node-pty in this process:
// keystroke echo, throughput, fan-out, replay from Redis, Ctrl+C in a flood, and a session's echo
// while its neighbour floods (the measures are measures.ts's).
import { echoRoundTrips, fanOut, floodNeighbourEcho, interrupt, replay, throughput } from "../measures.js";
import type { BenchStack } from "../stack.js";
import { rawTerm, stackSession } from "../terminals.js";
import { type BenchConfig, type Progress, type Row, fmt, median } from "./row.js";

/** Row 1's per-run percentiles through the stack (row 6 compares them with WeTTY's). */
export interface EchoSamples {
  p50: number[];
  p99: number[];
}

/**
 * Row 1: keystroke echo, p50 and p99, typed as the SDK and the page type (a writer's numbered
 * input, acknowledged once written); in the same runs, plain 0x02 frames as before issue 37.
 */
export async function echoRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<{ rows: Row[]; ours: EchoSamples }> {
  const rows: Row[] = [];
  const echoOurs: EchoSamples = { p50: [], p99: [] };
  const echoPlain: EchoSamples = { p50: [], p99: [] };
  const echoRaw = { p50: [] as number[], p99: [] as number[] };
  const through = async (numbered: boolean) => {
    const { id, term } = await stackSession(stack, { numbered });
    const echo = await echoRoundTrips(term, config.keystrokes);
    await term.close();
    await stack.api.destroy(id);
    return echo;
  };
  for (let run = 1; run <= config.runs; run++) {
    const ours = await through(true);
    const plain = await through(false);
    const raw = rawTerm();
    const base = await echoRoundTrips(raw, config.keystrokes);
    await raw.close();
    echoOurs.p50.push(ours.p50);
    echoOurs.p99.push(ours.p99);
    echoPlain.p50.push(plain.p50);
    echoPlain.p99.push(plain.p99);
    echoRaw.p50.push(base.p50);
    echoRaw.p99.push(base.p99);
    progress(
      `1 echo run ${run}: p50 ${ours.p50.toFixed(2)} ms, p99 ${ours.p99.toFixed(2)} ms (plain 0x02 ${plain.p50.toFixed(2)}/${plain.p99.toFixed(2)}, node-pty ${base.p50.toFixed(2)}/${base.p99.toFixed(2)})`,
    );
  }
  rows.push({
    n: 1,
    what: `keystroke echo, p50 (${config.keystrokes} keys × ${config.runs} runs, numbered input)`,
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
  rows.push({
    n: 1,
    what: "keystroke echo p50 / p99, plain 0x02 frames (no offsets, as raw clients type)",
    ours: `${fmt(echoPlain.p50, 2, " ms")} / ${fmt(echoPlain.p99, 2, " ms")}`,
    baseline: `${fmt(echoOurs.p50, 2, " ms")} / ${fmt(echoOurs.p99, 2, " ms")} numbered`,
    ratio: `${(median(echoOurs.p50) - median(echoPlain.p50)).toFixed(2)} / ${(median(echoOurs.p99) - median(echoPlain.p99)).toFixed(2)} ms numbered − plain`,
    target: "reported",
    met: undefined,
  });
  return { rows, ours: echoOurs };
}

/** Row 2: throughput to one viewer; `ours` is each run's MB/s (row 6 compares them with WeTTY's). */
export async function throughputRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<{ rows: Row[]; ours: number[] }> {
  const rows: Row[] = [];
  const ourMBps: number[] = [];
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
  return { rows, ours: ourMBps };
}

/**
 * Row 3: fan-out, one row per number of viewers and kind of client: today's (permessage-deflate
 * on every socket) and `compress=deflate` (output deflated once per chunk, 0x06), alternating in
 * each run so both see the same minutes of a shared machine. Each is compared with one viewer
 * of its own kind; the wire bytes per viewer are the socket's reads during the flood.
 */
export async function fanOutRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const kinds = [
    { name: "permessage-deflate", options: {} },
    { name: "compress=deflate", options: { deflate: true } },
  ] as const;
  type Samples = { pty: number[]; slowest: number[]; complete: number[]; cuts: number[]; wire: number[]; cpu: string[] };
  const samples = new Map<string, Samples>();
  for (let run = 1; run <= config.runs; run++) {
    for (const viewers of config.viewers) {
      for (const kind of kinds) {
        const r = await fanOut(stack, viewers, config.floodBytes, kind.options, config.floodSource);
        const key = `${kind.name}/${viewers}`;
        const entry = samples.get(key) ?? { pty: [], slowest: [], complete: [], cuts: [], wire: [], cpu: [] };
        entry.pty.push(r.ptyMBps);
        entry.slowest.push(r.slowestMBps);
        entry.complete.push(r.complete);
        entry.cuts.push(r.cuts);
        entry.wire.push(r.wirePerViewer);
        entry.cpu.push(`workerd ${r.cpu.workerd.toFixed(0)}%, runner ${r.cpu.runner.toFixed(0)}%, bench ${r.cpu.bench.toFixed(0)}%`);
        samples.set(key, entry);
        progress(
          `3 fan-out run ${run}, ${viewers} viewers (${kind.name}): PTY ${r.ptyMBps.toFixed(1)} MB/s, slowest ${r.slowestMBps.toFixed(1)} MB/s, ` +
            `${r.complete}/${viewers} complete, ${r.cuts} cuts; wire ${(r.wirePerViewer / 1e6).toFixed(3)} MB per viewer; ` +
            `CPU of a core: ${entry.cpu.at(-1)}`,
        );
      }
    }
  }
  for (const kind of kinds) {
    const one = median(samples.get(`${kind.name}/1`)?.pty ?? [NaN]);
    for (const viewers of config.viewers) {
      const r = samples.get(`${kind.name}/${viewers}`);
      if (!r) continue;
      const ratio = median(r.pty) / one;
      const wire = `${(median(r.wire) / 1e6).toFixed(3)} MB on the wire per viewer`;
      rows.push({
        n: 3,
        what:
          `fan-out, ${viewers} viewer${viewers > 1 ? "s" : ""} (${kind.name}${config.floodSource === "/dev/urandom" ? ", random flood" : ""}): PTY speed (slowest viewer ${median(r.slowest).toFixed(1)} MB/s; ` +
          `complete ${Math.min(...r.complete)}/${viewers}; cuts ${median(r.cuts)}; ${wire})`,
        ours: fmt(r.pty, 1, " MB/s"),
        baseline: viewers === 1 ? "" : `${one.toFixed(1)} MB/s (1 viewer)`,
        ratio: viewers === 1 ? "" : `${ratio.toFixed(2)}×`,
        target: viewers === 1 ? "" : "≥ 0.5× one viewer; every viewer complete",
        met: viewers === 1 ? undefined : ratio >= 0.5 && Math.min(...r.complete) === viewers,
      });
    }
  }
  return rows;
}

/** Row 4: replay of 8 MiB from Redis. */
export async function replayRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
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
  return rows;
}

/** Row 7: Ctrl+C in a `yes` flood → the prompt back. */
export async function interruptRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
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
  return rows;
}

/** Row 17: B's echo while A floods on the same runner, against B's echo with A idle, same run. */
export async function floodNeighbourRows(stack: BenchStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const idle = { p50: [] as number[], p99: [] as number[] };
  const flooded = { p50: [] as number[], p99: [] as number[] };
  const rates: number[] = [];
  for (let run = 1; run <= config.runs; run++) {
    const r = await floodNeighbourEcho(stack, config.keystrokes);
    idle.p50.push(r.idle.p50);
    idle.p99.push(r.idle.p99);
    flooded.p50.push(r.flooded.p50);
    flooded.p99.push(r.flooded.p99);
    rates.push(r.floodMBps);
    progress(
      `17 run ${run}: B's echo idle p50 ${r.idle.p50.toFixed(2)} / p99 ${r.idle.p99.toFixed(2)} ms, ` +
        `while A floods (${r.floodMBps.toFixed(1)} MB/s) p50 ${r.flooded.p50.toFixed(2)} / p99 ${r.flooded.p99.toFixed(2)} ms`,
    );
  }
  const p99Ratio = median(flooded.p99) / median(idle.p99);
  return [
    {
      n: 17,
      what: `neighbour echo under a flood: session B's keystroke echo (${config.keystrokes} keys × ${config.runs} runs) while session A on the same runner floods (\`yes\` of 100-byte lines, ${fmt(rates, 1, " MB/s")} at its viewer); baseline: B's echo with A idle, same run`,
      ours: `p50 ${fmt(flooded.p50, 2, " ms")} · p99 ${fmt(flooded.p99, 2, " ms")}`,
      baseline: `p50 ${fmt(idle.p50, 2, " ms")} · p99 ${fmt(idle.p99, 2, " ms")}`,
      ratio: `p99 ${p99Ratio.toFixed(2)}×`,
      target: "p50 ≤ 2 ms, p99 ≤ 3× idle",
      met: median(flooded.p50) <= 2 && p99Ratio <= 3,
    },
  ];
}
