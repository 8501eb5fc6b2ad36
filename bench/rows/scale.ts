// Row 5: idle sessions at scale on a stack of its own (scale.ts), with the agent layer's share of
// their memory measured in this process (agent.ts's screenMemory).
import { screenMemory } from "../agent.js";
import { measureScale } from "../scale.js";
import { type BenchStackOptions, startBenchStack } from "../stack.js";
import { percentile } from "../stats.js";
import type { BenchConfig, Progress, Row } from "./row.js";

/** Row 5 on a stack started with `scaleOptions` (scale.ts's scaleStackOptions), stopped before it returns. */
export async function scaleRows(config: BenchConfig, scaleOptions: BenchStackOptions, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
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
    progress(`5 in process: ${(screens.screenBytes / 1024).toFixed(0)} KiB per TerminalScreen, ${(screens.hostBytes / 1024).toFixed(0)} KiB per AgentHost, ${(screens.droppedHostBytes / 1024).toFixed(0)} KiB once idle (${screens.dropped}/${screens.count} emulators dropped)`);
    rows.push({
      n: 5,
      what: `of which the agent layer: JS heap + buffers per idle session's screen and shell tracker (AgentHost, 80×24), ${screens.count} in this process (TerminalScreen alone ${(screens.screenBytes / 1024).toFixed(0)} KiB)`,
      ours: `${(screens.hostBytes / 1024).toFixed(0)} KiB`,
      baseline: `${r.runnerKiBPerSession.toFixed(0)} KiB (runner RSS per session, above)`,
      ratio: `${((100 * screens.hostBytes) / 1024 / r.runnerKiBPerSession).toFixed(0)}%`,
      target: "reported",
      met: undefined,
    });
    rows.push({
      n: 5,
      what: `of which the agent layer once idle (RUNNER_SCREEN_IDLE_MS): the same AgentHosts after their screens dropped the emulator (${screens.dropped}/${screens.count} dropped)`,
      ours: `${(screens.droppedHostBytes / 1024).toFixed(0)} KiB`,
      baseline: `${(screens.hostBytes / 1024).toFixed(0)} KiB (emulator kept, above)`,
      ratio: `${((100 * screens.droppedHostBytes) / screens.hostBytes).toFixed(0)}%`,
      target: "reported",
      met: undefined,
    });
  } finally {
    await scaleStack.stop();
  }
  return rows;
}
