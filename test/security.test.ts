// Issue 4: every rule attempted from the wrong side — other tenants, scoped tokens and their
// roles (REST and WebSocket, per message), expired and forged tokens, runner trust, the
// session's environment and cwd, and the limits (on a stack of its own with small limits).
import { sign } from "hono/jwt";
import WebSocket from "ws";
import { beforeAll, describe, expect, inject, it } from "vitest";
import type { Edge, ManagedProcess } from "../scripts/stack.js";
import { TENANTS } from "./global-setup.js";
import {
  Api,
  SseClient,
  type SuiteStack,
  SuiteCleanup,
  TermClient,
  fetchOutput,
  line,
  onSharedStack,
  parentPid,
  startSuiteStack,
  until,
  waitForRunners,
} from "./harness.js";

const suite = onSharedStack();
const { url, api: acme, globex } = suite;
const runnerToken = inject("runnerToken");
const tokenSecret = inject("tokenSecret");
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

function session(api: Api, body: Record<string, unknown> = BASH) {
  return suite.session(body, api);
}

function connect(id: string, key: string, query?: string) {
  return suite.connect(id, { query }, key);
}

async function mint(id: string, role: "viewer" | "writer", ttlSec?: number): Promise<string> {
  const res = await acme.request("POST", `/v1/sessions/${id}/tokens`, { role, ttlSec });
  expect(res.status).toBe(201);
  expect(typeof res.body.token).toBe("string");
  expect(Date.parse(res.body.expiresAt)).toBeGreaterThan(Date.now());
  return res.body.token;
}

/** Every route of a session, with a body where it needs one. */
function routes(id: string): [string, string, unknown?][] {
  return [
    ["GET", `/v1/sessions/${id}`],
    ["GET", `/v1/sessions/${id}/wait?timeoutSec=0`],
    ["GET", `/v1/sessions/${id}/output`],
    ["POST", `/v1/sessions/${id}/input`, { data: "echo intruder\n" }],
    ["POST", `/v1/sessions/${id}/resize`, { cols: 99, rows: 33 }],
    ["POST", `/v1/sessions/${id}/signal`, { signal: "SIGINT" }],
    ["POST", `/v1/sessions/${id}/tokens`, { role: "writer" }],
    ["DELETE", `/v1/sessions/${id}`],
  ];
}

/** Opens a WebSocket and resolves with its close code and the messages it got. */
async function socketOutcome(target: string, headers: Record<string, string> = {}) {
  const ws = new WebSocket(target, { headers });
  const messages: any[] = [];
  ws.on("message", (data: Buffer, isBinary) => {
    if (!isBinary) messages.push(JSON.parse(data.toString()));
  });
  const code = await new Promise<number>((resolve) => {
    ws.on("close", (c) => resolve(c));
    ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
    ws.on("error", () => {});
  });
  return { code, messages };
}

const wsUrl = (path: string) => `${url.replace(/^http/, "ws")}${path}`;

describe("tenant isolation", () => {
  it("answers 404 to another tenant on every route, SSE and WebSocket, and lets it reuse the id", async () => {
    const id = `shared-${Date.now()}`;
    const s = await session(acme, { ...BASH, id });
    for (const [method, path, body] of routes(s.id)) {
      const res = await globex.request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.code).toBe("NOT_FOUND");
    }
    const sse = new SseClient(url, s.id, TENANTS.globex);
    await sse.done;
    expect(sse.status).toBe(404);
    const ws = await socketOutcome(wsUrl(`/v1/sessions/${s.id}/connect`), { authorization: `Bearer ${TENANTS.globex}` });
    expect(ws.code).toBe(4004);
    expect((await globex.request("GET", "/v1/sessions")).body.sessions.map((x: any) => x.id)).not.toContain(s.id);

    // The same id in the other tenant is a different session.
    const theirs = await session(globex, { command: "/bin/sh", args: ["-c", "echo globex-side; sleep 30"], id });
    expect(theirs.id).toBe(id);
    expect(theirs.pid).not.toBe(s.pid);
    expect((await acme.get(id)).pid).toBe(s.pid);
    expect((await acme.get(id)).status).toBe("running");
  });
});

describe("session tokens", () => {
  it("lets a viewer read everything and nothing else, on REST and per WebSocket message", async () => {
    const s = await session(acme);
    await acme.input(s.id, "echo before-$((2+3))\n");
    const viewer = await mint(s.id, "viewer");
    const asViewer = new Api(url, viewer);

    expect((await asViewer.request("GET", `/v1/sessions/${s.id}`)).status).toBe(200);
    expect((await asViewer.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=0`)).status).toBe(200);
    await until(async () => (await fetchOutput(asViewer, s.id, 0)).bytes.includes("before-5"), 10_000, "output");
    const sse = new SseClient(url, s.id, viewer);
    await sse.waitFor(() => sse.bytes.includes("before-5"), "viewer SSE");
    sse.close();

    const refusals: [string, string, unknown?][] = [
      ["POST", `/v1/sessions/${s.id}/input`, { data: "echo viewer-typed\n" }],
      ["POST", `/v1/sessions/${s.id}/resize`, { cols: 99, rows: 33 }],
      ["POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGINT" }],
      ["POST", `/v1/sessions/${s.id}/tokens`, { role: "writer" }],
      ["DELETE", `/v1/sessions/${s.id}`],
      ["GET", "/v1/sessions"],
      ["POST", "/v1/sessions", {}],
    ];
    for (const [method, path, body] of refusals) {
      const res = await asViewer.request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error.code).toBe("FORBIDDEN");
    }

    // Over WebSocket: by header and by ?token=, reading works; input, resize and signal are
    // refused one message at a time and never reach the process.
    const byHeader = connect(s.id, viewer);
    const byQuery = connect(s.id, "", `token=${encodeURIComponent(viewer)}`);
    await byHeader.waitForOutput("before-5");
    await byQuery.waitForOutput("before-5");
    byHeader.send("echo viewer-typed\n");
    byHeader.control({ type: "resize", cols: 99, rows: 33 });
    byQuery.control({ type: "signal", signal: "SIGTERM" });
    await byHeader.waitFor(() => byHeader.messages.filter((m) => m.type === "error").length === 2, "two refusals");
    await byQuery.waitForMessage((m) => m.type === "error", "refusal");
    for (const m of [...byHeader.messages, ...byQuery.messages].filter((x) => x.type === "error")) {
      expect(m.code).toBe("FORBIDDEN");
    }
    const raw = connect(s.id, "", `mode=raw&token=${encodeURIComponent(viewer)}`);
    await raw.opened;
    raw.socket.send("echo raw-viewer-typed\n");

    const owner = connect(s.id, TENANTS.acme, "from=live");
    await owner.waitForMessage((m) => m.type === "live", "live");
    owner.send("echo owner-$((4+4))\n");
    await byHeader.waitForOutput(line("owner-8"));
    await raw.waitForOutput(line("owner-8"));
    const everything = (await fetchOutput(acme, s.id, 0)).bytes.toString();
    expect(everything).not.toContain("viewer-typed");
    const now = await acme.get(s.id);
    expect([now.status, now.cols, now.rows]).toEqual(["running", 80, 24]);
  });

  it("lets a writer type, resize and signal, but not delete, mint tokens or list", async () => {
    const s = await session(acme);
    const writer = await mint(s.id, "writer");
    const asWriter = new Api(url, writer);
    expect((await asWriter.request("POST", `/v1/sessions/${s.id}/input`, { data: "echo w-$((1+1))\n" })).status).toBe(
      202,
    );
    expect((await asWriter.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 100, rows: 30 })).body).toMatchObject({
      cols: 100,
      rows: 30,
    });
    const ws = connect(s.id, "", `token=${encodeURIComponent(writer)}`);
    await ws.opened;
    ws.send("echo ws-writer-$((3+3))\n");
    await ws.waitForOutput(line("ws-writer-6"));
    expect(ws.messages.filter((m) => m.type === "error")).toEqual([]);
    expect((await asWriter.request("POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGINT" })).status).toBe(202);
    for (const [method, path, body] of [
      ["DELETE", `/v1/sessions/${s.id}`],
      ["POST", `/v1/sessions/${s.id}/tokens`, { role: "writer" }],
      ["GET", "/v1/sessions"],
      ["POST", "/v1/sessions", {}],
    ] as [string, string, unknown?][]) {
      expect((await asWriter.request(method, path, body)).status, `${method} ${path}`).toBe(403);
    }
    expect((await acme.get(s.id)).status).toBe("running");
  });

  it("answers 401 to a token for another session, an expired, a forged or a foreign token, and an API key in the URL", async () => {
    const s = await session(acme);
    const other = await session(acme);
    const viewer = await mint(s.id, "viewer");
    const [header, payload, signature] = viewer.split(".");
    const flipped = `${signature.slice(0, -2)}${signature.endsWith("AA") ? "BB" : "AA"}`;
    const now = Math.floor(Date.now() / 1000);
    const { inc } = JSON.parse(Buffer.from(payload, "base64url").toString()) as { inc: string };
    const claims = { aud: "ptybroker-session", ten: "acme", sid: s.id, inc, role: "writer", iat: now, exp: now + 600 };
    const unsigned = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.`;
    const bad: [string, string][] = [
      ["another session's token", viewer],
      ["a forged signature", `${header}.${payload}.${flipped}`],
      ["a token signed with another secret", await sign(claims, "not-the-secret", "HS256")],
      ["alg none", unsigned],
      ["a token without our audience", await sign({ ...claims, aud: "else" }, tokenSecret, "HS256")],
      ["garbage", "not.a.token"],
      ["the runner token", runnerToken],
    ];
    for (const [what, token] of bad) {
      const target = what === "another session's token" ? other.id : s.id;
      const res = await new Api(url, token).request("GET", `/v1/sessions/${target}`);
      expect(res.status, what).toBe(401);
      expect(res.body.error.code).toBe("UNAUTHORIZED");
      const ws = await socketOutcome(wsUrl(`/v1/sessions/${target}/connect?token=${encodeURIComponent(token)}`));
      expect(ws.code, what).toBe(4001);
    }
    // A properly signed token of ours is accepted (so the ones above failed for their flaw).
    expect((await new Api(url, await sign(claims, tokenSecret, "HS256")).request("GET", `/v1/sessions/${s.id}`)).status).toBe(200);

    // API keys are not taken from the URL.
    const keyInUrl = await fetch(`${url}/v1/sessions/${s.id}?token=${TENANTS.acme}`);
    expect(keyInUrl.status).toBe(401);

    // Expiry: a short token works, then stops working. Expiry is in whole seconds from the
    // second it was minted in, so a 1 s token may already be dead when used: 2 s leaves ≥ 1 s.
    const brief = await mint(s.id, "viewer", 2);
    expect((await new Api(url, brief).request("GET", `/v1/sessions/${s.id}`)).status).toBe(200);
    await until(async () => (await new Api(url, brief).request("GET", `/v1/sessions/${s.id}`)).status === 401, 5000, "expiry");

    // Bad token requests change nothing.
    for (const body of [{ role: "owner" }, { role: "viewer", ttlSec: 0 }, { role: "viewer", ttlSec: 10 ** 9 }, {}]) {
      expect((await acme.request("POST", `/v1/sessions/${s.id}/tokens`, body)).status).toBe(400);
    }
    expect((await acme.request("POST", "/v1/sessions/no-such-session/tokens", { role: "viewer" })).status).toBe(404);
  });
});

describe("runner trust and hygiene", () => {
  it("keeps the runner token and API keys apart", async () => {
    expect((await new Api(url, runnerToken).request("GET", "/v1/sessions")).status).toBe(401);
    const listing = await fetch(`${url}/internal/runners`, { headers: { authorization: `Bearer ${TENANTS.acme}` } });
    expect(listing.status).toBe(401);
    for (const path of ["/internal/runners/connect", "/internal/sessions/acme/whatever/link"]) {
      const outcome = await socketOutcome(wsUrl(path), { authorization: `Bearer ${TENANTS.acme}` });
      expect(outcome.code, path).toBe(401); // refused before any upgrade: nothing is left open
    }
  });

  it("gives a session no runner secret in its environment, and keeps cwd inside the workspace", async () => {
    const s = await session(acme, { command: "/usr/bin/env", env: { EXTRA: "requested" } });
    await acme.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=10`);
    const env = (await fetchOutput(acme, s.id, 0)).bytes.toString();
    expect(env).toContain("EXTRA=requested");
    expect(env).toContain("TERM=xterm-256color");
    for (const secretName of ["RUNNER_TOKEN", "REDIS_URL", "BROKER_URL", "OUTPUT_RETAIN_BYTES"]) {
      expect(env).not.toContain(secretName);
    }
    expect(env).not.toContain(runnerToken);

    const before = (await acme.request("GET", "/v1/sessions")).body.sessions.length;
    for (const cwd of ["/etc", "../../x", "..", "a/../../b", "/"]) {
      const res = await acme.request("POST", "/v1/sessions", { ...BASH, cwd });
      expect(res.status, cwd).toBe(400);
      expect(res.body.error.code).toBe("INVALID_REQUEST");
    }
    expect((await acme.request("GET", "/v1/sessions")).body.sessions.length).toBe(before);
    const inside = await session(acme, { command: "/bin/pwd", cwd: "a/../b/./c" });
    await acme.request("GET", `/v1/sessions/${inside.id}/wait?timeoutSec=10`);
    // Resolved inside the tenant's workspace, which is /workspace in the session's sandbox.
    expect((await fetchOutput(acme, inside.id, 0)).bytes.toString()).toBe("/workspace/b/c\r\n");
  });

  it("refuses 1 MiB of input with 413 and the session still works", async () => {
    const s = await session(acme);
    const res = await acme.request("POST", `/v1/sessions/${s.id}/input`, { data: "x".repeat(1 << 20) });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("PAYLOAD_TOO_LARGE");
    const client = connect(s.id, TENANTS.acme);
    await client.opened;
    client.send(Buffer.alloc(65537, 0x78));
    await client.waitForMessage((m) => m.type === "error" && m.code === "PAYLOAD_TOO_LARGE", "413 over WebSocket");
    await acme.input(s.id, "echo still-$((7*6))\n");
    await client.waitForOutput(line("still-42"));
    expect(client.text).not.toContain("xxxxxxxx");
  });
});

describe("limits", () => {
  let edge: Edge;
  let runner: ManagedProcess;
  let small: { acme: Api; globex: Api };

  let limitsToken: string;
  /** Sessions acme created on this stack, for the create rate (5 a minute). */
  let acmeCreates = 0;

  let stack: SuiteStack;
  const limits = new SuiteCleanup();

  beforeAll(async () => {
    stack = await startSuiteStack(
      {
        apiKeys: "acme:limits-acme,globex:limits-globex",
        vars: { MAX_SESSIONS_PER_TENANT: "2", MAX_CLIENTS_PER_SESSION: "2", MAX_CREATES_PER_MINUTE: "5" },
        runners: [{}],
      },
      limits,
    );
    ({ edge, runnerToken: limitsToken } = stack);
    [runner] = stack.runners;
    small = { acme: new Api(edge.url, "limits-acme"), globex: new Api(edge.url, "limits-globex") };
  });

  let globexOnly: ManagedProcess | undefined;

  it("places a tenant's sessions only on runners that serve it (RUNNER_TENANTS)", async () => {
    globexOnly = stack.startRunner({ runnerId: "globex-only", env: { RUNNER_TENANTS: "globex" } });
    await waitForRunners(edge.url, limitsToken, 2);
    const sleep = { command: "/bin/sleep", args: ["60"] };
    // The restricted runner is the emptier one, so without the rule it would get acme's sessions.
    const a = await small.acme.create(sleep);
    const g = await small.globex.create(sleep);
    const b = await small.acme.create(sleep);
    acmeCreates += 2;
    expect(parentPid(a.pid as number)).toBe(runner.pid);
    expect(parentPid(b.pid as number)).toBe(runner.pid);
    expect(parentPid(g.pid as number)).toBe(globexOnly.pid);
    for (const [api, id] of [
      [small.acme, a.id],
      [small.acme, b.id],
      [small.globex, g.id],
    ] as const) {
      await api.destroy(id);
    }
    await globexOnly.stop();
    globexOnly = undefined;
  });

  it("answers the quota's N+1th session 429 with Retry-After while another tenant still creates", async () => {
    const sleep = { command: "/bin/sleep", args: ["60"] };
    const a1 = await small.acme.create(sleep);
    await small.acme.create(sleep);
    acmeCreates += 2;
    const third = await small.acme.request("POST", "/v1/sessions", { ...sleep, id: "third" });
    expect(third.status).toBe(429);
    expect(third.body.error.code).toBe("QUOTA_EXCEEDED");
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await small.acme.request("GET", "/v1/sessions/third")).status).toBe(404);
    expect((await small.acme.request("GET", "/v1/sessions")).body.sessions).toHaveLength(2);
    await small.globex.create(sleep);

    // Clients per session: the third socket is refused with QUOTA_EXCEEDED and 1013.
    const c1 = new TermClient(edge.url, a1.id, "limits-acme");
    const c2 = new TermClient(edge.url, a1.id, "limits-acme");
    await Promise.all([c1.opened, c2.opened]);
    const c3 = new TermClient(edge.url, a1.id, "limits-acme");
    expect(await c3.waitForClose()).toBe(1013);
    expect(c3.messages[0]).toMatchObject({ type: "error", code: "QUOTA_EXCEEDED" });
    c1.socket.terminate();
    c2.socket.terminate();

    // Creates per minute (5): ending sessions frees the quota, not the create rate; creating
    // one at a time uses up the minute.
    const purgeAll = async () => {
      for (const x of (await small.acme.request("GET", "/v1/sessions")).body.sessions) await small.acme.destroy(x.id);
    };
    expect(acmeCreates).toBeLessThan(5);
    for (; acmeCreates < 5; acmeCreates++) {
      await purgeAll();
      await small.acme.create(sleep);
    }
    await purgeAll();
    const tooFast = await small.acme.request("POST", "/v1/sessions", sleep);
    expect(tooFast.status).toBe(429);
    expect(tooFast.body.error.message).toContain("per minute");
    expect(Number(tooFast.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await small.acme.request("GET", "/v1/sessions")).body.sessions).toHaveLength(0);
    await small.globex.create(sleep);
  });
});
