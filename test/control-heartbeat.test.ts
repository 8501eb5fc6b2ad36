// Control-socket heartbeat (docs/protocol.md §6): a runner whose control socket goes silent — its
// network blackholed, no reset, no FIN (test/tcp-proxy.ts) — is noticed by the pool within 30 s:
// it leaves `GET /internal/runners` (or is listed as not placeable) and, being the only runner,
// creates answer 503 NO_RUNNER at once instead of waiting for a spawn that cannot arrive. When
// the network is back the runner dials again and takes sessions. This file's own edge and runner.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { type Edge, type ManagedProcess, secret } from "../scripts/stack.js";
import { Api, SuiteCleanup, listRunners, startSuiteStack, until } from "./harness.js";
import type { TcpProxy } from "./tcp-proxy.js";

const KEY = "heartbeat-key";
const RUNNER_ID = "silent-runner";
/** The contract's bound, and a little for polling on two busy cores. */
const NOTICE_MS = 30_000;
const SLACK_MS = 5_000;
const runnerToken = secret();
const cleanup = new SuiteCleanup();
let edge: Edge;
let proxy: TcpProxy;
let runner: ManagedProcess;
let api: Api;

beforeAll(async () => {
  // The runner dials through a proxy, whose network can go silent; the test waits for it itself.
  const stack = await startSuiteStack(
    { apiKeys: `hearts:${KEY}`, runnerToken, viaProxy: true, runners: [{ runnerId: RUNNER_ID }], waitForRunners: false },
    cleanup,
  );
  edge = stack.edge;
  proxy = stack.proxy as TcpProxy;
  [runner] = stack.runners;
  api = new Api(edge.url, KEY);
});

/** Listed and placeable: present, not draining, not marked otherwise unplaceable. */
async function placeable(): Promise<boolean> {
  const r = (await listRunners(edge.url, runnerToken)).find((x) => x.runnerId === RUNNER_ID);
  return r !== undefined && r.draining !== true && r.placeable !== false;
}

describe("control socket heartbeat", () => {
  it("stops placing on a runner whose control socket went silent within 30 s; takes it back when it dials again", async () => {
    onTestFailed(() => {
      console.error(`---- runner ----\n${runner.output().slice(-5000)}\n---- edge ----\n${edge.output().slice(-3000)}`);
    });
    await until(placeable, 30_000, "the runner to register");
    const before = await api.create({ command: "/bin/true" });
    expect(before.status).not.toBe("failed");

    proxy.blackhole(true);
    await until(async () => !(await placeable()), NOTICE_MS + SLACK_MS, "the pool to stop offering the silent runner");

    // Nowhere to place: 503 at once, not a spawn order into the void.
    const refused = await api.request("POST", "/v1/sessions", { command: "/bin/true" });
    expect(refused).toMatchObject({ status: 503, body: { error: { code: "NO_RUNNER", message: expect.any(String) } } });
    expect((await api.request("GET", "/v1/sessions")).body.sessions.map((s: { id: string }) => s.id)).toEqual([before.id]);

    // The network comes back: the runner dials again and is placed on again.
    proxy.blackhole(false);
    await until(placeable, 30_000, "the runner to register again");
    const after = await api.create({ command: "/bin/sh", args: ["-c", "echo back"] });
    expect(after.status).not.toBe("failed");
    const done = await api.request("GET", `/v1/sessions/${after.id}/wait?timeoutSec=20`);
    expect(done.body).toMatchObject({ status: "exited", exitCode: 0 });
  });
});
