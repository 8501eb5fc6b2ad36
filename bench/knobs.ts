// `npm run bench -- --knobs`: the runner's tuning knobs and what each setting does to throughput,
// echo latency and CPU per MB of output, each setting on a fresh stack in the same run.
import { echoRoundTrips, throughput } from "./measures.js";
import { cpuMs, descendantsNamed } from "./proc.js";
import { startBenchStack } from "./stack.js";
import { medianRange } from "./stats.js";
import { stackSession } from "./terminals.js";

export interface KnobSetting {
  knob: string;
  value: string;
  env: Record<string, string>;
}

export const KNOB_SETTINGS: KnobSetting[] = [
  { knob: "COALESCE_MS / COALESCE_BYTES", value: "4 ms / 64 KiB", env: { COALESCE_MS: "4", COALESCE_BYTES: "65536" } },
  { knob: "COALESCE_MS / COALESCE_BYTES", value: "16 ms / 256 KiB (default)", env: {} },
  { knob: "COALESCE_MS / COALESCE_BYTES", value: "32 ms / 512 KiB", env: { COALESCE_MS: "32", COALESCE_BYTES: "524288" } },
  { knob: "FLOW_HIGH_WATER / LOW", value: "256 / 64 KiB", env: { FLOW_HIGH_WATER: "262144", FLOW_LOW_WATER: "65536" } },
  { knob: "FLOW_HIGH_WATER / LOW", value: "4 / 1 MiB", env: { FLOW_HIGH_WATER: "4194304", FLOW_LOW_WATER: "1048576" } },
];

export async function measureKnobs(options: {
  runs: number;
  bytes: number;
  keystrokes: number;
  progress: (message: string) => void;
}): Promise<string> {
  const lines = [
    "| knob | setting | throughput | echo p50 | runner CPU per MB | workerd CPU per MB |",
    "|---|---|---|---|---|---|",
  ];
  for (const setting of KNOB_SETTINGS) {
    const stack = await startBenchStack({ runnerEnv: setting.env });
    try {
      const workerd = descendantsNamed(stack.edge.pid, "workerd");
      const mbps: number[] = [];
      const echo: number[] = [];
      const runnerCpu: number[] = [];
      const workerdCpu: number[] = [];
      for (let run = 1; run <= options.runs; run++) {
        const flood = await stackSession(stack);
        const before = { runner: cpuMs(stack.runner.pid), workerd: workerd.reduce((n, p) => n + cpuMs(p), 0) };
        const r = await throughput(flood.term, options.bytes);
        runnerCpu.push((cpuMs(stack.runner.pid) - before.runner) / (r.bytes / 1e6));
        workerdCpu.push((workerd.reduce((n, p) => n + cpuMs(p), 0) - before.workerd) / (r.bytes / 1e6));
        mbps.push(r.mbps);
        await flood.term.close();
        await stack.api.destroy(flood.id);
        const keys = await stackSession(stack);
        echo.push((await echoRoundTrips(keys.term, options.keystrokes)).p50);
        await keys.term.close();
        await stack.api.destroy(keys.id);
        options.progress(`${setting.knob} = ${setting.value}: ${r.mbps.toFixed(1)} MB/s, echo ${echo.at(-1)?.toFixed(2)} ms`);
      }
      lines.push(
        `| ${setting.knob} | ${setting.value} | ${medianRange(mbps)} MB/s | ${medianRange(echo, 2)} ms | ${medianRange(runnerCpu, 0)} ms | ${medianRange(workerdCpu, 0)} ms |`,
      );
    } finally {
      await stack.stop();
    }
  }
  return lines.join("\n");
}
