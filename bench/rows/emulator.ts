// Row 18: what the screen's emulator costs per MB of a plain flood, in the benchmark's own
// process: a TerminalScreen that skips text scrolling away unseen (runner/agent/scrolled-off.ts,
// the runner's default) against one that parses every byte, same bytes, same run, taking turns.
import { execFileSync } from "node:child_process";
import { TerminalScreen } from "../../runner/agent/screen.js";
import { type BenchConfig, type Progress, type Row, fmt, median } from "./row.js";

/** The runner's read size: each chunk written to the screen as the session's output would be. */
const CHUNK_BYTES = 64 << 10;

/** Three floods of about `bytes` each, as a terminal gets them (lines ending CR LF). */
function floods(bytes: number): { name: string; data: Buffer }[] {
  const lines = (text: string) => Buffer.from(text.replaceAll("\n", "\r\n"), "latin1");
  const shell = (script: string) => execFileSync("/bin/sh", ["-c", script], { maxBuffer: 4 * bytes + (1 << 20), encoding: "latin1" });
  return [
    { name: "base64 -w 200", data: lines(shell(`head -c ${Math.floor((bytes * 3) / 4)} /dev/zero | base64 -w 200`)) },
    { name: "`yes` of 100-byte lines", data: lines(`${"y".repeat(99)}\n`.repeat(Math.floor(bytes / 101))) },
    { name: "log lines", data: lines(shell(`seq -f 'INFO %g request handled in 12 ms by worker-3 path=/api/v1/items?page=7' 1 ${Math.floor(bytes / 75)}`)) },
  ];
}

/** Milliseconds per MB for a fresh 80×24 screen to parse `data` written in CHUNK_BYTES pieces. */
async function msPerMB(data: Buffer, skipScrolledOff: boolean): Promise<{ ms: number; skipped: number }> {
  const screen = new TerminalScreen({ cols: 80, rows: 24, skipScrolledOff });
  const started = performance.now();
  for (let at = 0; at < data.length; at += CHUNK_BYTES) screen.write(at, data.subarray(at, at + CHUNK_BYTES));
  await screen.parsed();
  const ms = (performance.now() - started) / (data.length / 1e6);
  const skipped = screen.skipped / data.length;
  screen.dispose();
  return { ms, skipped };
}

export async function emulatorRows(config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  for (const { name, data } of floods(Math.min(config.floodBytes, 10_000_000))) {
    const skipping: number[] = [];
    const parsing: number[] = [];
    let skipped = 0;
    for (let n = 1; n <= config.runs; n++) {
      // Taking turns, so a slower minute of the machine falls on both.
      const first = n % 2 === 1;
      const a = await msPerMB(data, first);
      const b = await msPerMB(data, !first);
      const [skip, all] = first ? [a, b] : [b, a];
      skipping.push(skip.ms);
      parsing.push(all.ms);
      skipped = skip.skipped;
      progress(`18 ${name} run ${n}: ${skip.ms.toFixed(1)} ms/MB skipping (${(skip.skipped * 100).toFixed(1)}% skipped), ${all.ms.toFixed(1)} ms/MB parsing all`);
    }
    rows.push({
      n: 18,
      what: `the screen's emulator per MB of a plain flood (${name}, ${(data.length / 1e6).toFixed(1)} MB in 64 KiB writes, 80×24, in this process): skipping text that scrolls away unseen (${(skipped * 100).toFixed(1)}% of the bytes skipped); baseline: parsing every byte`,
      ours: fmt(skipping, 1, " ms"),
      baseline: fmt(parsing, 1, " ms"),
      ratio: `${(median(skipping) / median(parsing)).toFixed(2)}×`,
      target: "reported",
      met: undefined,
    });
  }
  return rows;
}
