// Placement across runners: no runner answers 503 at once; sessions spread over runners;
// a runner at capacity gets no more.
import { beforeAll, describe, expect, it } from "vitest";
import { type Edge, secret } from "../scripts/stack.js";
import { Api, type SuiteStack, SuiteCleanup, parentPid, startSuiteStack, waitForRunners } from "./harness.js";

const KEY = "placement-key";
const runnerToken = secret();
const cleanup = new SuiteCleanup();
let stack: SuiteStack;
let edge: Edge;
let api: Api;

beforeAll(async () => {
  // No runner yet: the first test is about that; the second starts two.
  stack = await startSuiteStack({ apiKeys: `placer:${KEY}`, runnerToken }, cleanup);
  edge = stack.edge;
  api = new Api(edge.url, KEY);
});

describe("placement", () => {
  it("answers 503 NO_RUNNER promptly when no runner is connected, and keeps nothing", async () => {
    const res = await api.request("POST", "/v1/sessions", { id: "nobody-home" });
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: { code: "NO_RUNNER", message: expect.any(String) } });
    expect((await api.request("GET", "/v1/sessions")).body).toEqual({ sessions: [], nextCursor: null });
    expect((await api.request("GET", "/v1/sessions/nobody-home")).status).toBe(404);
  });

  it("spreads sessions over two runners and gives a full runner no more", async () => {
    const small = stack.startRunner({ capacity: 1, runnerId: "small" });
    const large = stack.startRunner({ capacity: 3, runnerId: "large" });
    await waitForRunners(edge.url, runnerToken, 2);

    const hosts: number[] = [];
    for (let i = 0; i < 4; i++) {
      const s = await api.create({ command: "/bin/sleep", args: ["60"], id: `s${i}` });
      expect(s.status).toBe("running");
      hosts.push(parentPid(s.pid as number));
    }
    expect(hosts.filter((p) => p === small.pid)).toHaveLength(1);
    expect(hosts.filter((p) => p === large.pid)).toHaveLength(3);

    const full = await api.request("POST", "/v1/sessions", { id: "one-too-many" });
    expect(full.status).toBe(503);
    expect(full.body.error.code).toBe("NO_RUNNER");

    // Freeing a slot on the small runner makes room there again.
    const onSmall = hosts.indexOf(small.pid);
    const deleted = await api.request("DELETE", `/v1/sessions/s${onSmall}`);
    expect(deleted.body.status).toBe("exited");
    const again = await api.create({ command: "/bin/sleep", args: ["60"], id: "s-again" });
    expect(parentPid(again.pid as number)).toBe(small.pid);

    const list = await api.request("GET", "/v1/sessions?status=running");
    expect(list.body.sessions.map((s: { id: string }) => s.id).sort()).toEqual(
      ["s0", "s1", "s2", "s3", "s-again"].filter((id) => id !== `s${onSmall}`).sort(),
    );
  });
});
