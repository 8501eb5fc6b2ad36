// `npm start` as a person runs it, and `npm run build` while a stack serves the page.
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { freePort, ROOT } from "../scripts/stack.js";
import { SuiteCleanup, until } from "./harness.js";

const cleanup = new SuiteCleanup();
const scratch = cleanup.tempFolder("ptyb-start-");
const started: ChildProcess[] = [];

cleanup.first(() => {
  // Whatever a failed test left: its process group, by the leader's pid (only what we started).
  for (const child of started) {
    try {
      if (child.pid) process.kill(-child.pid, "SIGKILL");
    } catch {
      // gone
    }
  }
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

describe("npm start", () => {
  it.each([
    ["npm start | cat", ["cat"]],
    ['npm start 2>&1 | tee "$LOG"', ["tee"]],
  ])("`%s`, then Ctrl+C (SIGINT to the whole process group): no process of the stack is left", async (pipeline, readers) => {
    const port = await freePort();
    // sh runs the pipeline; detached makes it a process group of its own, as a terminal's job is.
    const child = spawn("sh", ["-c", pipeline], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PORT: String(port), API_KEYS: "dev:start-test-key", STATE_DIR: join(scratch, "state"), LOG: join(scratch, "log") },
    });
    started.push(child);
    const leader = child.pid as number;
    let out = "";
    let err = "";
    child.stdout?.setEncoding("utf8").on("data", (text: string) => (out += text));
    child.stderr?.setEncoding("utf8").on("data", (text: string) => (err += text));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const explain = (error: Error) => {
      throw new Error(`${error.message}\nstdout:\n${out}\nstderr:\n${err.slice(-4000)}`);
    };

    const url = `http://127.0.0.1:${port}`;
    await until(() => out.includes(`URL      ${url}`), 90_000, "npm start's URL line").catch(explain);

    // A session, so that the runner has a process of its own to end.
    const headers = { authorization: "Bearer start-test-key", "content-type": "application/json" };
    const res = await fetch(`${url}/v1/sessions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ command: "/bin/sleep", args: ["600"] }),
    });
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

    // Every process of the stack, recorded while it runs: sh, npm, tsx, start.ts, wrangler,
    // workerd, the runner, the session's sleep.
    const recorded = tree(leader);
    const names = recorded.map((p) => stat(p)?.comm ?? "?");
    expect(recorded).toContain(pid);
    expect(names).toEqual(expect.arrayContaining(["sh", "npm start", ...readers, "workerd", "sleep"]));
    expect(names.filter((n) => n === "node").length).toBeGreaterThanOrEqual(3); // start.ts, wrangler, the runner

    process.kill(-leader, "SIGINT"); // what a terminal's Ctrl+C does to its foreground job
    await exited;
    await until(() => recorded.every((p) => !alive(p)), 30_000, "every process of the stack gone").catch((error: Error) => {
      const left = recorded.filter(alive).map((p) => `${p} ${stat(p)?.comm}`);
      return explain(new Error(`${error.message}; left: ${left.join(", ")}`));
    });
    expect(recorded.filter(alive)).toEqual([]);
    expect(await portFree(port)).toBe(true);
  }, 150_000);
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
