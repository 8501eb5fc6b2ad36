// What an idle session costs the edge: how often its Durable Object is woken (constructed or
// its alarm run) while nothing happens in it. Counted from the edge's `session.wake` debug
// events over a quiet window, for sessions with no timer set and for sessions whose timers
// are set far in the future (neither should wake on a schedule). A control session whose idle
// timer fires inside the window must be counted, or the count is not seeing the edge's logs.
import type { Edge } from "../scripts/stack.js";
import type { BenchStack } from "./stack.js";
import { until } from "../test/waits.js";

export interface IdleCost {
  sessions: number;
  windowSec: number;
  /** Wake-ups per session per hour, sessions without timers. */
  noTimerPerHour: number;
  /** The same with timeoutSec, idleTimeoutSec and detachedTimeoutSec set to a day. */
  farTimersPerHour: number;
}

/** Counts the edge's `session.wake` events per session id from now until `stop()`. */
function countWakes(edge: Edge): { stop(): Map<string, number> } {
  const counts = new Map<string, number>();
  let pending = "";
  const onData = (chunk: Buffer) => {
    const lines = (pending + chunk.toString("utf8")).split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.includes('"session.wake"')) continue;
      const id = /"key":"[^"/]+\/([^"]+)"/.exec(line)?.[1];
      if (id) counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  };
  edge.child.stdout?.on("data", onData);
  return {
    stop() {
      edge.child.stdout?.off("data", onData);
      return counts;
    },
  };
}

const sum = (counts: Map<string, number>, ids: Set<string>) => [...ids].reduce((n, id) => n + (counts.get(id) ?? 0), 0);

export async function measureIdleCost(stack: BenchStack, options: { sessions: number; windowSec: number; progress(m: string): void }): Promise<IdleCost> {
  const plain = new Set<string>();
  const timed = new Set<string>();
  for (let i = 0; i < options.sessions; i++) {
    const a = await stack.api.create({ command: "/bin/sh", args: ["-c", "exec sleep 3600"] });
    plain.add(a.id);
    const day = 24 * 3600;
    const b = await stack.api.create({
      command: "/bin/sh",
      args: ["-c", "exec sleep 3600"],
      timeoutSec: day,
      idleTimeoutSec: day,
      detachedTimeoutSec: day,
    });
    timed.add(b.id);
  }
  await until(async () => {
    const list = await stack.api.request("GET", "/v1/sessions?status=running&limit=1000");
    return list.body.sessions.length >= options.sessions * 2;
  }, 60_000, "every idle session running");
  const control = await stack.api.create({
    command: "/bin/sh",
    args: ["-c", "exec sleep 3600"],
    idleTimeoutSec: Math.max(1, Math.floor(options.windowSec / 3)),
  });
  options.progress(`${options.sessions * 2} idle sessions; counting wake-ups for ${options.windowSec} s`);
  const counter = countWakes(stack.edge);
  const end = Date.now() + options.windowSec * 1000;
  await until(() => Date.now() >= end, options.windowSec * 1000 + 5000, "the quiet window");
  const counts = counter.stop();
  const controlWakes = counts.get(control.id) ?? 0;
  const controlEnded = await stack.api.get(control.id);
  if (controlWakes === 0 || controlEnded.reason !== "idle") {
    throw new Error(`the wake-up count saw no wake-up of the control session (reason ${controlEnded.reason}): are the edge's logs hidden?`);
  }
  const perHour = (n: number) => (n / options.sessions) * (3600 / options.windowSec);
  const result = {
    sessions: options.sessions,
    windowSec: options.windowSec,
    noTimerPerHour: perHour(sum(counts, plain)),
    farTimersPerHour: perHour(sum(counts, timed)),
  };
  for (const id of [...plain, ...timed, control.id]) await stack.api.destroy(id);
  return result;
}
