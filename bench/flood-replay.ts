// Measures what issue 3 asks for: the peak memory of the runner and of workerd while 40 MB flood
// through one session (one reading client), and the time to replay 8 MiB of history from Redis
// (`from=<offset 8 MiB before the end>` until `live`). Medians of several runs.
// Run: npx tsx bench/flood-replay.ts [--runs 3] [--mb 40]
import { secret, startEdge, startRunner, waitForRunners } from "../scripts/stack.js";
import { Api } from "../test/rest-client.js";
import { TermClient } from "../test/term-client.js";
import { line } from "../test/terminal-text.js";
import { startRedis } from "../test/redis-server.js";
import { descendantsNamed, rssKiB } from "./proc.js";

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const RUNS = option("runs", 3);
const FLOOD_MB = option("mb", 40);
const REPLAY_BYTES = 8 * 1024 * 1024;

const workerdPids = (root: number) => descendantsNamed(root, "workerd");

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const runnerToken = secret();
const redis = await startRedis();
const edge = await startEdge({ apiKeys: "bench:bench-key", runnerToken });
const runner = startRunner({
  brokerUrl: edge.url,
  runnerToken,
  env: { REDIS_URL: redis.url, OUTPUT_RETAIN_BYTES: String(64 << 20) },
});
interface Result {
  floodMBps: number;
  cuts: number;
  runnerBaseMiB: number;
  runnerPeakMiB: number;
  workerdBaseMiB: number;
  workerdPeakMiB: number;
  replayMs: number;
}
const results: Result[] = [];
try {
  await waitForRunners(edge.url, runnerToken, 1);
  const api = new Api(edge.url, "bench-key");
  const workerd = workerdPids(edge.pid);
  for (let run = 1; run <= RUNS; run++) {
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const client = new TermClient(edge.url, s.id, "bench-key", { query: "from=live" });
    await client.waitForMessage((m) => m.type === "live", "live");
    const base = { runner: rssKiB(runner.pid), workerd: workerd.reduce((n, pid) => n + rssKiB(pid), 0) };
    let peak = { ...base };
    const sampler = setInterval(() => {
      peak = {
        runner: Math.max(peak.runner, rssKiB(runner.pid)),
        workerd: Math.max(peak.workerd, workerd.reduce((n, pid) => n + rssKiB(pid), 0)),
      };
    }, 50);
    const started = performance.now();
    client.send(`stty -echo; head -c ${FLOOD_MB * 750_000} /dev/zero | base64 -w 200; echo flood-$((6*7))\n`);
    // On this 2-core machine the reading client competes with the whole stack for CPU; when it
    // falls MAX_CLIENT_LAG_BYTES behind it is cut (4008) and resumes from its offset, as any
    // client would. Cuts are counted.
    let reader = client;
    let received = 0;
    let cuts = 0;
    for (;;) {
      await Promise.race([reader.waitForOutput(line("flood-42"), 300_000), reader.closed]);
      received += reader.output.byteLength;
      if (reader.closeCode !== 4008) break;
      cuts++;
      reader = new TermClient(edge.url, s.id, "bench-key", { query: `from=${reader.nextOffset}` });
    }
    const floodMs = performance.now() - started;
    clearInterval(sampler);
    const end = reader.nextOffset as number;
    reader.socket.terminate();

    const replayStart = performance.now();
    const replay = new TermClient(edge.url, s.id, "bench-key", { query: `from=${end - REPLAY_BYTES}` });
    await replay.waitForMessage((m) => m.type === "live", "live", 60_000);
    const replayMs = performance.now() - replayStart;
    if (replay.output.byteLength !== REPLAY_BYTES) throw new Error(`replayed ${replay.output.byteLength} bytes`);
    replay.socket.terminate();
    await api.destroy(s.id);

    const result = {
      floodMBps: received / 1e6 / (floodMs / 1000),
      cuts,
      runnerBaseMiB: base.runner / 1024,
      runnerPeakMiB: peak.runner / 1024,
      workerdBaseMiB: base.workerd / 1024,
      workerdPeakMiB: peak.workerd / 1024,
      replayMs,
    };
    results.push(result);
    console.log(`run ${run}: ${JSON.stringify(result, (_k, v) => (typeof v === "number" ? Number(v.toFixed(1)) : v))}`);
  }
  const m = (key: keyof Result) => median(results.map((r) => r[key]));
  console.log(`
| measure (median of ${RUNS}) | value |
|---|---|
| ${FLOOD_MB} MB flood through the stack, one framed client | ${m("floodMBps").toFixed(1)} MB/s |
| slow-consumer cuts of that client (resumed by offset) | ${m("cuts")} |
| runner RSS before → peak during the flood | ${m("runnerBaseMiB").toFixed(0)} → ${m("runnerPeakMiB").toFixed(0)} MiB |
| workerd RSS before → peak during the flood | ${m("workerdBaseMiB").toFixed(0)} → ${m("workerdPeakMiB").toFixed(0)} MiB |
| replay of 8 MiB from Redis, connect to \`live\` | ${m("replayMs").toFixed(0)} ms (${(8.389 / (m("replayMs") / 1000)).toFixed(0)} MB/s) |`);
} finally {
  await runner.stop();
  await edge.stop();
  await redis.stop();
}
