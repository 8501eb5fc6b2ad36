// Row 6: WeTTY (peer-wetty.ts) against rows 1 and 2's numbers from the same run.
import { measureWetty } from "../peer-wetty.js";
import { type BenchConfig, type Progress, type Row, fmt, median } from "./row.js";
import type { EchoSamples } from "./terminal.js";

/** Row 6; `echoOurs` and `ourMBps` are rows 1 and 2's samples, empty when those rows did not run. */
export async function peerRows(config: BenchConfig, echoOurs: EchoSamples, ourMBps: number[], progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
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
  return rows;
}
