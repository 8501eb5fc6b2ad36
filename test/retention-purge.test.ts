// Retention of ended sessions (docs/protocol.md §3, "Retention"; §4, "Timers"): with
// SESSION_RETAIN_SEC=4 an ended session is purged 4 s after it ended, as by DELETE ?purge=true:
// GET is 404, it leaves the list, its Redis stream is gone, `session.deleted` is reported, and
// its id can be created again as a new session whose output starts at 0 with none of the old
// bytes (and the old session's token does not reach it). This file's own edge, Redis and runner
// (logging to that Redis), stopped after it.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import type { Session, TenantEvent } from "../shared/session.js";
import type { Edge, ManagedProcess } from "../scripts/stack.js";
import {
  Api,
  type EventStreamClient,
  SuiteCleanup,
  TermClient,
  fetchOutput,
  startSuiteStack,
  tenantEvents,
  until,
} from "./harness.js";
import { type RedisServer, cli } from "./redis-server.js";

const TENANT = "purger";
const KEY = "retention-purge-key";
const RETAIN_SEC = 4;
const cleanup = new SuiteCleanup();
let edge: Edge;
let redis: RedisServer;
let runner: ManagedProcess;
let api: Api;
let events: EventStreamClient;

beforeAll(async () => {
  const stack = await startSuiteStack(
    {
      apiKeys: `${TENANT}:${KEY}`,
      vars: { SESSION_RETAIN_SEC: String(RETAIN_SEC) },
      redis: true,
      runners: [{ runnerId: "purge-runner" }],
    },
    cleanup,
  );
  ({ edge, redis } = stack);
  [runner] = stack.runners;
  api = new Api(edge.url, KEY);
});

/** The Redis streams of `sessionId` (one per incarnation): `ptyb:{tenant/id/incarnation}:out`. */
async function streamsOf(sessionId: string): Promise<string[]> {
  const out = await cli(redis.port, "--scan", "--pattern", `ptyb:{${TENANT}/${sessionId}/*`);
  return out.split("\n").filter((k) => k !== "");
}

function incarnationOf(key: string): string {
  const match = /^ptyb:\{[^/]+\/[^/]+\/([^}]+)\}:out$/.exec(key);
  if (!match) throw new Error(`not a session stream key: ${key}`);
  return match[1];
}

function ms(iso: string | null): number {
  if (iso === null) throw new Error("expected a time, got null");
  return Date.parse(iso);
}

async function listedIds(): Promise<string[]> {
  const res = await api.request<{ sessions: Session[] }>("GET", "/v1/sessions");
  expect(res.status).toBe(200);
  return res.body.sessions.map((s) => s.id);
}

function deletedEvent(id: string): (TenantEvent & { id: string | undefined }) | undefined {
  return events.json<TenantEvent>().find((e) => e.event === "session.deleted" && e.session.id === id);
}

describe("SESSION_RETAIN_SEC", () => {
  it("purges an ended session 4 s after it ended: 404, unlisted, its log gone, session.deleted, the id free", async () => {
    onTestFailed(() => {
      console.error(`---- edge ----\n${edge.output().slice(-4000)}\n---- runner ----\n${runner.output().slice(-4000)}`);
    });
    events = cleanup.stream(tenantEvents(edge.url, KEY));
    await events.waitFor(() => events.status !== 0, "the events stream to open");
    expect(events.status).toBe(200);

    // One ends by itself, one by DELETE (without purge): both are kept 4 s, then purged.
    const old = await api.create({ id: "reuse-me", command: "/bin/sh", args: ["-c", "echo old-marker-1234; read line"] });
    const killed = await api.create({ id: "deleted-one", command: "/bin/sleep", args: ["120"] });
    expect(old.status).toBe("running");
    await until(async () => (await api.get(old.id)).offset > 0, 10_000, "the old session's output");
    const oldOutput = await fetchOutput(api, old.id, 0);
    expect(oldOutput.bytes.toString("utf8")).toContain("old-marker-1234");
    const oldStreams: string[] = await until(
      async () => {
        const keys = await streamsOf(old.id);
        return keys.length > 0 ? keys : undefined;
      },
      10_000,
      "the old session's Redis stream",
    );
    expect(oldStreams).toHaveLength(1);
    const oldIncarnation = incarnationOf(oldStreams[0]);
    const viewer = await api.request("POST", `/v1/sessions/${old.id}/tokens`, { role: "viewer" });
    expect(viewer.status).toBe(201);

    await api.input(old.id, "bye\n");
    const ended = (await api.request<Session>("GET", `/v1/sessions/${old.id}/wait?timeoutSec=20`)).body;
    expect(ended).toMatchObject({ status: "exited", exitCode: 0, reason: "exit" });
    const deleted = await api.request<Session>("DELETE", `/v1/sessions/${killed.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ status: "exited", signal: "SIGHUP", reason: "deleted" });

    // Kept for now (both ended well under 4 s ago).
    expect((await api.request("GET", `/v1/sessions/${old.id}`)).status).toBe(200);
    expect(await listedIds()).toEqual(expect.arrayContaining([old.id, killed.id]));

    for (const [s, endedAt] of [
      [old, ms(ended.exitedAt)],
      [killed, ms(deleted.body.exitedAt)],
    ] as const) {
      await until(async () => (await api.request("GET", `/v1/sessions/${s.id}`)).status === 404, 20_000, `${s.id} purged`);
      // Seen gone no earlier than 4 s after it ended.
      expect(Date.now()).toBeGreaterThanOrEqual(endedAt + RETAIN_SEC * 1000);
      const gone = await api.request("GET", `/v1/sessions/${s.id}`);
      expect(gone).toMatchObject({ status: 404, body: { error: { code: "NOT_FOUND" } } });
      expect((await api.request("GET", `/v1/sessions/${s.id}/output?from=0`)).status).toBe(404);
      await events.waitFor(() => deletedEvent(s.id) !== undefined, `session.deleted for ${s.id}`);
      expect(deletedEvent(s.id)?.session).toMatchObject({ id: s.id, status: "exited" });
    }
    const listed = await listedIds();
    expect(listed).not.toContain(old.id);
    expect(listed).not.toContain(killed.id);
    // Nothing it stored outlives it: its Redis stream is removed too.
    await until(async () => (await streamsOf(old.id)).length === 0, 10_000, "the old Redis stream to be removed");
    await until(async () => (await streamsOf(killed.id)).length === 0, 10_000, "the deleted session's Redis stream to be removed");

    // The id again: a new session, its output from 0, none of the old bytes.
    const again = await api.create({ id: old.id, command: "/bin/sh", args: ["-c", "echo new-marker-5678; read line"] });
    expect(again).toMatchObject({ id: old.id, status: "running", reason: null, exitedAt: null, exitCode: null });
    expect(ms(again.createdAt)).toBeGreaterThan(ms(old.createdAt));
    const client = cleanup.client(new TermClient(edge.url, old.id, KEY, { query: "from=0" }));
    await client.waitForOutput("new-marker-5678");
    expect(client.messages.filter((m) => m.type === "gap")).toEqual([]);
    expect(client.startOffset).toBe(0);
    expect(client.text).not.toContain("old-marker-1234");
    const fresh = await fetchOutput(api, old.id, 0);
    expect(fresh.from).toBe(0);
    expect(fresh.bytes.toString("utf8")).toContain("new-marker-5678");
    expect(fresh.bytes.toString("utf8")).not.toContain("old-marker-1234");
    const newStreams = await streamsOf(old.id);
    expect(newStreams).toHaveLength(1);
    expect(incarnationOf(newStreams[0])).not.toBe(oldIncarnation);
    // The old session's token names the old session, not the id.
    expect((await new Api(edge.url, viewer.body.token).request("GET", `/v1/sessions/${old.id}`)).status).toBe(401);
    // And the events say so: created again after deleted.
    await events.waitFor(
      () => events.json<TenantEvent>().some((e) => e.event === "session.created" && e.session.createdAt === again.createdAt),
      "session.created for the new session",
    );
    await api.destroy(old.id);
  });
});
