// Scale: many concurrent idle login shells on one runner (issue 6). Creates `sessions` sessions
// with the default command (`/bin/bash -l`), one at a time unless told otherwise, times each from just before its
// POST to its first prompt on a framed WebSocket, closes that client so the session sits idle
// with no subscribers, lets memory settle, reads the resident memory of the runner process
// (its shells are separate processes, so not counted) and of workerd, then deletes (purges)
// every session and checks that they and their shells are gone.
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TermClient } from "../test/term-client.js";
import { descendantsNamed } from "./proc.js";
import type { BenchStack, BenchStackOptions } from "./stack.js";

export interface ScaleResult {
  sessions: number;
  /** One per session: from just before POST /v1/sessions to the first prompt seen on its WebSocket. */
  firstPromptMs: number[];
  /** One per session: the POST alone. */
  createMs: number[];
  /** Runner process RSS before any session and with all sessions idle (shells are separate processes, so excluded). */
  runnerBaseKiB: number;
  runnerLoadedKiB: number;
  workerdBaseKiB: number;
  workerdLoadedKiB: number;
  /** (loaded - base) / sessions */
  runnerKiBPerSession: number;
  workerdKiBPerSession: number;
}

export interface ScaleOptions {
  sessions: number;
  /**
   * Creates in flight at once (default 1), so a percentile is about one create, not a queue. On
   * the 2-core development machine the stack tops out near 20–30 creates/s, so 8 in flight
   * measures queueing (p50 ~400 ms), and even 2 roughly doubles the p50.
   */
  concurrency?: number;
  progress: (message: string) => void;
}

const DEFAULT_CONCURRENCY = 1;
/** Room above `sessions` for the warm-up session and stragglers of an earlier run. */
const HEADROOM = 16;
const PROMPT_DEADLINE_MS = 30_000;
const CLOSE_DEADLINE_MS = 10_000;
/**
 * Memory is read once both processes have been left alone this long: V8 (the runner) and
 * workerd give freed memory back only some seconds after activity stops (measured: an idle
 * runner fresh from start-up drops from ~108 to ~82 MiB, workerd from ~150 to ~61 MiB,
 * 8–10 s in), and a reading before that counts start-up garbage as the baseline...
 */
const SETTLE_MIN_MS = 15_000;
/** ...and then neither has moved by more than its tolerance for this long... */
const SETTLE_STABLE_MS = 3_000;
const SETTLE_TOLERANCE_KIB = { runner: 1024, workerd: 2048 };
/** ...or at this deadline. */
const SETTLE_DEADLINE_MS = 60_000;
const SAMPLE_MS = 250;
const GONE_DEADLINE_MS = 20_000;
const PROGRESS_EVERY = 50;

/**
 * The end of bash's prompt: `$ ` or `# ` as the last visible text, possibly followed by
 * escape sequences readline writes after it. Measured with `/bin/bash -l` (bash 5.2, Debian,
 * stock dotfiles): `\e[?2004h` (bracketed paste on), `\e]0;root@vm: dir\a` (window title), then
 * `\e[01;32mroot@vm\e[00m:\e[01;34mdir\e[00m# `; nothing follows the prompt until input
 * arrives. Matched against the end of everything received so far.
 */
// eslint-disable-next-line no-control-regex
export const PROMPT_END = /[#$] (?:\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\))*$/;

/**
 * The HOME the runner (and so every session) gets: the distribution's stock dotfiles
 * (/etc/skel), so the login shell's start-up is bash's, not whatever the benchmarking account's
 * ~/.bashrc runs (on the development machine, `pyenv init` adds ~130 ms to every prompt).
 * A fixed path, rewritten each run, so repeated runs leave nothing new behind.
 */
export const STOCK_HOME = join(tmpdir(), "ptybroker-bench-home");

/** Writes STOCK_HOME afresh from /etc/skel; returns it. */
export function stockHome(): string {
  mkdirSync(STOCK_HOME, { recursive: true });
  if (existsSync("/etc/skel")) cpSync("/etc/skel", STOCK_HOME, { recursive: true, force: true });
  return STOCK_HOME;
}

/** The stack must be started with startBenchStack(scaleStackOptions(sessions)). */
export function scaleStackOptions(sessions: number): BenchStackOptions {
  const room = String(sessions + HEADROOM);
  stockHome();
  return {
    // The per-tenant quota counts sessions starting or running (default 100); the create rate
    // is raised by startBenchStack itself.
    vars: { MAX_SESSIONS_PER_TENANT: room },
    // Placement refuses a runner at its capacity (default 200). Sessions inherit HOME.
    runnerEnv: { RUNNER_CAPACITY: room, HOME: STOCK_HOME },
  };
}

export async function measureScale(stack: BenchStack, options: ScaleOptions): Promise<ScaleResult> {
  const { sessions, progress } = options;
  const concurrency = Math.max(1, Math.min(options.concurrency ?? DEFAULT_CONCURRENCY, sessions));
  const run = randomBytes(3).toString("hex");
  const created = new Set<string>();
  const closing: Promise<unknown>[] = [];

  /** Creates one session, waits for its first prompt, closes the client (in the background). */
  const openIdle = async (id: string): Promise<{ createMs: number; firstPromptMs: number; tail: string }> => {
    const started = performance.now();
    const res = await stack.api.request<{ id: string; status: string }>("POST", "/v1/sessions", {
      id,
      tags: ["bench-scale"],
    });
    const createMs = performance.now() - started;
    if (res.status !== 201) {
      const reloaded = JSON.stringify(res.body).includes("restarted") ? " (wrangler dev reloads the Worker when its files change)" : "";
      throw new Error(`create ${id}: ${res.status} ${JSON.stringify(res.body)}${reloaded}`);
    }
    created.add(id);
    // No `from`: everything retained is replayed, so a prompt written before the socket
    // opened is still seen.
    const client = new TermClient(stack.url, id, stack.apiKey);
    try {
      await client.waitForOutput(PROMPT_END, PROMPT_DEADLINE_MS);
      const firstPromptMs = performance.now() - started;
      return { createMs, firstPromptMs, tail: client.text.slice(-80) };
    } finally {
      closing.push(closeWithin(client, CLOSE_DEADLINE_MS));
    }
  };

  try {
    await assertNoStrays(stack);
    // One session first, created and deleted before the baseline: the runner's one-time costs
    // (lazy module loads, compiled code, the first socket to the edge) are not per session.
    const warm = await openIdle(`scale-${run}-warmup`);
    progress(`scale: warm-up session up in ${warm.firstPromptMs.toFixed(0)} ms, prompt bytes ${JSON.stringify(warm.tail)}`);
    await Promise.all(closing.splice(0));
    await deleteAll(stack, [`scale-${run}-warmup`], 1);
    created.clear();
    await shellsGone(stack, GONE_DEADLINE_MS);

    const base = await settle(stack);
    progress(
      `scale: baseline runner ${mib(base.runner)}, workerd ${mib(base.workerd)}` +
        `${base.settled ? "" : ` (not settled after ${SETTLE_DEADLINE_MS / 1000} s)`}`,
    );

    const firstPromptMs: number[] = [];
    const createMs: number[] = [];
    let next = 0;
    const startedAt = performance.now();
    const lane = async () => {
      while (next < sessions) {
        const index = next++;
        const up = await openIdle(`scale-${run}-${index}`);
        firstPromptMs.push(up.firstPromptMs);
        createMs.push(up.createMs);
        const done = firstPromptMs.length;
        if (done % PROGRESS_EVERY === 0 || done === sessions) {
          progress(
            `scale: ${done}/${sessions} sessions at a prompt (${((performance.now() - startedAt) / 1000).toFixed(1)} s), ` +
              `runner ${mib(stack.runnerRssKiB())}, workerd ${mib(stack.workerdRssKiB())}`,
          );
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
    await Promise.all(closing.splice(0));

    const loaded = await settle(stack);
    const shells = descendantsNamed(stack.runner.pid, "bash").length;
    progress(
      `scale: ${sessions} idle (${shells} shells under the runner, concurrency ${concurrency}): ` +
        `runner ${mib(loaded.runner)}, workerd ${mib(loaded.workerd)} after ${(loaded.waitedMs / 1000).toFixed(1)} s settling` +
        `${loaded.settled ? "" : " (not settled: memory still moving at the deadline)"}`,
    );
    if (shells < sessions) throw new Error(`only ${shells} of ${sessions} shells are running under the runner`);

    const ids = [...created];
    const deleteStarted = performance.now();
    await deleteAll(stack, ids, concurrency, (done) => {
      if (done % PROGRESS_EVERY === 0 || done === ids.length) progress(`scale: ${done}/${ids.length} deleted`);
    });
    created.clear();
    await sessionsGone(stack, ids);
    await shellsGone(stack, GONE_DEADLINE_MS);
    progress(`scale: all ${ids.length} sessions purged and their shells gone in ${((performance.now() - deleteStarted) / 1000).toFixed(1)} s`);

    return {
      sessions,
      firstPromptMs,
      createMs,
      runnerBaseKiB: base.runner,
      runnerLoadedKiB: loaded.runner,
      workerdBaseKiB: base.workerd,
      workerdLoadedKiB: loaded.workerd,
      runnerKiBPerSession: (loaded.runner - base.runner) / sessions,
      workerdKiBPerSession: (loaded.workerd - base.workerd) / sessions,
    };
  } finally {
    // On failure, leave nothing behind for the next measurement.
    await Promise.allSettled(closing);
    if (created.size > 0) await deleteAll(stack, [...created], concurrency).catch(() => {});
  }
}

const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;

async function closeWithin(client: TermClient, deadlineMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      client.socket.terminate();
      resolve();
    }, deadlineMs);
  });
  try {
    await Promise.race([client.close().then(() => {}), late]);
  } catch {
    client.socket.terminate();
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Samples both processes until they have been idle SETTLE_MIN_MS and stable for
 * SETTLE_STABLE_MS (or the deadline) and returns the last sample.
 */
async function settle(stack: BenchStack): Promise<{ runner: number; workerd: number; waitedMs: number; settled: boolean }> {
  const start = performance.now();
  const window: { at: number; runner: number; workerd: number }[] = [];
  for (;;) {
    const at = performance.now();
    const now = { at, runner: stack.runnerRssKiB(), workerd: stack.workerdRssKiB() };
    window.push(now);
    while (window.length > 1 && at - window[1].at >= SETTLE_STABLE_MS) window.shift();
    const steady = (key: "runner" | "workerd") =>
      Math.max(...window.map((w) => w[key])) - Math.min(...window.map((w) => w[key])) <= SETTLE_TOLERANCE_KIB[key];
    const settled = at - start >= SETTLE_MIN_MS && at - window[0].at >= SETTLE_STABLE_MS && steady("runner") && steady("workerd");
    if (settled || at - start >= SETTLE_DEADLINE_MS) return { runner: now.runner, workerd: now.workerd, waitedMs: at - start, settled };
    await new Promise((r) => setTimeout(r, SAMPLE_MS));
  }
}

async function deleteAll(
  stack: BenchStack,
  ids: string[],
  concurrency: number,
  onDeleted?: (done: number) => void,
): Promise<void> {
  let next = 0;
  let done = 0;
  const failures: string[] = [];
  const lane = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      const res = await stack.api.request("DELETE", `/v1/sessions/${id}?purge=true`);
      if (res.status !== 200 && res.status !== 404) failures.push(`${id}: ${res.status} ${JSON.stringify(res.body)}`);
      onDeleted?.(++done);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, ids.length)) }, lane));
  if (failures.length > 0) throw new Error(`${failures.length} deletes failed, e.g. ${failures[0]}`);
}

/** Every id answers 404, and the tenant's index no longer lists any bench-scale session. */
async function sessionsGone(stack: BenchStack, ids: string[]): Promise<void> {
  const listed = await stack.api.request<{ sessions: { id: string }[] }>("GET", "/v1/sessions?tag=bench-scale");
  if (listed.status !== 200) throw new Error(`list after delete: ${listed.status} ${JSON.stringify(listed.body)}`);
  if (listed.body.sessions.length > 0) {
    throw new Error(`${listed.body.sessions.length} sessions still listed after purge, e.g. ${listed.body.sessions[0].id}`);
  }
  // A sample is enough: the index is what lists and quotas read.
  for (const id of [ids[0], ids[Math.floor(ids.length / 2)], ids[ids.length - 1]]) {
    const res = await stack.api.request("GET", `/v1/sessions/${id}`);
    if (res.status !== 404) throw new Error(`session ${id} answers ${res.status} after purge`);
  }
}

async function shellsGone(stack: BenchStack, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const left = descendantsNamed(stack.runner.pid, "bash").length;
    if (left === 0) return;
    if (Date.now() > deadline) throw new Error(`${left} shells still run under the runner ${deadlineMs} ms after delete`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function assertNoStrays(stack: BenchStack): Promise<void> {
  const left = descendantsNamed(stack.runner.pid, "bash").length;
  if (left > 0) throw new Error(`the runner already hosts ${left} shells: start scale on a fresh stack`);
}
