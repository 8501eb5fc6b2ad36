// A throwaway redis-server for tests: no persistence, on a free local port, stopped by PID.
// `restart` brings up a fresh (empty) server on the same port, like a Redis that crashed.
import { type ChildProcess, spawn } from "node:child_process";
import { connect } from "node:net";
import { freePort } from "../scripts/stack.js";

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

/** REDIS_SERVER overrides the binary; otherwise `redis-server` from PATH. */
const BINARY = process.env.REDIS_SERVER ?? "redis-server";
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

/** Starts redis-server on `port` and resolves once it answers PING. */
async function launch(port: number): Promise<ChildProcess> {
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
  const child = spawn(BINARY, [...args, "--loglevel", "warning"], {
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
