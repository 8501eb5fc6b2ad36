// Row 12: many framed viewers with `onLag=screen`, some paused, on a flood (agent.ts's lagFanOut),
// on a stack of its own with a lag bound small enough that paused viewers skip many times.
import { lagFanOut } from "../agent.js";
import { startBenchStack } from "../stack.js";
import { type BenchConfig, type Progress, type Row, fmt, median } from "./row.js";

/** Row 12 on a stack of its own (the runner started with `runnerEnv`), stopped before it returns. */
export async function lagRows(config: BenchConfig, runnerEnv: Record<string, string> | undefined, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const lagStack = await startBenchStack({
    vars: { MAX_CLIENTS_PER_SESSION: String(config.lagViewers + 8), MAX_CLIENT_LAG_BYTES: String(config.lagBytes) },
    runnerEnv,
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
  return rows;
}
