// The stack a benchmark measures: the edge (wrangler dev → workerd), a real redis-server and one
// runner logging to it, the same launcher `npm start` and the tests use. Stopped by PID.
import { type Edge, type ManagedProcess, secret, startEdge, startRunner, waitForRunners } from "../scripts/stack.js";
import { Api } from "../test/rest-client.js";
import { type RedisServer, startRedis } from "../test/redis-server.js";
import { descendantsNamed, rssKiB } from "./proc.js";

export const BENCH_KEY = "bench-key";

export interface BenchStack {
  url: string;
  apiKey: string;
  api: Api;
  edge: Edge;
  runner: ManagedProcess;
  redis: RedisServer;
  /** Resident memory of the runner process alone (its shells excluded), KiB. */
  runnerRssKiB(): number;
  /** Resident memory of every workerd process of the edge, KiB. */
  workerdRssKiB(): number;
  stop(): Promise<void>;
}

export interface BenchStackOptions {
  /** Worker variables (limits). */
  vars?: Record<string, string>;
  /** Runner environment (capacity, coalescing, flow control). */
  runnerEnv?: Record<string, string>;
  /** Let the Worker's own log lines through (wrangler hides console.log at its default `warn`). */
  workerLogs?: boolean;
}

export async function startBenchStack(options: BenchStackOptions = {}): Promise<BenchStack> {
  const runnerToken = secret();
  const redis = await startRedis();
  let edge: Edge | undefined;
  let runner: ManagedProcess | undefined;
  try {
    edge = await startEdge({
      apiKeys: `bench:${BENCH_KEY}`,
      runnerToken,
      vars: { MAX_CREATES_PER_MINUTE: "100000", ...options.vars },
      ...(options.workerLogs ? { wranglerLogLevel: "log" as const } : {}),
    });
    runner = startRunner({
      brokerUrl: edge.url,
      runnerToken,
      env: { REDIS_URL: redis.url, OUTPUT_RETAIN_BYTES: String(64 << 20), ...options.runnerEnv },
    });
    await waitForRunners(edge.url, runnerToken, 1);
  } catch (error) {
    // A runner that never registered says why in its log (a missing bwrap, say: `npm test`'s
    // pretest installs the tools the stack needs).
    if (runner) console.error(`the bench's runner printed:\n${runner.output().slice(-2000)}`);
    await runner?.stop();
    await edge?.stop();
    await redis.stop();
    throw error;
  }
  const started = { edge, runner };
  const workerd = descendantsNamed(edge.pid, "workerd");
  return {
    url: edge.url,
    apiKey: BENCH_KEY,
    api: new Api(edge.url, BENCH_KEY),
    edge,
    runner,
    redis,
    runnerRssKiB: () => rssKiB(started.runner.pid),
    workerdRssKiB: () => workerd.reduce((sum, pid) => sum + rssKiB(pid), 0),
    async stop() {
      await started.runner.stop();
      await started.edge.stop();
      await redis.stop();
    },
  };
}
