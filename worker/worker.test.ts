// The Worker and its Durable Objects inside workerd (vitest-pool-workers), without runners:
// auth, validation, the error shape, placement with no runner, and the tenant index.
import { env, exports } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Session, SessionStatus } from "../shared/session.js";
import type { Env } from "./env.js";

const testEnv = env as unknown as Env;
const worker = (exports as unknown as { default: { fetch(req: Request): Promise<Response> } }).default;

function call(path: string, init: RequestInit & { key?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (init.key) headers.set("authorization", `Bearer ${init.key}`);
  if (init.body) headers.set("content-type", "application/json");
  return worker.fetch(new Request(`http://edge${path}`, { ...init, headers }));
}

describe("edge Worker in workerd", () => {
  it("answers /healthz without auth", async () => {
    const res = await call("/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });

  it("renders 401 with the error shape, and accepts plain and sha256-configured keys", async () => {
    const none = await call("/v1/sessions");
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: { code: "UNAUTHORIZED", message: expect.any(String) } });
    expect((await call("/v1/sessions", { key: "acme-key" })).status).toBe(200);
    expect((await call("/v1/sessions", { key: "globex-key" })).status).toBe(200);
    expect((await call("/v1/sessions", { key: "acme-key-" })).status).toBe(401);
    // The runner token is not an API key.
    expect((await call("/v1/sessions", { key: "runner-secret" })).status).toBe(401);
  });

  it("answers 503 NO_RUNNER at once when no runner is connected, leaving nothing behind", async () => {
    const res = await call("/v1/sessions", { method: "POST", key: "acme-key", body: JSON.stringify({ id: "lonely" }) });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: { code: "NO_RUNNER", message: expect.any(String) } });
    expect(await (await call("/v1/sessions", { key: "acme-key" })).json()).toEqual({ sessions: [], nextCursor: null });
    expect((await call("/v1/sessions/lonely", { key: "acme-key" })).status).toBe(404);
  });

  it("validates bodies with zod before touching any object", async () => {
    const res = await call("/v1/sessions", { method: "POST", key: "acme-key", body: JSON.stringify({ rows: 0 }) });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("INVALID_REQUEST");
    expect(body.error.message).toMatch(/^rows: /);
  });

  it("keeps the tenant index: unique ids, quota on sessions not yet ended, creation order", async () => {
    const tenant = testEnv.TENANT.get(testEnv.TENANT.idFromName("acme-index"));
    expect(await tenant.reserve({ tenant: "acme-index", id: "a", createdAt: "2026-01-01T00:00:00.000Z", tags: ["x"], maxActive: 2 })).toEqual({ ok: true, max: {} });
    expect(await tenant.reserve({ tenant: "acme-index", id: "a", createdAt: "2026-01-01T00:00:01.000Z", tags: [], maxActive: 2 })).toMatchObject({
      failure: { code: "CONFLICT" },
    });
    expect(await tenant.reserve({ tenant: "acme-index", id: "b", createdAt: "2026-01-01T00:00:02.000Z", tags: [], maxActive: 2 })).toEqual({ ok: true, max: {} });
    expect(await tenant.reserve({ tenant: "acme-index", id: "c", createdAt: "2026-01-01T00:00:03.000Z", tags: [], maxActive: 2 })).toMatchObject({
      failure: { code: "QUOTA_EXCEEDED", retryAfterSec: 5 },
    });
    const session = (id: string, status: SessionStatus, tags: string[] = []): Session => ({
      ...({} as Session),
      id,
      status,
      tags,
    });
    await tenant.record(session("a", "running", ["x"]), null);
    await tenant.record(session("a", "exited", ["x"]), "session.exited");
    await tenant.record(session("a", "running", ["x"]), null); // never backwards
    expect(await tenant.reserve({ tenant: "acme-index", id: "c", createdAt: "2026-01-01T00:00:03.000Z", tags: [], maxActive: 2 })).toEqual({ ok: true, max: {} });
    await tenant.record(session("b", "running"), null);
    await tenant.record(session("c", "starting"), null);
    const ids = async (tag: string | null, status: SessionStatus | null = null) =>
      (await tenant.list({ tag, status, limit: 100, after: null })).sessions.map((s) => `${s.id}:${s.status}`);
    expect(await ids(null)).toEqual(["a:exited", "b:running", "c:starting"]);
    expect(await ids("x")).toEqual(["a:exited"]);
    expect(await ids(null, "running")).toEqual(["b:running"]);
    // Pages of two: a cursor continues after the last one given, null at the end.
    const first = await tenant.list({ tag: null, status: null, limit: 2, after: null });
    expect(first.sessions.map((s) => s.id)).toEqual(["a", "b"]);
    const second = await tenant.list({ tag: null, status: null, limit: 2, after: Number(first.nextCursor) });
    expect(second).toMatchObject({ sessions: [{ id: "c" }], nextCursor: null });
    await tenant.forget("b", null);
    expect(await ids(null)).toEqual(["a:exited", "c:starting"]);
  });

  it("frees an index row whose create was cut short, by DELETE or by the sweep, and with it the id and quota slot", async () => {
    // Two rows reserved by creates that never reached their session object (a restart mid-create).
    const tenant = testEnv.TENANT.get(testEnv.TENANT.idFromName("globex"));
    const reserve = (id: string) =>
      tenant.reserve({ tenant: "globex", id, createdAt: "2026-01-01T00:00:00.000Z", tags: [], maxActive: 2 });
    expect(await reserve("cut-1")).toEqual({ ok: true, max: {} });
    expect(await reserve("cut-2")).toEqual({ ok: true, max: {} });
    const create = (id: string) =>
      call("/v1/sessions", { method: "POST", key: "globex-key", body: JSON.stringify({ id }) });
    expect((await create("next")).status).toBe(429);
    expect((await create("cut-1")).status).toBe(409);
    // DELETE of an id that has only an index row removes the row.
    expect((await call("/v1/sessions/cut-1?purge=true", { method: "DELETE", key: "globex-key" })).status).toBe(404);
    // The sweep (one part of the tenant's alarm, due a minute after the reserve: its due time is
    // moved back here rather than waited for) asks cut-2's session object, finds none, frees the row.
    expect(await runInDurableObject(tenant, (_object, state) => state.storage.kv.get<number>("sweepAt"))).toBeGreaterThan(Date.now());
    await runInDurableObject(tenant, (_object, state) => state.storage.kv.put("sweepAt", Date.now() - 1));
    expect(await runDurableObjectAlarm(tenant)).toBe(true);
    expect((await tenant.list({ tag: null, status: null, limit: 10, after: null })).sessions).toEqual([]);
    // The slots and the ids are free again: creates now get as far as placement (no runner here).
    expect((await create("cut-1")).status).toBe(503);
    expect((await create("cut-2")).status).toBe(503);
  });

  it("keeps the newest events for resuming and says `gap` for ids it no longer has", async () => {
    const tenant = testEnv.TENANT.get(testEnv.TENANT.idFromName("acme-events"));
    const session = { ...({} as Session), id: "e", status: "exited" as SessionStatus };
    for (let i = 0; i < 2005; i++) await tenant.forget("e", session);
    /** The stream's text up to and including the event with id `last`. */
    const readUntil = async (after: string | null, last: number): Promise<string> => {
      const headers = new Headers(after === null ? {} : { "x-ptyb-after": after });
      const res = await tenant.fetch(new Request("https://tenant/events", { headers }));
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let text = "";
      while (!text.includes(`id: ${last}\n`)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before id ${last}`);
        text += decoder.decode(value, { stream: true });
      }
      await reader.cancel();
      return text;
    };
    const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    // 2,000 kept: ids 6..2005. A resume from 1 hears that 2..5 are gone, then gets 6..2005 in order.
    const fromOne = await readUntil("1", 2005);
    expect(fromOne.indexOf('event: gap\ndata: {"from":2,"to":6}\n\n')).toBeGreaterThanOrEqual(0);
    expect(fromOne.indexOf("event: gap")).toBeLessThan(fromOne.indexOf("id: 6\n"));
    expect(ids(fromOne)).toEqual(Array.from({ length: 2000 }, (_, i) => i + 6));
    // From 5 nothing is missing: no gap, the same events.
    const fromFive = await readUntil("5", 2005);
    expect(fromFive).not.toContain("event: gap");
    expect(ids(fromFive)).toEqual(ids(fromOne));
    // From the newest id: nothing but what comes next.
    const live = tenant.fetch(new Request("https://tenant/events", { headers: { "x-ptyb-after": "2005" } }));
    const res = await live;
    await tenant.forget("e", session);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    while (!text.includes("id: 2006\n")) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    expect(ids(text)).toEqual([2006]);
    expect(text).toContain('"type":"session.deleted"');
  });

  it("answers a route's path under a method it does not take with 405 and Allow, an unknown path with 404", async () => {
    const answer = async (res: Response) => ({ status: res.status, allow: res.headers.get("allow"), body: await res.json() });
    const refused = (method: string, allow: string) => ({
      status: 405,
      allow,
      body: { error: { code: "METHOD_NOT_ALLOWED", message: `${method} is not allowed here; allowed: ${allow}` } },
    });
    expect(await answer(await call("/v1/sessions/s1/input", { key: "acme-key" }))).toEqual(refused("GET", "POST"));
    expect(await answer(await call("/v1/sessions", { method: "PUT", key: "acme-key" }))).toEqual(refused("PUT", "GET, HEAD, POST"));
    expect(await answer(await call("/v1/sessions/s1", { method: "POST", key: "acme-key", body: "{}" }))).toEqual(
      refused("POST", "GET, HEAD, PATCH, DELETE"),
    );
    expect(await answer(await call("/v1/exec", { key: "acme-key" }))).toEqual(refused("GET", "POST"));
    expect(await answer(await call("/healthz", { method: "DELETE" }))).toEqual(refused("DELETE", "GET, HEAD"));
    expect(await answer(await call("/v1/sessions/s1/nothing", { key: "acme-key" }))).toEqual({
      status: 404,
      allow: null,
      body: { error: { code: "NOT_FOUND", message: "no such route" } },
    });
    // Authentication still comes first, and the refused POST created nothing.
    expect((await call("/v1/sessions/s1/input")).status).toBe(401);
    expect((await call("/v1/sessions/s1", { key: "acme-key" })).status).toBe(404);
  });

  it("refuses runner sockets without RUNNER_TOKEN with plain HTTP 401", async () => {
    const res = await call("/internal/runners/connect", { key: "acme-key", headers: { upgrade: "websocket" } });
    expect(res.status).toBe(401);
    const ok = await call("/internal/runners", { key: "runner-secret" });
    expect(await ok.json()).toEqual({ runners: [] });
  });
});
