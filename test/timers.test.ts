// Session timers (docs/protocol.md §4, "Timers"): `timeoutSec`, `idleTimeoutSec` and
// `detachedTimeoutSec` end a session as DELETE does (SIGHUP, then SIGKILL after 2 s) with
// `reason` saying which one fired; PATCH moves them; they hold across an edge restart. Played end
// to end on the real stack: the shared edge for most, an edge of this file's own (with its
// Durable Object storage kept in a folder) for the restart. "Still running" is judged after a
// later event that proves the time passed (another session's timer fired, or the clock passed the
// point), never by a bare sleep.
import { describe, expect, it, onTestFailed } from "vitest";
import type { Session } from "../shared/session.js";
import { secret, startEdge } from "../scripts/stack.js";
import { TENANTS } from "./global-setup.js";
import { Api, listRunners, onSharedStack, startSuiteStack, until } from "./harness.js";

// The restart scenario's own processes and folder are the cleanup's too, stopped and removed after the file.
const suite = onSharedStack({ clients: "close" });
const { url, api, cleanup } = suite;

/** A session; purged after the file when it is on the shared edge. */
function session(body: Record<string, unknown>, on: Api = api): Promise<Session> {
  return on === api ? suite.session(body) : on.create(body);
}

const SLEEP = { command: "/bin/sleep", args: ["120"] };

async function waitEnded(id: string, on: Api = api, timeoutSec = 15): Promise<Session> {
  const res = await on.request<Session>("GET", `/v1/sessions/${id}/wait?timeoutSec=${timeoutSec}`);
  expect(res.status).toBe(200);
  return res.body;
}

function ms(iso: string | null): number {
  if (iso === null) throw new Error("expected a time, got null");
  const t = Date.parse(iso);
  if (Number.isNaN(t)) throw new Error(`not an ISO time: ${iso}`);
  return t;
}

/** The fields DELETE leaves on a `/bin/sleep` it ended (test/lifecycle.test.ts), with the timer's reason. */
function endedBy(reason: string) {
  return { status: "exited", exitCode: null, signal: "SIGHUP", reason };
}

describe("timeoutSec", () => {
  it("ends a sleep 120 after 3 s with reason timeout; one PATCHed to 60 s right after create runs on", async () => {
    // Created first: its original deadline passes before the other session's timer fires.
    const beforeB = Date.now();
    const b = await session({ ...SLEEP, timeoutSec: 3 });
    const afterB = Date.now();
    expect(b).toMatchObject({ status: "running", reason: null, timeoutSec: 3, idleTimeoutSec: 0, detachedTimeoutSec: 0 });
    expect(ms(b.expiresAt)).toBeGreaterThanOrEqual(beforeB + 3000);
    expect(ms(b.expiresAt)).toBeLessThanOrEqual(afterB + 3000);
    const patchedAt = Date.now();
    const patched = await api.request<Session>("PATCH", `/v1/sessions/${b.id}`, { timeoutSec: 60 });
    const patchedBy = Date.now();
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: b.id, status: "running", reason: null, timeoutSec: 60 });
    // now + 60 s, measured from the PATCH, not from create.
    expect(ms(patched.body.expiresAt)).toBeGreaterThanOrEqual(patchedAt + 60_000);
    expect(ms(patched.body.expiresAt)).toBeLessThanOrEqual(patchedBy + 60_000);
    expect((await api.get(b.id)).expiresAt).toBe(patched.body.expiresAt);

    const before = Date.now();
    const a = await session({ ...SLEEP, timeoutSec: 3 });
    const after = Date.now();
    expect(a).toMatchObject({
      status: "running",
      reason: null,
      timeoutSec: 3,
      idleTimeoutSec: 0,
      detachedTimeoutSec: 0,
      exitedAt: null,
    });
    expect(ms(a.expiresAt)).toBeGreaterThanOrEqual(before + 3000);
    expect(ms(a.expiresAt)).toBeLessThanOrEqual(after + 3000);

    // A client attached to it is told why it ended.
    const client = suite.connect(a.id);
    await client.waitForMessage((m) => m.type === "hello", "hello");

    const ended = await waitEnded(a.id);
    expect(ended).toMatchObject({ id: a.id, ...endedBy("timeout"), timeoutSec: 3 });
    // Not before its time.
    expect(ms(ended.exitedAt)).toBeGreaterThanOrEqual(ms(a.expiresAt));
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit message");
    expect(exit).toEqual({
      type: "exit",
      status: "exited",
      exitCode: null,
      signal: "SIGHUP",
      reason: "timeout",
      offset: ended.offset,
    });
    expect(await client.waitForClose()).toBe(4010);
    expect(await api.get(a.id)).toMatchObject(endedBy("timeout"));

    // b's first deadline is behind us (a's fired after it, and the clock says so): b runs on.
    await until(() => Date.now() > ms(b.expiresAt) + 1000, 10_000, "b's original deadline to pass");
    const stillB = await api.get(b.id);
    expect(stillB).toMatchObject({ status: "running", reason: null, exitedAt: null, timeoutSec: 60 });
    expect(stillB.expiresAt).toBe(patched.body.expiresAt);

    // 0 removes the limit; label and tags change with the same PATCH route.
    const off = await api.request<Session>("PATCH", `/v1/sessions/${b.id}`, {
      timeoutSec: 0,
      label: "patched",
      tags: ["timers-test"],
    });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ status: "running", timeoutSec: 0, expiresAt: null, label: "patched", tags: ["timers-test"] });
    expect(await api.get(b.id)).toMatchObject({ timeoutSec: 0, expiresAt: null, label: "patched", tags: ["timers-test"] });
  });

  it("takes 0 on create as no limit", async () => {
    const s = await session({ ...SLEEP, timeoutSec: 0, idleTimeoutSec: 0, detachedTimeoutSec: 0 });
    expect(s).toMatchObject({ status: "running", timeoutSec: 0, idleTimeoutSec: 0, detachedTimeoutSec: 0, expiresAt: null });
    const plain = await session(SLEEP);
    // The shared edge sets no SESSION_*_TIMEOUT_SEC: the defaults are off.
    expect(plain).toMatchObject({ timeoutSec: 0, idleTimeoutSec: 0, detachedTimeoutSec: 0, expiresAt: null, reason: null });
  });
});

describe("idleTimeoutSec", () => {
  it("ends a quiet sleep 120 after 3 s with reason idle and spares a session printing every second", async () => {
    const ticking = await session({
      command: "/bin/sh",
      args: ["-c", "while sleep 1; do echo tick; done"],
      idleTimeoutSec: 3,
    });
    expect(ticking).toMatchObject({ status: "running", idleTimeoutSec: 3, timeoutSec: 0, expiresAt: null });
    const quiet = await session({ ...SLEEP, idleTimeoutSec: 3 });
    expect(quiet).toMatchObject({ status: "running", idleTimeoutSec: 3, reason: null });

    const ended = await waitEnded(quiet.id);
    expect(ended).toMatchObject({ id: quiet.id, ...endedBy("idle"), offset: 0 });
    expect(ms(ended.exitedAt)).toBeGreaterThanOrEqual(ms(quiet.createdAt) + 3000);

    // The ticking one was created first: it would have been idle as long by now.
    await until(() => Date.now() > ms(ticking.createdAt) + 4000, 10_000, "the ticking session's idle time to pass");
    const alive = await api.get(ticking.id);
    expect(alive).toMatchObject({ status: "running", reason: null, exitedAt: null });
    expect(alive.offset).toBeGreaterThan(0);
  });
});

describe("detachedTimeoutSec", () => {
  it("does not fire while a WebSocket client stays attached, fires 3 s after it leaves (reason detached)", async () => {
    const attached = await session({ ...SLEEP, detachedTimeoutSec: 3 });
    expect(attached).toMatchObject({ status: "running", detachedTimeoutSec: 3, reason: null });
    const client = suite.connect(attached.id);
    await client.waitForMessage((m) => m.type === "hello", "hello");
    // Never attached: counted from create.
    const lonely = await session({ ...SLEEP, detachedTimeoutSec: 3 });

    const ended = await waitEnded(lonely.id);
    expect(ended).toMatchObject({ id: lonely.id, ...endedBy("detached") });
    expect(ms(ended.exitedAt)).toBeGreaterThanOrEqual(ms(lonely.createdAt) + 3000);

    // The attached one is older: its 3 s have long passed, with its client on it all along.
    await until(() => Date.now() > ms(attached.createdAt) + 4000, 10_000, "the attached session's 3 s to pass");
    expect(await api.get(attached.id)).toMatchObject({ status: "running", reason: null, clients: 1 });
    expect(client.closeCode).toBeUndefined();

    const leftAt = Date.now();
    expect(await client.close()).toBe(1000);
    await until(async () => (await api.get(attached.id)).clients === 0, 10_000, "the edge to see the client leave");
    const gone = await waitEnded(attached.id);
    expect(gone).toMatchObject({ id: attached.id, ...endedBy("detached"), clients: 0 });
    expect(ms(gone.exitedAt)).toBeGreaterThanOrEqual(leftAt + 3000 - 100);
  });
});

describe("PATCH /v1/sessions/:id", () => {
  it("belongs to the API key: a session token gets 403, another tenant 404, bad values 400", async () => {
    const s = await session(SLEEP);
    const tokens: Record<string, string> = {};
    for (const role of ["viewer", "writer"] as const) {
      const res = await api.request("POST", `/v1/sessions/${s.id}/tokens`, { role });
      expect(res.status).toBe(201);
      tokens[role] = res.body.token;
    }
    for (const role of ["viewer", "writer"] as const) {
      const res = await new Api(url, tokens[role]).request("PATCH", `/v1/sessions/${s.id}`, { timeoutSec: 1 });
      expect(res).toMatchObject({ status: 403, body: { error: { code: "FORBIDDEN", message: expect.any(String) } } });
    }
    const other = await new Api(url, TENANTS.globex).request("PATCH", `/v1/sessions/${s.id}`, { timeoutSec: 1 });
    expect(other).toMatchObject({ status: 404, body: { error: { code: "NOT_FOUND", message: expect.any(String) } } });
    const missing = await api.request("PATCH", "/v1/sessions/no-such-session-timers", { timeoutSec: 5 });
    expect(missing).toMatchObject({ status: 404, body: { error: { code: "NOT_FOUND" } } });

    const bad: Record<string, unknown>[] = [
      { timeoutSec: -1 },
      { timeoutSec: 1.5 },
      { timeoutSec: "10" },
      { idleTimeoutSec: -3 },
      { idleTimeoutSec: 2.5 },
      { detachedTimeoutSec: "x" },
      { detachedTimeoutSec: -1 },
      { nonsense: 1 },
      { label: 5 },
    ];
    for (const body of bad) {
      const res = await api.request("PATCH", `/v1/sessions/${s.id}`, body);
      expect({ body, status: res.status, code: res.body?.error?.code }).toEqual({
        body,
        status: 400,
        code: "INVALID_REQUEST",
      });
    }
    for (const body of [{ timeoutSec: -1 }, { idleTimeoutSec: 1.5 }, { detachedTimeoutSec: "3" }]) {
      const res = await api.request("POST", "/v1/sessions", { ...SLEEP, ...body });
      expect({ body, status: res.status, code: res.body?.error?.code }).toEqual({
        body,
        status: 400,
        code: "INVALID_REQUEST",
      });
    }
    // Nothing of that changed the session.
    expect(await api.get(s.id)).toMatchObject({
      status: "running",
      reason: null,
      timeoutSec: 0,
      idleTimeoutSec: 0,
      detachedTimeoutSec: 0,
      expiresAt: null,
    });
  });
});

describe("timers across an edge restart", () => {
  it("fires a timeoutSec set before the edge restarts after it comes back (reason timeout)", async () => {
    const runnerToken = secret();
    const key = "timers-restart-key";
    const persistTo = cleanup.tempFolder("ptybroker-timers-");
    const edgeOptions = { apiKeys: `timekeeper:${key}`, runnerToken, persistTo };
    const stack = await startSuiteStack(
      { ...edgeOptions, runners: [{ runnerId: "timers-restart-runner" }], waitForRunners: false },
      cleanup,
    );
    let edge = stack.edge;
    const [runner] = stack.runners;
    onTestFailed(() => {
      console.error(`---- edge ----\n${edge.output().slice(-4000)}\n---- runner ----\n${runner.output().slice(-4000)}`);
    });
    await until(async () => (await listRunners(edge.url, runnerToken)).length === 1, 30_000, "the runner");
    const own = new Api(edge.url, key);

    // Long enough that the timer is still ahead when the edge is back (it starts in ~6 s).
    const s = await own.create({ ...SLEEP, timeoutSec: 15 });
    expect(s).toMatchObject({ status: "running", timeoutSec: 15, reason: null });
    const deadline = ms(s.expiresAt);
    expect(Date.now()).toBeLessThan(deadline);

    // Same port, same storage, same secrets: a restart, as a deploy would be.
    const port = edge.port;
    await edge.stop();
    cleanup.edges.delete(edge);
    edge = cleanup.edge(await startEdge({ ...edgeOptions, port }));
    const back = await own.get(s.id);
    expect(back).toMatchObject({ timeoutSec: 15, expiresAt: s.expiresAt });

    const ended = await waitEnded(s.id, own, 60);
    expect(ended).toMatchObject({ id: s.id, ...endedBy("timeout") });
    expect(ms(ended.exitedAt)).toBeGreaterThanOrEqual(deadline);
    await own.destroy(s.id);
  });
});
