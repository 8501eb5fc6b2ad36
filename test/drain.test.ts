// Runner drain (docs/protocol.md §4; the runner's side in §6): SIGTERM to a runner stops
// placements on it at once (the only runner: 503 NO_RUNNER) and `GET /internal/runners` shows it
// `draining: true`; its live sessions go on (a shell still answers), those that end meanwhile end
// normally, and when RUNNER_DRAIN_SEC is up the rest end with `reason: "drain"` (a client gets
// `exit` with that reason, then 4010); the runner exits 0. A second SIGTERM skips the wait. This
// file's own edge and runners.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import type { Session } from "../shared/session.js";
import { type Edge, type ManagedProcess, secret } from "../scripts/stack.js";
import { Api, type SuiteStack, SuiteCleanup, TermClient, line, listRunners, startSuiteStack, until } from "./harness.js";

const KEY = "drain-key";
const runnerToken = secret();
const cleanup = new SuiteCleanup();
let stack: SuiteStack;
let edge: Edge;
let api: Api;

beforeAll(async () => {
  // The runners start in the tests.
  stack = await startSuiteStack({ apiKeys: `drainer:${KEY}`, runnerToken }, cleanup);
  edge = stack.edge;
  api = new Api(edge.url, KEY);
});

function launch(runnerId: string, drainSec: number): ManagedProcess {
  const runner = stack.startRunner({ runnerId, env: { RUNNER_DRAIN_SEC: String(drainSec) } });
  onTestFailed(() => {
    console.error(`---- ${runnerId} (pid ${runner.pid}) ----\n${runner.output().slice(-5000)}`);
    console.error(`---- edge ----\n${edge.output().slice(-3000)}`);
  });
  return runner;
}

async function listed(runnerId: string): Promise<Record<string, any> | undefined> {
  return (await listRunners(edge.url, runnerToken)).find((r) => r.runnerId === runnerId);
}

/** The runner's exit code, or a rejection at the deadline. */
function exitCode(runner: ManagedProcess, deadlineMs: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runner ${runner.pid} still running after ${deadlineMs} ms`)), deadlineMs);
    void runner.exited.then((code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

async function noRunnerCreate(): Promise<void> {
  const res = await api.request("POST", "/v1/sessions", { command: "/bin/sleep", args: ["60"] });
  expect(res).toMatchObject({ status: 503, body: { error: { code: "NO_RUNNER", message: expect.any(String) } } });
}

describe("runner drain", () => {
  it("places nothing more on a SIGTERMed runner, lets its sessions run RUNNER_DRAIN_SEC, then ends them with reason drain", async () => {
    const DRAIN_SEC = 6;
    const runner = launch("drain-a", DRAIN_SEC);
    await until(() => listed("drain-a"), 30_000, "drain-a to register");
    expect((await listed("drain-a"))?.draining).not.toBe(true);

    const shell = await api.create({ id: "drained-shell" });
    expect(shell.status).toBe("running");
    const quitter = await api.create({ id: "quits-meanwhile", command: "/bin/sh", args: ["-c", "read line; exit 5"] });
    expect(quitter.status).toBe("running");
    const client = cleanup.client(new TermClient(edge.url, shell.id, KEY));
    await client.waitForMessage((m) => m.type === "hello", "hello");
    client.send("echo before-$((6*7))\n");
    await client.waitForOutput(line("before-42"));

    const sigtermAt = Date.now();
    process.kill(runner.pid, "SIGTERM");
    await until(async () => (await listed("drain-a"))?.draining === true, 5000, "drain-a listed as draining");
    expect(await listed("drain-a")).toMatchObject({ runnerId: "drain-a", draining: true });
    // The only runner is draining: nowhere to place a session.
    await noRunnerCreate();

    // Its sessions go on: the shell still answers, and one that ends by itself ends normally.
    expect(await api.get(shell.id)).toMatchObject({ status: "running", reason: null });
    client.send("echo during-$((6*7))\n");
    await client.waitForOutput(line("during-42"));
    await api.input(quitter.id, "bye\n");
    const quit = await api.request<Session>("GET", `/v1/sessions/${quitter.id}/wait?timeoutSec=10`);
    expect(quit.body).toMatchObject({ status: "exited", exitCode: 5, signal: null, reason: "exit" });

    // When the drain time is up: exit with reason drain, then 4010.
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit message", (DRAIN_SEC + 15) * 1000);
    const ended = await api.get(shell.id);
    expect(ended).toMatchObject({ status: "exited", reason: "drain" });
    expect(exit).toEqual({
      type: "exit",
      status: "exited",
      exitCode: ended.exitCode,
      signal: ended.signal,
      reason: "drain",
      offset: client.nextOffset,
    });
    expect(await client.waitForClose()).toBe(4010);
    expect(client.offsetErrors).toEqual([]);
    // Not before the drain time (the edge's clock and this one are the same machine's).
    expect(Date.parse(ended.exitedAt as string)).toBeGreaterThanOrEqual(sigtermAt + DRAIN_SEC * 1000 - 100);

    expect(await exitCode(runner, 15_000)).toBe(0);
    await until(async () => (await listed("drain-a")) === undefined, 10_000, "drain-a to leave the pool");
    await noRunnerCreate();
  });

  it("skips the wait on a second SIGTERM", async () => {
    const runner = launch("drain-b", 120);
    await until(() => listed("drain-b"), 30_000, "drain-b to register");
    const s = await api.create({ id: "drained-sleep", command: "/bin/sleep", args: ["300"] });
    expect(s.status).toBe("running");

    process.kill(runner.pid, "SIGTERM");
    await until(async () => (await listed("drain-b"))?.draining === true, 5000, "drain-b listed as draining");
    expect((await api.get(s.id)).status).toBe("running");
    process.kill(runner.pid, "SIGTERM");

    // Well before its 120 s.
    expect(await exitCode(runner, 15_000)).toBe(0);
    const ended = await api.request<Session>("GET", `/v1/sessions/${s.id}/wait?timeoutSec=15`);
    expect(ended.body).toMatchObject({ status: "exited", reason: "drain" });
  });
});
