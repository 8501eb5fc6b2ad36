// Stacks of a suite's own: an edge (wrangler dev → workerd), a Redis if asked, runners (through
// TCP proxies if asked), started in one call and waited for; and the edge's list of its runners.
// The shared stack (test/global-setup.ts) is started the same way.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type Edge,
  type ManagedProcess,
  secret,
  startEdge,
  startRunner as startRunnerProcess,
  waitForRunners,
} from "../scripts/stack.js";
import type { SuiteCleanup } from "./cleanup.js";
import { type RedisServer, startRedis } from "./redis-server.js";
import { type TcpProxy, startProxy } from "./tcp-proxy.js";
import { until } from "./waits.js";

export { waitForRunners };

/**
 * Where a suite's edge keeps its Durable Object storage unless told: a tmpfs when the machine has
 * one. The session objects commit their offset with every ack (docs/protocol.md §7), and workerd
 * runs SQLite's fsyncs on its one thread: with 300 busy sessions on this VM's disk it went silent
 * for 25-30 s (test/scale.test.ts: every runner link's heartbeat expired), on tmpfs never. The
 * suites test the broker, not the disk; `npm start` and the benchmarks keep their storage on disk.
 */
const STORAGE_ROOT = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();

/** One runner of a suite's stack. */
export interface SuiteRunner {
  runnerId?: string;
  capacity?: number;
  /** Its environment on top of the stack's (REDIS_URL when the stack has a Redis). */
  env?: Record<string, string>;
  /** Descriptors it inherits beyond stdio: runner fd → the test's fd (scripts/stack.ts, manage). */
  fds?: Record<number, number>;
  /** Started through this command line (scripts/stack.ts, RunnerOptions.wrap). */
  wrap?: string[];
}

export interface SuiteStackOptions {
  /** API_KEYS: `tenant:key` pairs, comma-separated. */
  apiKeys: string;
  /** A fresh secret() unless given (a suite that reads `/internal/runners` itself passes its own). */
  runnerToken?: string;
  tokenSecret?: string;
  /** Worker variables (limits, timers). */
  vars?: Record<string, string>;
  /** Durable Object storage, for an edge that restarts; a temporary folder on tmpfs otherwise (STORAGE_ROOT). */
  persistTo?: string;
  /** A Redis of the stack's own, started with the edge, that every runner logs to. */
  redis?: boolean;
  /** Runners started once the edge is up; none unless given. */
  runners?: SuiteRunner[];
  /** The runners dial the edge through a TCP proxy (`proxy`), so that their links can be cut. */
  viaProxy?: boolean;
  /** The runners reach Redis through a TCP proxy (`redisProxy`). */
  redisViaProxy?: boolean;
  /** Whether to wait until the edge lists `runners.length` runners (default true). */
  waitForRunners?: boolean;
}

export interface SuiteStack {
  readonly edge: Edge;
  /** The stack's Redis; throws if it has none. */
  readonly redis: RedisServer;
  /** REDIS_URL as the runners have it (through `redisProxy` when there is one). */
  readonly redisUrl: string | undefined;
  readonly runnerToken: string;
  /** The runners started with the stack, in the order asked. */
  readonly runners: ManagedProcess[];
  readonly proxy: TcpProxy | undefined;
  readonly redisProxy: TcpProxy | undefined;
  /** One more runner on this stack: same token, same way to the edge and to Redis. */
  startRunner(runner: SuiteRunner): ManagedProcess;
  /** Resolves once the edge lists a runner with this id (30 s deadline). */
  waitForRunner(runnerId: string): Promise<void>;
  /** Stops what the stack started: proxies, runners, the edge, Redis, in that order. */
  stop(): Promise<void>;
}

/**
 * Starts an edge and, with `redis`, a Redis at the same time; then the proxies, then the runners,
 * and waits until the edge lists them. With a `cleanup`, every process is added to it as it starts
 * (the suite's afterAll stops them, also after a start that failed halfway); without one, a start
 * that fails stops what it started, and `stop()` is the caller's.
 */
export async function startSuiteStack(options: SuiteStackOptions, cleanup?: SuiteCleanup): Promise<SuiteStack> {
  const runnerToken = options.runnerToken ?? secret();
  const proxies: TcpProxy[] = [];
  const runners: ManagedProcess[] = [];
  let edge: Edge | undefined;
  let redis: RedisServer | undefined;
  let storage = options.persistTo;
  if (storage === undefined) {
    storage = mkdtempSync(join(STORAGE_ROOT, "ptybroker-edge-state-"));
    cleanup?.folder(storage);
  }
  const ownStorage = options.persistTo === undefined ? storage : undefined;
  const stop = async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all(runners.map((r) => r.stop()));
    await edge?.stop();
    await redis?.stop();
    if (ownStorage && !cleanup) rmSync(ownStorage, { recursive: true, force: true });
  };
  try {
    const [edgeStart, redisStart] = await Promise.allSettled([
      startEdge({
        apiKeys: options.apiKeys,
        runnerToken,
        tokenSecret: options.tokenSecret,
        vars: options.vars,
        persistTo: storage,
      }).then((started) => {
        edge = started;
        cleanup?.edge(started);
        return started;
      }),
      options.redis
        ? startRedis().then((started) => {
            redis = started;
            cleanup?.redis(started);
            return started;
          })
        : undefined,
    ]);
    for (const start of [edgeStart, redisStart]) if (start.status === "rejected") throw start.reason;
    const theEdge = edge as Edge;
    const proxy = options.viaProxy ? await startProxy(theEdge.port) : undefined;
    if (proxy) proxies.push(cleanup?.proxy(proxy) ?? proxy);
    const redisProxy = redis && options.redisViaProxy ? await startProxy(redis.port) : undefined;
    if (redisProxy) proxies.push(cleanup?.proxy(redisProxy) ?? redisProxy);
    const redisUrl = redisProxy ? `redis://127.0.0.1:${redisProxy.port}` : redis?.url;
    const brokerUrl = proxy?.url ?? theEdge.url;
    const theRedis = redis;

    const stack: SuiteStack = {
      edge: theEdge,
      get redis(): RedisServer {
        if (!theRedis) throw new Error("this stack has no Redis");
        return theRedis;
      },
      redisUrl,
      runnerToken,
      runners,
      proxy,
      redisProxy,
      startRunner(runner) {
        const started = startRunnerProcess({
          brokerUrl,
          runnerToken,
          runnerId: runner.runnerId,
          capacity: runner.capacity,
          wrap: runner.wrap,
          env: { ...(redisUrl === undefined ? {} : { REDIS_URL: redisUrl }), ...runner.env },
          fds: runner.fds,
        });
        cleanup?.runner(started);
        return started;
      },
      async waitForRunner(runnerId) {
        await until(
          async () => (await listRunners(theEdge.url, runnerToken)).some((r) => r.runnerId === runnerId),
          30_000,
          `runner ${runnerId}`,
        );
      },
      stop,
    };
    for (const runner of options.runners ?? []) runners.push(stack.startRunner(runner));
    if (runners.length > 0 && options.waitForRunners !== false) await waitForRunners(theEdge.url, runnerToken, runners.length);
    return stack;
  } catch (error) {
    if (!cleanup) await stop();
    throw error;
  }
}

/** `GET /internal/runners` as the runner token sees it. */
export async function listRunners(url: string, runnerToken: string): Promise<Record<string, any>[]> {
  const res = await fetch(`${url}/internal/runners`, { headers: { authorization: `Bearer ${runnerToken}` } });
  if (res.status !== 200) throw new Error(`GET /internal/runners: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { runners: Record<string, any>[] }).runners;
}
