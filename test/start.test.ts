// `npm start` as a person runs it, and `npm run build` while a stack serves the page. npm start
// stops every process it started on Ctrl+C, listens on nothing but its PORT and what workerd and
// miniflare need among themselves (no inspector unless INSPECT=1), and keeps STATE_DIR its
// owner's only (docs/security.md, "Local start"). It passes every Worker variable it is given on to
// the edge, and on a port that is taken it says so and starts nothing (scripts/README.md).
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePort, ROOT, secret, startEdge } from "../scripts/stack.js";
import { mintRunnerCredential } from "../shared/runner-credential.js";
import { WORKER_VARIABLES, type WorkerVariable } from "../shared/worker-vars.js";
import { commandOf, listeningOf, SuiteCleanup, until } from "./harness.js";

const cleanup = new SuiteCleanup();
const scratch = cleanup.tempFolder("ptyb-start-");
const started: ChildProcess[] = [];

cleanup.first(async () => {
  // Whatever a failed test left, by the leader's pid (only what we started). Ctrl+C first: npm
  // start then stops the stack's process groups (wrangler's, the runner's), which a SIGKILL to
  // its own group would leave running; SIGKILL if it has not exited 30 s later.
  const signal = (child: ChildProcess, name: NodeJS.Signals) => {
    try {
      if (child.pid) process.kill(-child.pid, name);
    } catch {
      // gone
    }
  };
  const running = started.filter((child) => child.exitCode === null && child.signalCode === null);
  await Promise.all(
    running.map(async (child) => {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      signal(child, "SIGINT");
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, 30_000)))]);
      clearTimeout(timer);
    }),
  );
  for (const child of started) signal(child, "SIGKILL");
});

/** The direct children of `pid`, from every thread's children list. */
function children(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number),
    );
  } catch {
    return []; // gone
  }
}

/** `pid` and all its descendants, now. */
function tree(pid: number): number[] {
  return [pid, ...children(pid).flatMap(tree)];
}

/** The process's name and state ("Z" for a zombie), or undefined once it is gone. */
function stat(pid: number): { comm: string; state: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = text.lastIndexOf(")");
    return { comm: text.slice(text.indexOf("(") + 1, close), state: text.slice(close + 2, close + 3) };
  } catch {
    return undefined;
  }
}

/** Alive: exists and is not a zombie waiting for a parent that is not reaping it. */
const alive = (pid: number) => {
  const s = stat(pid);
  return s !== undefined && s.state !== "Z";
};

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** `npm start` running: its process group's leader, what it printed, its URL. */
interface NpmStart {
  leader: number;
  port: number;
  url: string;
  out(): string;
  exited: Promise<void>;
  /** Throws `error` with what npm start printed. */
  explain(error: Error): never;
}

const headers = { authorization: "Bearer start-test-key", "content-type": "application/json" };

/**
 * Starts `pipeline` (npm start, maybe piped) the way a terminal runs a job: sh in a process group
 * of its own. Resolves once npm start printed its URL.
 */
async function npmStart(pipeline: string, env: Record<string, string> = {}): Promise<NpmStart> {
  const port = await freePort();
  const child = spawn("sh", ["-c", pipeline], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(port), API_KEYS: "dev:start-test-key", STATE_DIR: join(scratch, "state"), LOG: join(scratch, "log"), ...env },
  });
  started.push(child);
  let out = "";
  let err = "";
  child.stdout?.setEncoding("utf8").on("data", (text: string) => (out += text));
  child.stderr?.setEncoding("utf8").on("data", (text: string) => (err += text));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const explain = (error: Error): never => {
    throw new Error(`${error.message}\nstdout:\n${out}\nstderr:\n${err.slice(-4000)}`);
  };
  const url = `http://127.0.0.1:${port}`;
  await until(() => out.includes(`URL        ${url}`), 90_000, "npm start's URL line").catch(explain);
  return { leader: child.pid as number, port, url, out: () => out, exited, explain };
}

/** Ctrl+C to npm start's process group; resolves once sh has exited and every process of `recorded` is gone. */
async function stopNpmStart(start: NpmStart, recorded: number[]): Promise<void> {
  process.kill(-start.leader, "SIGINT"); // what a terminal's Ctrl+C does to its foreground job
  await start.exited;
  await until(() => recorded.every((p) => !alive(p)), 30_000, "every process of the stack gone").catch((error: Error) => {
    const left = recorded.filter(alive).map((p) => `${p} ${stat(p)?.comm}`);
    return start.explain(new Error(`${error.message}; left: ${left.join(", ")}`));
  });
}

/** A session of the dev tenant running `command`; its pid once it runs. */
async function runningSession(url: string, command: string, args: string[]): Promise<{ id: string; pid: number }> {
  const res = await fetch(`${url}/v1/sessions`, { method: "POST", headers, body: JSON.stringify({ command, args }) });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: string };
  const pid = await until(
    async () => {
      const s = (await (await fetch(`${url}/v1/sessions/${id}`, { headers })).json()) as { status: string; pid: number | null };
      return s.status === "running" ? s.pid : null;
    },
    15_000,
    "the session running",
  );
  return { id, pid };
}

describe("npm start", () => {
  it.each([
    ["npm start | cat", ["cat"]],
    ['npm start 2>&1 | tee "$LOG"', ["tee"]],
  ])("`%s`, then Ctrl+C (SIGINT to the whole process group): no process of the stack is left", async (pipeline, readers) => {
    const start = await npmStart(pipeline);
    const { leader, port } = start;

    // A session, so that the runner has a process of its own to end. In a sandbox, `running`
    // comes before the command itself runs (bubblewrap still sets up), so the sleep is waited for.
    const { pid } = await runningSession(start.url, "/bin/sleep", ["600"]);
    await until(() => tree(leader).some((p) => stat(p)?.comm === "sleep"), 15_000, "the session's sleep").catch(start.explain);

    // Every process of the stack, recorded while it runs: sh, npm, tsx, start.ts, wrangler,
    // workerd, the runner, the session's sandbox (bwrap, slirp4netns) and its sleep.
    const recorded = tree(leader);
    const names = recorded.map((p) => stat(p)?.comm ?? "?");
    expect(recorded).toContain(pid);
    expect(names).toEqual(expect.arrayContaining(["sh", "npm start", ...readers, "workerd", "sleep"]));
    expect(names.filter((n) => n === "node").length).toBeGreaterThanOrEqual(3); // start.ts, wrangler, the runner

    await stopNpmStart(start, recorded);
    expect(recorded.filter(alive)).toEqual([]);
    expect(await portFree(port)).toBe(true);
  }, 150_000);
});

/**
 * What each TCP socket the processes of `pids` listen on is, one line per socket: "<process name>
 * <address> <what answers there>". The edge's PORT; miniflare's loopback servers (the addresses
 * workerd is started with, `--external-addr=loopback=`); the Worker in workerd (answers /healthz as
 * the edge does); an inspector (answers /json/version); anything else is "unknown".
 */
async function listeners(pids: number[], port: number): Promise<string[]> {
  const loopbacks = new Set(pids.flatMap((pid) => [...commandOf(pid).matchAll(/--external-addr=loopback=127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]))));
  const health = await (await fetch(`http://127.0.0.1:${port}/healthz`)).text();
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const pid of pids) {
    for (const socket of listeningOf(pid)) {
      if (seen.has(socket.inode)) continue; // also held by a parent
      seen.add(socket.inode);
      const at = `http://127.0.0.1:${socket.port}`;
      const answer = async (path: string) => {
        try {
          const res = await fetch(`${at}${path}`, { signal: AbortSignal.timeout(5000) });
          return `${res.status} ${await res.text()}`;
        } catch {
          return "no HTTP answer";
        }
      };
      let what: string;
      if (socket.port === port) what = "the edge (PORT)";
      else if (loopbacks.has(socket.port)) what = "miniflare loopback";
      else if ((await answer("/healthz")) === `200 ${health}`) what = "the Worker";
      else if ((await answer("/json/version")).includes('"Protocol-Version"')) what = `inspector ${socket.port}`;
      else what = `unknown ${socket.port}: ${await answer("/")}`;
      lines.push(`${stat(pid)?.comm} ${socket.address} ${what}`);
    }
  }
  return lines.sort();
}

/** Every file and folder under `root` whose mode lets its group or others in: "<octal mode> <path>". */
function notPrivate(root: string): { checked: string[]; open: string[] } {
  const checked: string[] = [];
  const open: string[] = [];
  const walk = (path: string) => {
    const st = lstatSync(path);
    checked.push(relative(root, path));
    if ((st.mode & 0o077) !== 0) open.push(`${(st.mode & 0o7777).toString(8)} ${relative(root, path) || "."}`);
    if (st.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(root);
  return { checked, open };
}

/**
 * Every Worker variable but the four npm start and stack.ts set themselves, each with a value of
 * its own that changes nothing the tests here see. A variable added to shared/worker-vars.ts and
 * not here does not typecheck.
 */
const GIVEN_VARS = {
  RUNNER_SECRET: "start-test-runner-secret",
  ADMIN_KEY: "start-test-admin-key",
  MAX_SESSIONS_PER_TENANT: "101",
  MAX_CLIENTS_PER_SESSION: "33",
  MAX_INPUT_BYTES: "65537",
  MAX_CLIENT_LAG_BYTES: "8388609",
  MAX_CREATES_PER_MINUTE: "121",
  START_TIMEOUT_MS: "10001",
  LINK_GRACE_MS: "15001",
  CLIENT_STALL_MS: "60001",
  MAX_OUTPUT_READS: "3",
  SESSION_TIMEOUT_SEC: "86402",
  SESSION_IDLE_TIMEOUT_SEC: "86403",
  SESSION_DETACHED_TIMEOUT_SEC: "86404",
  SESSION_RETAIN_SEC: "86401",
  SSE_KEEPALIVE_MS: "15001",
  CORS_ORIGINS: "https://start-test.example",
  WEBHOOK_ALLOW_PRIVATE: "0",
  WEBHOOK_RETRY_BASE_MS: "30001",
  WEBHOOK_RETRY_CAP_MS: "3600001",
  AUDIT_RETAIN_DAYS: "91",
  LOG_LEVEL: "info",
} as const satisfies Record<Exclude<WorkerVariable, "API_KEYS" | "RUNNER_TOKEN" | "TOKEN_SECRET" | "EDGE_INSTANCE">, string>;

describe("npm start, as it runs", () => {
  const state = join(scratch, "private-state");
  const runnerSecret = GIVEN_VARS.RUNNER_SECRET;
  let start: NpmStart;
  let recorded: number[] = [];
  beforeAll(async () => {
    // STATE_DIR as an earlier npm start (or a careless copy) left it: open to everyone.
    mkdirSync(join(state, "old"), { recursive: true });
    writeFileSync(join(state, "old/file"), "x");
    chmodSync(state, 0o755);
    chmodSync(join(state, "old"), 0o755);
    chmodSync(join(state, "old/file"), 0o666);
    start = await npmStart("npm start", { STATE_DIR: state, ...GIVEN_VARS });
  });
  afterAll(async () => {
    if (start) await stopNpmStart(start, recorded.length > 0 ? recorded : tree(start.leader));
  });

  it("listens on nothing but PORT, the Worker's own port in workerd and miniflare's loopback servers: no inspector, no debug port, all on 127.0.0.1", async () => {
    const { pid } = await runningSession(start.url, "/bin/sleep", ["600"]);
    recorded = tree(start.leader);
    expect(recorded).toContain(pid);
    expect(recorded.map(commandOf).filter((c) => c.includes("--inspector-addr") || c.includes("--debug-port"))).toEqual([]);
    expect(await listeners(recorded, start.port)).toEqual([
      "node 127.0.0.1 miniflare loopback",
      "node 127.0.0.1 miniflare loopback",
      "workerd 127.0.0.1 the Worker",
      "workerd 127.0.0.1 the edge (PORT)",
    ]);
    expect(start.out()).toContain("  Inspector  closed (INSPECT=1 opens it)\n");
  });

  it("after a session, nothing under STATE_DIR lets its group or others in, what was there before included", async () => {
    const { id } = await runningSession(start.url, "/bin/sh", ["-c", "echo private; sleep 600"]);
    const del = await fetch(`${start.url}/v1/sessions/${id}`, { method: "DELETE", headers });
    expect(del.status).toBe(200);
    const { checked, open } = notPrivate(state);
    // The sessions' Durable Object storage is there: the walk saw what the edge wrote.
    expect(checked).toEqual(expect.arrayContaining(["old/file", "v3/do/ptybroker-PtySession"]));
    expect(checked.some((path) => path.startsWith("v3/do/ptybroker-PtySession/") && path.endsWith(".sqlite"))).toBe(true);
    expect(open).toEqual([]);
  });

  it("passes on every Worker variable it is given: secrets in the edge's env file, the rest as --var, none lost", async () => {
    const edgeCommand = tree(start.leader).map(commandOf).find((command) => command.includes("scripts/edge-dev.ts"));
    const words = (edgeCommand ?? "").split(" ");
    const plain = new Map(words.flatMap((word, i) => (words[i - 1] === "--var" ? [[word.slice(0, word.indexOf(":")), word.slice(word.indexOf(":") + 1)]] : [])));
    const envFile = readFileSync(words[words.indexOf("--env-file") + 1], "utf8");
    const secrets = new Map(envFile.split("\n").map((line) => [line.slice(0, line.indexOf("=")), JSON.parse(line.slice(line.indexOf("=") + 1)) as string]));
    for (const [name, value] of Object.entries(GIVEN_VARS)) {
      const secret = WORKER_VARIABLES[name as WorkerVariable].secret;
      expect([name, (secret ? secrets : plain).get(name)]).toEqual([name, value]);
      expect([name, (secret ? plain : secrets).has(name)]).toEqual([name, false]);
    }
    expect([...secrets.keys()].sort()).toEqual(["ADMIN_KEY", "API_KEYS", "RUNNER_SECRET", "RUNNER_TOKEN", "TOKEN_SECRET"]);
    expect(plain.get("EDGE_INSTANCE")).toMatch(/^[\w-]{32}$/);
  });

  it("a runner credential signed with the RUNNER_SECRET it was given is taken, one signed otherwise is not", async () => {
    const credential = await mintRunnerCredential(runnerSecret, { runnerId: "start-test-runner", tenants: null });
    const res = await fetch(`${start.url}/internal/runners`, { headers: { authorization: `Bearer ${credential}` } });
    expect(res.status).toBe(200);
    const forged = await mintRunnerCredential("another-secret", { runnerId: "start-test-runner", tenants: null });
    expect((await fetch(`${start.url}/internal/runners`, { headers: { authorization: `Bearer ${forged}` } })).status).toBe(401);
  });
});

describe("npm start on a port that is taken", () => {
  /** An HTTP server on a free port that answers /healthz as an edge does: another npm start, say. */
  async function otherEdge(): Promise<{ port: number; close(): Promise<void> }> {
    const port = await freePort();
    const server = createHttpServer((_req, res) => res.setHeader("content-type", "application/json").end('{"ok":true}'));
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    return {
      port,
      close: () =>
        new Promise((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  }

  it("says the port is in use and by what, exits 1, and starts nothing", async () => {
    const other = await otherEdge();
    try {
      const child = spawn("npm", ["start"], {
        cwd: ROOT,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, PORT: String(other.port), API_KEYS: "dev:start-test-key", STATE_DIR: join(scratch, "busy-state") },
      });
      started.push(child);
      let out = "";
      child.stdout.setEncoding("utf8").on("data", (text: string) => (out += text));
      child.stderr.setEncoding("utf8").on("data", (text: string) => (out += text));
      const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
      expect(code).toBe(1);
      expect(out).toContain(`npm start: port ${other.port} on 127.0.0.1 is in use: a ptybroker edge answers there (another npm start?). Stop it, or pick another port with PORT=…\n`);
      expect(out).not.toContain("starting the edge");
    } finally {
      await other.close();
    }
  }, 60_000);

  it("stack.ts's startEdge fails, naming the port and who holds it, instead of taking the other edge for its own", async () => {
    const other = await otherEdge();
    try {
      // The edge process sees the port taken and exits: the start fails instead of resolving with the other edge.
      await expect(startEdge({ port: other.port, apiKeys: "dev:k", runnerToken: secret() })).rejects.toThrow(
        `edge: port ${other.port} on 127.0.0.1 is in use: a ptybroker edge answers there (another npm start?)`,
      );
    } finally {
      await other.close();
    }
  }, 90_000);
});

describe("INSPECT=1 npm start", () => {
  it("opens the Worker's inspector on a port of its own, prints it, and a process of the stack listens there", async () => {
    const start = await npmStart("npm start", { INSPECT: "1", STATE_DIR: join(scratch, "inspect-state") });
    const pids = tree(start.leader);
    try {
      const printed = / {2}Inspector {2}ws:\/\/127\.0\.0\.1:(\d+)\/ws \(chrome:\/\/inspect: add 127\.0\.0\.1:(\d+)\)\n/.exec(start.out());
      const port = Number(printed?.[1]);
      expect(printed?.[2]).toBe(String(port));
      const version = (await (await fetch(`http://127.0.0.1:${port}/json/version`)).json()) as Record<string, string>;
      expect(version.Browser).toMatch(/^wrangler\//);
      expect(await listeners(pids, start.port)).toContain(`workerd 127.0.0.1 inspector ${port}`);
    } finally {
      await stopNpmStart(start, pids);
    }
  });
});

describe("npm run build", () => {
  it("while an edge serves web/dist, two builds in a row: every GET / answers 200 with the page, and the edge takes the new build", async () => {
    const url = inject("edgeUrl"); // startEdge (scripts/stack.ts), serving web/dist from this tree
    const build = () =>
      new Promise<number | null>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "scripts/build.ts")], {
          cwd: ROOT,
          stdio: "ignore",
        });
        child.once("exit", (code) => resolve(code));
      });
    const answers = new Map<string, number>();
    /** GET / and /app.js once; what they were, and the page's ETag (its file's path and mtime, hashed). */
    const poll = async () => {
      const [page, script] = await Promise.all([fetch(`${url}/`), fetch(`${url}/app.js`)]);
      const [html, js] = await Promise.all([page.text(), script.text()]);
      const seen = `${page.status} ${/<script[^>]+src="app\.js"/.test(html) ? "page" : "other"} ${script.status} ${js.length > 100_000 ? "script" : "other"}`;
      answers.set(seen, (answers.get(seen) ?? 0) + 1);
      return page.headers.get("etag");
    };
    const before = await poll();
    let building = true;
    const builds = (async () => {
      const codes = [await build(), await build()];
      building = false;
      return codes;
    })();
    let polls = 0;
    // Throughout both builds, then until the edge serves the new files (its watcher reloaded).
    const deadline = Date.now() + 30_000;
    for (let etag = before; building || etag === before; polls++) {
      if (Date.now() > deadline) throw new Error(`the edge still serves ETag ${before} after the builds: ${JSON.stringify([...answers])}`);
      etag = await poll();
    }
    expect(await builds).toEqual([0, 0]);
    expect([...answers]).toEqual([["200 page 200 script", polls + 1]]);
    expect(readdirSync(join(ROOT, "web/dist")).sort()).toEqual(["app.css", "app.css.map", "app.js", "app.js.map", "index.html", "style.css"]);
    console.log(`build: ${polls} polls of / and /app.js during two builds and until the edge reloaded, all 200`);
  });
});
