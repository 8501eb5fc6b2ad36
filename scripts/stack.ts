// Starts and stops the local stack's processes: the edge (wrangler dev → workerd) and
// runners. Used by `npm start` and by the tests, so both run exactly the same way.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { WORKER_VARIABLES, type WorkerVariable } from "../shared/worker-vars.js";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export function secret(): string {
  return randomBytes(24).toString("base64url");
}

export interface ManagedProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Everything the process printed, for diagnostics. */
  output(): string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
  /** The stop signal (SIGTERM unless said otherwise) to the process group we started, SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

export interface StopOptions {
  /** What `stop()` sends first. Default SIGTERM. */
  signal?: NodeJS.Signals;
  /** `stop()`'s default wait before SIGKILL. Default 5000 ms. */
  graceMs?: number;
}

/**
 * Spawns `command` as the leader of a new process group, so stopping it stops its children.
 * `fds`: descriptors of this process the child inherits beyond stdio, as child fd → this
 * process's fd (a test's stand-in for what a service manager or wrapper leaves open).
 */
export function manage(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  echo = false,
  stopping: StopOptions = {},
  fds: Record<number, number> = {},
): ManagedProcess {
  const stdio: ("ignore" | "pipe" | number)[] = ["ignore", "pipe", "pipe"];
  for (const [childFd, fd] of Object.entries(fds)) {
    const at = Number(childFd);
    if (!Number.isInteger(at) || at < 3) throw new Error(`inherited fd ${childFd}: must be above 2`);
    while (stdio.length < at) stdio.push("ignore"); // above 2, "ignore" leaves the fd closed in the child
    stdio[at] = fd;
  }
  const child = spawn(command, args, { cwd: ROOT, env, detached: true, stdio });
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  const pid = child.pid;
  let log = "";
  const keep = (chunk: Buffer) => {
    log += chunk.toString("utf8");
    if (log.length > 200_000) log = log.slice(-100_000);
    if (echo) process.stderr.write(chunk);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let alive = true;
  void exited.then(() => {
    alive = false;
  });
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // the group is gone
    }
  };
  return {
    child,
    pid,
    output: () => log,
    exited,
    kill: signalGroup,
    async stop(graceMs = stopping.graceMs ?? 5000) {
      if (!alive) return signalGroup("SIGKILL"); // leftovers of the group, if any
      signalGroup(stopping.signal ?? "SIGTERM");
      const timer = setTimeout(() => signalGroup("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
      signalGroup("SIGKILL");
    },
  };
}

/**
 * Resolves once the edge at `url` answers `/healthz` as `instance`: another edge already
 * listening on the port (a second `npm start`) answers with another name or none, and is not
 * taken for this one; this one then fails to listen and exits, which rejects here.
 */
export async function waitForHealth(url: string, proc: ManagedProcess, deadlineMs: number, instance: string): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  let exitCode: number | null | undefined;
  void proc.exited.then((code) => {
    exitCode = code;
  });
  while (Date.now() < deadline) {
    if (exitCode !== undefined) throw new Error(`edge exited (${exitCode}) before it was ready:\n${proc.output()}`);
    try {
      const res = await fetch(`${url}/healthz`);
      const body = (await res.json().catch(() => null)) as { instance?: unknown } | null;
      if (res.ok && body?.instance === instance) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`edge not ready after ${deadlineMs} ms:\n${proc.output()}`);
}

export interface EdgeOptions {
  port?: number;
  apiKeys: string;
  runnerToken: string;
  tokenSecret?: string;
  /** Signs per-runner credentials; unset = only the shared runner token. */
  runnerSecret?: string;
  /** More Worker variables (limits, LOG_LEVEL, RUNNER_SECRET...): secrets go in the env file. */
  vars?: Partial<Record<WorkerVariable, string>>;
  /** Folder for Durable Object storage, made its owner's only (privateFolder); a fresh temporary one by default. */
  persistTo?: string;
  /** wrangler's own log level: at `warn` (the default) it hides what the Worker prints with console.log. */
  wranglerLogLevel?: "warn" | "log" | "debug";
  /** Opens the Worker's inspector on 127.0.0.1 at this port; none is listening unless given (edge-dev.ts). */
  inspectorPort?: number;
  echo?: boolean;
}

export interface Edge extends ManagedProcess {
  url: string;
  port: number;
  /** The inspector's port, when one was asked for. */
  inspectorPort?: number;
}

/**
 * Makes `folder` its owner's only (docs/security.md, "Local start"): created 0700 if missing;
 * if it exists, it and everything in it lose their group and other permission bits (storage
 * written before the edge ran with umask 077, edge-dev.ts). Symbolic links are left alone.
 */
export function privateFolder(folder: string): void {
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const strip = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) chmodSync(path, stat.mode & 0o7700);
    if (stat.isDirectory()) for (const name of readdirSync(path)) strip(join(path, name));
  };
  strip(folder);
}

/** Port taken between freePort() and wrangler's bind: edge-dev.ts's words for it. */
const PORT_TAKEN = / is in use: /;

/**
 * Starts the edge on `options.port`, or on a free port. A free port can be taken by another
 * process (a Redis node starting beside it, say) before wrangler binds it: then a fresh one is
 * tried, up to three times; a port the caller named is not changed.
 */
export async function startEdge(options: EdgeOptions): Promise<Edge> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startEdgeOn(options.port ?? (await freePort()), options);
    } catch (error) {
      const taken = error instanceof Error && PORT_TAKEN.test(error.message);
      if (options.port !== undefined || !taken || attempt === 3) throw error;
    }
  }
}

async function startEdgeOn(port: number, options: EdgeOptions): Promise<Edge> {
  // mkdtemp makes it 0700: the env file (secrets) and the default storage are the owner's only.
  const scratch = mkdtempSync(join(tmpdir(), "ptybroker-edge-"));
  // A relative folder is the repository's (where wrangler runs), whatever this process's cwd.
  const persistTo = options.persistTo === undefined ? join(scratch, "state") : resolve(ROOT, options.persistTo);
  privateFolder(persistTo);
  const envFile = join(scratch, "worker.env");
  // This start's name for its edge, which its readiness check asks /healthz for (waitForHealth).
  const instance = secret();
  const given = Object.entries(options.vars ?? {}) as [WorkerVariable, string][];
  const secrets: Record<string, string> = {
    API_KEYS: options.apiKeys,
    RUNNER_TOKEN: options.runnerToken,
    TOKEN_SECRET: options.tokenSecret ?? secret(),
    ...(options.runnerSecret ? { RUNNER_SECRET: options.runnerSecret } : {}),
    ...Object.fromEntries(given.filter(([name]) => WORKER_VARIABLES[name].secret)),
  };
  const plain = [...given.filter(([name]) => !WORKER_VARIABLES[name].secret), ["EDGE_INSTANCE", instance]];
  writeFileSync(
    envFile,
    Object.entries(secrets)
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join("\n"),
    { mode: 0o600 },
  );
  const logLevel = options.wranglerLogLevel ?? "warn";
  const args = [
    "--import",
    "tsx",
    join(ROOT, "scripts/edge-dev.ts"),
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    ...(options.inspectorPort === undefined ? [] : ["--inspector-port", String(options.inspectorPort)]),
    "--env-file",
    envFile,
    "--persist-to",
    persistTo,
    "--log-level",
    logLevel,
    // `--var` wins over wrangler.toml's [vars]; values from --env-file do not.
    ...plain.flatMap(([k, v]) => ["--var", `${k}:${v}`]),
  ];
  const proc = manage(
    process.execPath,
    args,
    {
      // Miniflare fetches `Request.cf` (workers.cloudflare.com/cf.json) at every start and reload,
      // and offline prints a warning with a stack trace each time. Nothing here reads request.cf:
      // its built-in placeholder does. CLOUDFLARE_CF_FETCH_ENABLED=true in the environment fetches.
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
      ...process.env,
      WRANGLER_SEND_METRICS: "false",
      CI: "true",
    },
    options.echo,
  );
  void proc.exited.then(() => rmSync(scratch, { recursive: true, force: true }));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHealth(url, proc, 60_000, instance);
  } catch (error) {
    await proc.stop();
    throw error;
  }
  return { ...proc, url, port, inspectorPort: options.inspectorPort };
}

export interface RunnerOptions {
  brokerUrl: string;
  runnerToken: string;
  capacity?: number;
  runnerId?: string;
  env?: Record<string, string>;
  echo?: boolean;
  /** descriptors the runner inherits beyond stdio: runner fd → this process's fd (manage) */
  fds?: Record<number, number>;
  /** A command line the runner is started through (it execs the rest, as a service manager would): e.g. one that joins a keyring. */
  wrap?: string[];
}

/**
 * A runner process. Its `stop()` sends SIGINT, not SIGTERM: a runner drains on SIGTERM for up to
 * RUNNER_DRAIN_SEC (300 s by default), while SIGINT ends its sessions at once (SIGHUP, SIGKILL
 * after 2 s, reason drain) and exits once their exits reached the edge: at once (66 ms with a
 * shell), or after 2 s + 5 s and a 2 s close of its control socket when the edge does not answer
 * (runner/drain.ts; 9.1 s measured with the edge stopped); hence 15 s before SIGKILL. To drain,
 * send SIGTERM.
 */
export function startRunner(options: RunnerOptions): ManagedProcess {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    BROKER_URL: options.brokerUrl,
    RUNNER_TOKEN: options.runnerToken,
    ...(options.capacity !== undefined ? { RUNNER_CAPACITY: String(options.capacity) } : {}),
    ...(options.runnerId ? { RUNNER_ID: options.runnerId } : {}),
    ...options.env,
  };
  // PTYB_RUNNER_NODE_ARGS: Node options for the runners only, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`
  // to profile them under `npm run bench` (Node refuses --cpu-prof in NODE_OPTIONS).
  const nodeArgs = (process.env.PTYB_RUNNER_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const command = [...(options.wrap ?? []), process.execPath, ...nodeArgs, "--import", "tsx", join(ROOT, "runner/main.ts")];
  return manage(command[0] as string, command.slice(1), env, options.echo, { signal: "SIGINT", graceMs: 15_000 }, options.fds);
}

/** Resolves once `count` runners have registered with the edge at `url`; rejects at the deadline. */
export async function waitForRunners(url: string, runnerToken: string, count: number, deadlineMs = 30_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      const res = await fetch(`${url}/internal/runners`, { headers: { authorization: `Bearer ${runnerToken}` } });
      const body = (await res.json()) as { runners?: unknown[] };
      if ((body.runners?.length ?? 0) >= count) return;
    } catch {
      // the edge is not answering yet
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${deadlineMs} ms waiting for ${count} runner(s)`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
