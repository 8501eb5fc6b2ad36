// Rows 15–16's measures: what the session sandbox costs (docs/security.md), and how a tenant that
// spins every core slows another tenant's keystrokes. On a stack of their own: one edge, a
// redis-server and two runners, each serving its own tenants (RUNNER_TENANTS), so that one run
// puts sessions alternately on a runner with RUNNER_SANDBOX=none and on one with RUNNER_SANDBOX=bwrap.
import { basename } from "node:path";
import { type Edge, type ManagedProcess, secret, startEdge, startRunner, waitForRunners } from "../scripts/stack.js";
import { type RedisServer, startRedis } from "../test/redis-server.js";
import { Api } from "../test/rest-client.js";
import type { Session } from "../shared/session.js";
import { TermClient } from "../test/term-client.js";
import { until } from "../test/waits.js";
import { catEchoes, startCat } from "./measures.js";
import { execTrips } from "./processes.js";
import { alive, pidsWhere } from "./proc.js";
import { PROMPT_END, stockHome } from "./scale.js";
import { type BenchTerm, BASH, stackTerm } from "./terminals.js";

/** The tenants: `plain` on the unsandboxed runner; the others on the sandboxed one. */
export const SANDBOX_TENANTS = { plain: "bench-plain-key", boxed: "bench-boxed-key", spinner: "bench-spinner-key", typist: "bench-typist-key" } as const;
export type SandboxTenant = keyof typeof SANDBOX_TENANTS;

export interface SandboxStack {
  url: string;
  /** One client per tenant. */
  api: Record<SandboxTenant, Api>;
  stop(): Promise<void>;
}

const PROMPT_DEADLINE_MS = 30_000;
const SPINNERS_DEADLINE_MS = 10_000;
/** How long A's spinners may outlive the DELETE of its session: the edge's 2 s grace, and then some. */
const GONE_DEADLINE_MS = 15_000;

/** Starts the edge and Redis, then both runners, and waits until the edge lists them. */
export async function startSandboxStack(): Promise<SandboxStack> {
  const runnerToken = secret();
  const redis: RedisServer = await startRedis();
  let edge: Edge | undefined;
  const runners: ManagedProcess[] = [];
  const stop = async () => {
    await Promise.all(runners.map((r) => r.stop()));
    await edge?.stop();
    await redis.stop();
  };
  try {
    edge = await startEdge({
      apiKeys: Object.entries(SANDBOX_TENANTS)
        .map(([tenant, key]) => `${tenant}:${key}`)
        .join(","),
      runnerToken,
      vars: { MAX_CREATES_PER_MINUTE: "100000" },
    });
    // Sessions inherit the runner's HOME: the distribution's stock dotfiles (scale.ts).
    const home = stockHome();
    const runner = (id: string, tenants: string, sandbox: string) =>
      startRunner({
        brokerUrl: (edge as Edge).url,
        runnerToken,
        runnerId: id,
        env: { REDIS_URL: redis.url, RUNNER_TENANTS: tenants, RUNNER_SANDBOX: sandbox, HOME: home },
      });
    runners.push(runner("bench-unsandboxed", "plain", "none"), runner("bench-sandboxed", "boxed,spinner,typist", "bwrap"));
    await waitForRunners(edge.url, runnerToken, 2);
  } catch (error) {
    await stop();
    throw error;
  }
  const url = edge.url;
  const api = Object.fromEntries(Object.entries(SANDBOX_TENANTS).map(([tenant, key]) => [tenant, new Api(url, key)])) as Record<SandboxTenant, Api>;
  return { url, api, stop };
}

/** What a variant's sessions must have got, as their records say: so that no run measures the wrong setup. */
export interface Want {
  sandbox: "bwrap" | "none";
  network?: "egress" | "none";
}

function check(session: Pick<Session, "id" | "sandbox" | "network">, want: Want): void {
  if (session.sandbox !== want.sandbox || (want.network !== undefined && session.network !== want.network)) {
    throw new Error(`session ${session.id} got sandbox ${session.sandbox}, network ${session.network}; expected ${JSON.stringify(want)}`);
  }
}

/**
 * `count` login shells (the default command, `/bin/bash -l`), one at a time after one warm-up
 * (whose record is checked against `want`): from just before the POST to the first prompt on a
 * framed WebSocket, ms. `extra` goes into each create's body (`network`). Each session is deleted
 * (purged) before the next.
 */
export async function firstPromptTrips(api: Api, count: number, want: Want, extra: Record<string, unknown> = {}): Promise<number[]> {
  const ms: number[] = [];
  for (let i = -1; i < count; i++) {
    const started = performance.now();
    const session = await api.create({ ...extra, tags: ["bench-sandbox"] });
    if (i < 0) check(session, want);
    // No `from`: everything retained is replayed, so a prompt written before the socket opened is seen.
    const client = new TermClient(api.url, session.id, api.key as string);
    try {
      await client.waitForOutput(PROMPT_END, PROMPT_DEADLINE_MS);
      if (i >= 0) ms.push(performance.now() - started);
    } finally {
      client.socket.terminate();
      await api.destroy(session.id);
    }
  }
  return ms;
}

/** `count` execs of `true` by `api`'s tenant, request → answer, ms (processes.ts's execTrips), after one whose session is checked against `want`. */
export async function execTrueTrips(api: Api, count: number, want: Want, extra: Record<string, unknown> = {}): Promise<number[]> {
  const probe = await api.request<{ id: string }>("POST", "/v1/exec", { ...extra, command: "true" });
  if (probe.status !== 200) throw new Error(`exec: ${probe.status} ${JSON.stringify(probe.body)}`);
  check(await api.get(probe.body.id), want);
  await api.destroy(probe.body.id);
  return (await execTrips({ api }, count, extra)).ms;
}

/** Tenant A's load: as many busy loops as its session sees processors (`nproc`), then wait. */
export const SPIN = "for i in $(seq $(nproc)); do (while :; do :; done) & done; wait";

export interface NeighbourEcho {
  idle: { p50: number; p99: number };
  spun: { p50: number; p99: number };
  /** Busy loops A ran (its `nproc`). */
  spinners: number;
  /** How long A's processes took to be gone after its DELETE, ms. */
  goneMs: number;
}

/** Pids of the processes running `bash -c SPIN` (A's shell and its subshells, which share its command line), seen from here. */
function spinPids(): number[] {
  return pidsWhere((argv) => argv.length === 3 && basename(argv[0]) === "bash" && argv[1] === "-c" && argv[2] === SPIN);
}

/**
 * Row 16, once: tenant B (typist) types into `cat` in its shell, `keystrokes` bytes with nothing
 * else running, then as many again while tenant A (spinner) runs SPIN (its default limits: one
 * CPU). A's session is then deleted and every one of its processes must be gone (its cgroup is
 * killed); B's is deleted too.
 */
export async function neighbourEcho(stack: SandboxStack, keystrokes: number): Promise<NeighbourEcho> {
  const typist = stack.api.typist;
  const spinner = stack.api.spinner;
  if (spinPids().length > 0) throw new Error(`spinners of an earlier run still run: ${spinPids().join(", ")}`);
  const b = await typist.create(BASH);
  check(b, { sandbox: "bwrap" });
  let term: BenchTerm | undefined;
  let a: string | undefined;
  let watched: number[] = [];
  try {
    term = await stackTerm({ url: stack.url, apiKey: SANDBOX_TENANTS.typist }, b.id);
    await startCat(term);
    const idle = await catEchoes(term, keystrokes);

    // What A's session sees as its processors: that many loops, and its shell.
    const nproc = await spinner.request<{ exitCode: number; stdout: string }>("POST", "/v1/exec", { command: "nproc" });
    if (nproc.status !== 200 || nproc.body.exitCode !== 0) throw new Error(`exec nproc: ${nproc.status} ${JSON.stringify(nproc.body)}`);
    const spinners = Number(nproc.body.stdout.trim());
    const spinning = await spinner.create({ command: "/bin/bash", args: ["-c", SPIN] });
    a = spinning.id;
    check(spinning, { sandbox: "bwrap" });
    watched = await until(
      () => {
        const pids = spinPids();
        return pids.length === spinners + 1 ? pids : undefined;
      },
      SPINNERS_DEADLINE_MS,
      `A's shell and ${spinners} busy loops`,
    );
    const spun = await catEchoes(term, keystrokes);

    const deleted = performance.now();
    await spinner.destroy(a);
    a = undefined;
    await until(() => !watched.some(alive), GONE_DEADLINE_MS, `A's ${watched.length} processes gone after its DELETE`);
    const goneMs = performance.now() - deleted;
    watched = [];
    return { idle, spun, spinners, goneMs };
  } finally {
    await term?.close();
    await typist.destroy(b.id);
    if (a !== undefined) await spinner.destroy(a);
    // Whatever of A outlived its session must not spin through the rest of the benchmark.
    for (const pid of [...watched, ...spinPids()]) {
      try {
        if (alive(pid)) process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
    }
  }
}
