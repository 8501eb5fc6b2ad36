// Row 8: Durable Object wake-ups of idle sessions (idle-cost.ts), on a stack of its own at
// LOG_LEVEL=debug: the edge says each time it wakes a session.
import { measureIdleCost } from "../idle-cost.js";
import { startBenchStack } from "../stack.js";
import type { BenchConfig, Progress, Row } from "./row.js";

/** Row 8 on a stack of its own, stopped before it returns. */
export async function idleCostRows(config: BenchConfig, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  const quiet = await startBenchStack({ vars: { LOG_LEVEL: "debug" }, workerLogs: true });
  try {
    const r = await measureIdleCost(quiet, {
      sessions: config.idleSessions,
      windowSec: config.idleWindowSec,
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
  return rows;
}
