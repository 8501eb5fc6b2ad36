// What `npm start` (start.ts) decides before it starts anything: which Worker variables of its
// environment go to the edge, and whether its port is already taken (edge-dev.ts asks that too).
import { createServer } from "node:net";
import { WORKER_VARIABLE_NAMES, type WorkerVariable } from "../shared/worker-vars.js";

/** Set by start.ts itself (from the environment, or made up) or by stack.ts: not passed through again. */
const SET_BY_START: readonly WorkerVariable[] = ["API_KEYS", "RUNNER_TOKEN", "TOKEN_SECRET", "EDGE_INSTANCE"];

/** Every Worker variable (shared/worker-vars.ts) that `env` sets, but the ones start.ts sets itself. */
export function edgeVariables(env: NodeJS.ProcessEnv): Partial<Record<WorkerVariable, string>> {
  const vars: Partial<Record<WorkerVariable, string>> = {};
  for (const name of WORKER_VARIABLE_NAMES) {
    const value = env[name];
    if (value !== undefined && value !== "" && !SET_BY_START.includes(name)) vars[name] = value;
  }
  return vars;
}

/**
 * Whether something already listens on `host`:`port`: null if not, else what answers there
 * ("a ptybroker edge" when it answers /healthz as one does).
 */
export async function portTaken(port: number, host = "127.0.0.1"): Promise<string | null> {
  const free = await new Promise<boolean>((resolve, reject) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) => (error.code === "EADDRINUSE" ? resolve(false) : reject(error)));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
  if (free) return null;
  try {
    const res = await fetch(`http://${host}:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
    const body = (await res.json().catch(() => null)) as { ok?: unknown } | null;
    if (res.ok && body?.ok === true) return "a ptybroker edge answers there (another npm start?)";
  } catch {
    // not HTTP, or not answering
  }
  return "another program listens there";
}
