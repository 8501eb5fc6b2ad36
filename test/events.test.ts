// The tenant's lifecycle events (docs/protocol.md §3, "Events"), `GET /v1/events`: one session's
// life from create to purge as `session.created`, `session.updated` (running), `session.exited`,
// `session.deleted`, with `id:` one apart; another tenant sees none of them; a resume with
// Last-Event-ID or `?after=` gets exactly the later events, once; keep-alive comments
// (SSE_KEEPALIVE_MS made short on this file's own edge) on the events stream and on a session's
// stream; API key only.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import type { Session, TenantEvent } from "../shared/session.js";
import type { Edge } from "../scripts/stack.js";
import { Api, EventStreamClient, SuiteCleanup, startSuiteStack, tenantEvents } from "./harness.js";

const A = { tenant: "eventful", key: "events-key-a" };
const B = { tenant: "bystander", key: "events-key-b" };
const KEEPALIVE_MS = 1000;
const cleanup = new SuiteCleanup();
let edge: Edge;
let apiA: Api;
let apiB: Api;
/** Tenant A's stream from before its first event, kept open for the whole file. */
let all: EventStreamClient;
let bStream: EventStreamClient;

type Ev = TenantEvent & { id: string | undefined; event: string };

beforeAll(async () => {
  ({ edge } = await startSuiteStack(
    {
      apiKeys: `${A.tenant}:${A.key},${B.tenant}:${B.key}`,
      vars: { SSE_KEEPALIVE_MS: String(KEEPALIVE_MS) },
      runners: [{ runnerId: "events-runner" }],
    },
    cleanup,
  ));
  apiA = new Api(edge.url, A.key);
  apiB = new Api(edge.url, B.key);
});

function open(key: string, options: { lastEventId?: string; after?: string } = {}): EventStreamClient {
  return cleanup.stream(tenantEvents(edge.url, key, options));
}

function dumpOnFailure(): void {
  onTestFailed(() => {
    console.error(`---- edge ----\n${edge.output().slice(-4000)}`);
    console.error(`---- events of ${A.tenant} ----\n${all?.events.map((e) => `${e.id} ${e.event} ${e.data}`).join("\n")}`);
  });
}

function of(stream: EventStreamClient, sessionId: string): Ev[] {
  return stream.json<TenantEvent>().filter((e) => e.session?.id === sessionId) as Ev[];
}

function has(stream: EventStreamClient, type: string, sessionId: string): boolean {
  return stream.json<TenantEvent>().some((e) => e.event === type && e.session?.id === sessionId);
}

/** Every event's id, as numbers. */
function ids(stream: EventStreamClient): number[] {
  return stream.events.map((e) => Number(e.id));
}

/** The events as they can be compared across streams: id, name and parsed data. */
function comparable(events: { id: string | undefined; event: string; data: string }[]) {
  return events.map((e) => ({ id: e.id, event: e.event, data: JSON.parse(e.data) as unknown }));
}

describe("GET /v1/events", () => {
  it("reports one session's life in order: created, updated (running), exited, deleted, ids one apart", async () => {
    dumpOnFailure();
    all = open(A.key);
    bStream = open(B.key);
    await all.waitFor(() => all.status !== 0, "tenant A's stream to open");
    await bStream.waitFor(() => bStream.status !== 0, "tenant B's stream to open");
    expect(all.status).toBe(200);
    expect(all.contentType).toMatch(/^text\/event-stream/);
    expect(bStream.status).toBe(200);

    const s = await apiA.create({ id: "ev-one", command: "/bin/sh", args: ["-c", "read line; exit 3"] });
    expect(s.status).toBe("running");
    await apiA.input(s.id, "go\n");
    const waited = await apiA.request<Session>("GET", `/v1/sessions/${s.id}/wait?timeoutSec=20`);
    expect(waited.body).toMatchObject({ status: "exited", exitCode: 3, signal: null, reason: "exit" });
    const purged = await apiA.request("DELETE", `/v1/sessions/${s.id}?purge=true`);
    expect(purged.status).toBe(200);

    await all.waitFor(() => has(all, "session.deleted", s.id), "session.deleted of ev-one");
    const events = of(all, s.id);
    expect(events.map((e) => e.event)).toEqual(["session.created", "session.updated", "session.exited", "session.deleted"]);
    for (const e of events) {
      // `data.type` is the event's name; `at` an ISO time.
      expect(e.type).toBe(e.event);
      expect(new Date(e.at).toISOString()).toBe(e.at);
      expect(e.session.id).toBe(s.id);
    }
    expect(events[0].session).toMatchObject({ command: "/bin/sh", reason: null, exitedAt: null });
    expect(events[1].session).toMatchObject({ status: "running", reason: null, pid: s.pid });
    expect(events[2].session).toMatchObject({ status: "exited", exitCode: 3, signal: null, reason: "exit" });
    expect(events[3].session).toMatchObject({ status: "exited", exitCode: 3, reason: "exit" });
    const times = events.map((e) => Date.parse(e.at));
    expect([...times].sort((x, y) => x - y)).toEqual(times);

    // Nothing else happened in this tenant: the stream is exactly these, ids one apart.
    expect(all.events.map((e) => e.event)).toEqual(events.map((e) => e.event));
    const seq = ids(all);
    expect(seq.every((n) => Number.isInteger(n) && n >= 0)).toBe(true);
    expect(seq).toEqual(seq.map((_, i) => seq[0] + i));
  });

  it("never shows one tenant's events to another", async () => {
    dumpOnFailure();
    // A later event of B's own proves B's stream has caught up past everything A did before.
    const mine = await apiB.create({ id: "bystander-one", command: "/bin/sleep", args: ["60"] });
    await bStream.waitFor(() => has(bStream, "session.updated", mine.id), "B's own session.updated");
    expect(bStream.events.length).toBeGreaterThan(0);
    expect(new Set(bStream.json<TenantEvent>().map((e) => e.session.id))).toEqual(new Set([mine.id]));
    expect(bStream.events.map((e) => e.event).slice(0, 2)).toEqual(["session.created", "session.updated"]);
    const seq = ids(bStream);
    expect(seq).toEqual(seq.map((_, i) => seq[0] + i));
    // And A's stream got nothing of B's.
    expect(all.json<TenantEvent>().some((e) => e.session.id === mine.id)).toBe(false);
    await apiB.destroy(mine.id);
  });

  it("resumes after Last-Event-ID and after ?after= with exactly the later events, in order, once", async () => {
    dumpOnFailure();
    const created = all.events.find((e) => e.event === "session.created");
    expect(created?.id).toBeDefined();
    const from = created?.id as string;
    const expected = all.events.slice(all.events.indexOf(created as (typeof all.events)[number]) + 1);
    expect(expected.map((e) => e.event)).toEqual(["session.updated", "session.exited", "session.deleted"]);

    const byHeader = open(A.key, { lastEventId: from });
    const byQuery = open(A.key, { after: from });
    for (const resumed of [byHeader, byQuery]) {
      await resumed.waitFor(() => resumed.events.length >= expected.length, "the events after the resume point");
      expect(resumed.status).toBe(200);
      expect(comparable(resumed.events)).toEqual(comparable(expected));
    }

    // A new event: the next thing each resumed stream gets, with the next id; nothing came twice.
    const lastId = Number(all.events.at(-1)?.id);
    const next = await apiA.create({ id: "ev-two", command: "/bin/sleep", args: ["60"] });
    await all.waitFor(() => has(all, "session.updated", next.id), "ev-two's session.updated");
    const fresh = all.events.filter((e) => Number(e.id) > lastId);
    expect(fresh.map((e) => e.event)).toEqual(["session.created", "session.updated"]);
    expect(fresh.map((e) => Number(e.id))).toEqual([lastId + 1, lastId + 2]);
    for (const resumed of [byHeader, byQuery]) {
      await resumed.waitFor(() => has(resumed, "session.updated", next.id), "ev-two on the resumed stream");
      expect(comparable(resumed.events)).toEqual(comparable([...expected, ...fresh]));
    }

    // Resuming from the newest id gives nothing old: the first event is the next one.
    const newest = String(all.events.at(-1)?.id);
    const atEnd = open(A.key, { lastEventId: newest });
    await atEnd.waitFor(() => atEnd.status !== 0, "the stream to open");
    const purged = await apiA.request("DELETE", `/v1/sessions/${next.id}?purge=true`);
    expect(purged.status).toBe(200);
    await atEnd.waitFor(() => has(atEnd, "session.deleted", next.id), "ev-two's session.deleted");
    expect(atEnd.events.map((e) => e.event)).toEqual(["session.exited", "session.deleted"]);
    expect(atEnd.events.map((e) => Number(e.id))).toEqual([Number(newest) + 1, Number(newest) + 2]);
    expect(comparable(atEnd.events)).toEqual(comparable(all.events.filter((e) => Number(e.id) > Number(newest))));
  });

  it("sends keep-alive comments on a quiet events stream", async () => {
    dumpOnFailure();
    const quiet = open(A.key, { lastEventId: String(all.events.at(-1)?.id) });
    await quiet.waitFor(() => quiet.comments.length >= 2, "two keep-alive comments", 10 * KEEPALIVE_MS);
    expect(quiet.status).toBe(200);
    expect(quiet.events).toEqual([]);
    quiet.close();
  });

  it("sends keep-alive comments on a quiet session stream", async () => {
    dumpOnFailure();
    const s = await apiA.create({ id: "ev-quiet", command: "/bin/sleep", args: ["60"] });
    const stream = cleanup.stream(new EventStreamClient(edge.url, `/v1/sessions/${s.id}/stream`, A.key));
    await stream.waitFor(() => stream.comments.length >= 2, "two keep-alive comments on the session stream", 10 * KEEPALIVE_MS);
    expect(stream.status).toBe(200);
    // A sleeping process prints nothing: no data events, only comments.
    expect(stream.events.filter((e) => e.event === "data")).toEqual([]);
    stream.close();
    await apiA.destroy(s.id);
  });

  it("belongs to the API key: a session token gets 403, no credential 401", async () => {
    const s = await apiA.create({ id: "ev-tokens", command: "/bin/sleep", args: ["60"] });
    for (const role of ["viewer", "writer"] as const) {
      const minted = await apiA.request("POST", `/v1/sessions/${s.id}/tokens`, { role });
      expect(minted.status).toBe(201);
      const res = await new Api(edge.url, minted.body.token).request("GET", "/v1/events");
      expect(res).toMatchObject({ status: 403, body: { error: { code: "FORBIDDEN", message: expect.any(String) } } });
    }
    const anonymous = await new Api(edge.url, null).request("GET", "/v1/events");
    expect(anonymous).toMatchObject({ status: 401, body: { error: { code: "UNAUTHORIZED" } } });
    await apiA.destroy(s.id);
  });
});
