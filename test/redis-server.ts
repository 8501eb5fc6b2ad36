// A throwaway redis-server for tests: no persistence, on a free local port, stopped by PID.
// `restart` brings up a fresh (empty) server on the same port, like a Redis that crashed.
// `startRedisCluster` brings up a real 3-master Redis Cluster the same way.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { freePort } from "../scripts/stack.js";
import { toolPath } from "../scripts/test-tools.js";

export interface RedisServer {
  url: string;
  port: number;
  /** PID of the current server process (changes on restart). */
  pid: number;
  /** Stops the server and waits for it to exit; a no-op when it is not running. */
  stop(): Promise<void>;
  /** Stops the server if it runs, then starts an empty one on the same port. */
  restart(): Promise<void>;
}

/** REDIS_SERVER overrides the binary; otherwise the one npm test's pretest step found or provided (scripts/test-tools.ts). */
const BINARY = process.env.REDIS_SERVER ?? toolPath("redis-server");
const READY_DEADLINE_MS = 10_000;
const STOP_GRACE_MS = 5_000;

export async function startRedis(): Promise<RedisServer> {
  // A free port can be taken by someone else before redis binds it: try a few.
  let port = 0;
  let child: ChildProcess | undefined;
  for (let attempt = 1; !child; attempt++) {
    port = await freePort();
    try {
      child = await launch(port);
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
  let current: ChildProcess | undefined = child;
  const server: RedisServer = {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? 0,
    async stop() {
      const running = current;
      current = undefined;
      if (running) await terminate(running);
    },
    async restart() {
      await server.stop();
      current = await launch(port);
      server.pid = current.pid ?? 0;
    },
  };
  return server;
}

/**
 * Starts redis-server on `port` and resolves once it answers PING. `extraArgs` and `cwd` are for
 * cluster nodes (their own nodes.conf folder).
 */
async function launch(port: number, extraArgs: string[] = [], cwd?: string): Promise<ChildProcess> {
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...extraArgs];
  const child = spawn(BINARY, [...args, "--loglevel", "warning"], {
    cwd,
    detached: false,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-10_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  // If the test process exits without stopping it, don't leave it behind.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));

  const spawned = new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", reject);
  });
  await spawned;
  const deadline = Date.now() + READY_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server on port ${port} exited (${child.exitCode ?? child.signalCode}):\n${output}`);
    }
    if (await answersPing(port)) return child;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await terminate(child);
  throw new Error(`redis-server on port ${port} not ready after ${READY_DEADLINE_MS} ms:\n${output}`);
}

/** SIGTERM by PID, SIGKILL after a grace period; resolves when the process has exited. */
async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(child.pid as number, name);
    } catch {
      // already gone
    }
  };
  signal("SIGTERM");
  const timer = setTimeout(() => signal("SIGKILL"), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

/** True when a server on `port` replies +PONG to an inline PING within a second. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

export interface RedisClusterNode {
  port: number;
  /** This node alone: `redis://127.0.0.1:<port>` (a client finds the others from it). */
  url: string;
  /** PID of the node's current process (changes on restart). */
  pid: number;
  /** Stops this node and waits for it to exit; a no-op when it is not running. */
  stop(): Promise<void>;
  /**
   * Stops this node if it runs and starts it again on the same ports and folder: it keeps its
   * place in the cluster (nodes.conf) and its slots, and has lost its data, like a master that
   * crashed without persistence.
   */
  restart(): Promise<void>;
}

export interface RedisCluster {
  /** Every node, comma-separated: `redis://127.0.0.1:P1,redis://127.0.0.1:P2,redis://127.0.0.1:P3`. */
  url: string;
  nodes: RedisClusterNode[];
  /** Stops every node by PID, waits for them to exit and removes their folders. */
  stop(): Promise<void>;
}

/** REDIS_CLI overrides redis-cli; else the one next to REDIS_SERVER, else the one the pretest step resolved. */
const CLI =
  process.env.REDIS_CLI ??
  (process.env.REDIS_SERVER?.includes("/") ? join(dirname(process.env.REDIS_SERVER), "redis-cli") : toolPath("redis-cli"));
const CLUSTER_MASTERS = 3;
const CLUSTER_DEADLINE_MS = 20_000;

/**
 * A real Redis Cluster of three masters (no replicas) on loopback: three
 * `redis-server --cluster-enabled yes`, each in its own temporary folder (its nodes.conf) with no
 * persistence, joined by `redis-cli --cluster create`. Resolves once every node reports
 * `cluster_state:ok` and knows all three; rejects (after stopping what it started) at a deadline.
 */
export async function startRedisCluster(): Promise<RedisCluster> {
  const deadline = Date.now() + CLUSTER_DEADLINE_MS;
  /** Every node started so far, with its current process (undefined while stopped). */
  type Started = { current: ChildProcess | undefined; folder: string };
  const started: Started[] = [];
  const stop = async () => {
    const running = started.splice(0);
    await Promise.all(running.map((node) => node.current && terminate(node.current)));
    for (const { folder } of running) rmSync(folder, { recursive: true, force: true });
  };
  try {
    const nodes = await Promise.all(
      Array.from({ length: CLUSTER_MASTERS }, async (): Promise<RedisClusterNode> => {
        const folder = mkdtempSync(join(tmpdir(), "ptybroker-redis-node-"));
        // A free port can be taken before redis binds it: try a few. The cluster bus gets its own
        // free port (`cluster-port`): the default, port + 10000, may be taken or out of range.
        for (let attempt = 1; ; attempt++) {
          const [port, busPort] = [await freePort(), await freePort()];
          const args = ["--cluster-enabled", "yes", "--cluster-port", String(busPort)];
          const nodeArgs = [...args, "--dir", folder, "--cluster-config-file", "nodes.conf"];
          try {
            const child = await launch(port, nodeArgs);
            const entry: Started = { current: child, folder };
            started.push(entry);
            const node: RedisClusterNode = {
              port,
              url: `redis://127.0.0.1:${port}`,
              pid: child.pid ?? 0,
              async stop() {
                const running = entry.current;
                entry.current = undefined;
                if (running) await terminate(running);
              },
              async restart() {
                await node.stop();
                entry.current = await launch(port, nodeArgs);
                node.pid = entry.current.pid ?? 0;
              },
            };
            return node;
          } catch (error) {
            if (attempt === 3) {
              rmSync(folder, { recursive: true, force: true });
              throw error;
            }
          }
        }
      }),
    );
    const ports = nodes.map((node) => node.port);
    await run(
      CLI,
      ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "0", "--cluster-yes"],
      deadline,
    );
    // redis-cli returns once the slots are assigned and the nodes have met; each node says `ok`
    // only after it has seen every slot covered.
    for (;;) {
      const infos = await Promise.all(ports.map((port) => command(port, "CLUSTER INFO")));
      const ok = infos.every(
        (info) => info?.includes("cluster_state:ok") && info.includes(`cluster_known_nodes:${CLUSTER_MASTERS}`),
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`redis cluster not ok after ${CLUSTER_DEADLINE_MS} ms:\n${infos.join("\n")}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return { url: nodes.map((node) => node.url).join(","), nodes, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** `redis-cli -p <port> <args>` against a local server; resolves with what it printed. */
export function cli(port: number, ...args: string[]): Promise<string> {
  return run(CLI, ["-h", "127.0.0.1", "-p", String(port), ...args], Date.now() + 10_000);
}

/** Runs a command to completion; resolves with its stdout, rejects with its output when it fails or outlives `deadline`. */
function run(binary: string, args: string[], deadline: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    let stdout = "";
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-10_000);
    };
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      keep(chunk);
    });
    child.stderr?.on("data", keep);
    const timer = setTimeout(() => child.kill("SIGKILL"), Math.max(0, deadline - Date.now()));
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // "close", not "exit": every byte it printed has been read by then.
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${binary} ${args.join(" ")} failed (${code ?? signal}):\n${output}`));
    });
  });
}

/**
 * Sends one inline command to the server on `port`; resolves with its reply's text (a bulk
 * string's contents, or the status/error line), or undefined when there is none within a second.
 */
export function command(port: number, text: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let reply = Buffer.alloc(0);
    const done = (value: string | undefined) => {
      socket.destroy();
      resolve(value);
    };
    socket.setTimeout(1000, () => done(undefined));
    socket.on("error", () => done(undefined));
    socket.on("connect", () => socket.write(`${text}\r\n`));
    socket.on("data", (chunk) => {
      reply = Buffer.concat([reply, chunk]);
      const eol = reply.indexOf("\r\n");
      if (eol < 0) return;
      const head = reply.subarray(0, eol).toString("latin1");
      if (head[0] !== "$") return done(head);
      const length = Number(head.slice(1));
      if (length < 0) return done("");
      if (reply.length >= eol + 2 + length + 2) done(reply.subarray(eol + 2, eol + 2 + length).toString("utf8"));
    });
  });
}
