// The sandbox a session got, as the edge records it (docs/protocol.md §4, §6, §7), inside workerd:
// the test plays a runner over the real control socket and session link. It registers saying how
// it contains sessions (`GET /internal/runners` shows it), is sent the network and limits a create
// asked for, and reports in `started` what it applied, which replaces what was asked in the
// record; an `exited` with `reason: "oom"` ends the session with that reason.
import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { PoolMessage } from "../shared/protocol.js";
import type { Session } from "../shared/session.js";
import { type Env, sessionStub } from "./env.js";
import type { Stored } from "./session/session-record.js";

const testEnv = env as unknown as Env;
const worker = (exports as unknown as { default: { fetch(req: Request): Promise<Response> } }).default;
const RUNNER_ID = "fake-runner";

type Message = { type: string } & Record<string, unknown>;

/** A socket the test holds as a runner would, and the JSON messages it has received. */
interface Peer {
  ws: WebSocket;
  received: Message[];
  next<T extends Message>(type: string): Promise<T>;
  send(message: unknown): void;
}

const open: WebSocket[] = [];

// Each test's runner is gone from the pool before the next one registers (or is placed on).
afterEach(async () => {
  for (const ws of open.splice(0)) if (ws.readyState === WebSocket.OPEN) ws.close(1000, "test over");
  await vi.waitFor(async () => expect(await runners()).toEqual([]), { timeout: 10_000 });
});

/** `GET /internal/runners`, as a runner's token sees it. */
async function runners(): Promise<unknown[]> {
  const res = await worker.fetch(new Request("http://edge/internal/runners", { headers: { authorization: "Bearer runner-secret" } }));
  expect(res.status).toBe(200);
  return ((await res.json()) as { runners: unknown[] }).runners;
}

async function dial(path: string, headers: Record<string, string> = {}): Promise<Peer> {
  const res = await worker.fetch(
    new Request(`http://edge${path}`, {
      headers: { upgrade: "websocket", authorization: "Bearer runner-secret", "x-runner-id": RUNNER_ID, ...headers },
    }),
  );
  expect(res.status).toBe(101);
  const ws = res.webSocket as WebSocket;
  ws.accept();
  open.push(ws);
  const received: Message[] = [];
  ws.addEventListener("message", (event) => {
    if (typeof event.data === "string") received.push(JSON.parse(event.data) as Message);
  });
  return {
    ws,
    received,
    next: <T extends Message>(type: string) =>
      vi.waitFor(
        () => {
          const found = received.find((m) => m.type === type);
          if (!found) throw new Error(`no ${type} yet; received ${JSON.stringify(received)}`);
          return found as T;
        },
        { timeout: 10_000 },
      ),
    send: (message) => ws.send(JSON.stringify(message)),
  };
}

function call(method: string, path: string, body?: unknown): Promise<Response> {
  const headers = new Headers({ authorization: "Bearer acme-key" });
  if (body !== undefined) headers.set("content-type", "application/json");
  return worker.fetch(new Request(`http://edge${path}`, { method, headers, body: body === undefined ? null : JSON.stringify(body) }));
}

async function session(id: string): Promise<Session> {
  const res = await call("GET", `/v1/sessions/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Session;
}

const sandboxOf = (s: Session) => ({ sandbox: s.sandbox, network: s.network, limits: s.limits });

type Spawn = Extract<PoolMessage, { type: "spawn" }>;

/** A registered runner, as the pool lists it. */
async function registeredRunner(register: Record<string, unknown>): Promise<Peer> {
  const control = await dial("/internal/runners/connect");
  control.send({ type: "register", runnerId: RUNNER_ID, capacity: 4, sessions: [], ...register });
  await vi.waitFor(async () => expect(await runners()).toHaveLength(1), { timeout: 10_000 });
  return control;
}

/** Creates `body` (not awaited: it waits for `started`), takes the spawn order and opens the session's link. */
async function placed(control: Peer, body: Record<string, unknown>) {
  const created = call("POST", "/v1/sessions", body);
  const spawn = await control.next<Spawn & Message>("spawn");
  control.received.splice(control.received.indexOf(spawn), 1);
  const link = await dial(`/internal/sessions/acme/${spawn.sessionId}/link`, { "x-link-token": spawn.linkToken });
  await link.next("resume");
  return { created, spawn, link };
}

describe("a session's sandbox, network and limits", () => {
  it("lists how each runner contains sessions, as its register said", async () => {
    await registeredRunner({ sandbox: "bwrap" });
    expect(await runners()).toEqual([{ runnerId: RUNNER_ID, capacity: 4, sessions: 0, draining: false, sandbox: "bwrap" }]);
  });

  it("shows what was asked until `started`, then what the runner applied, stored with the record; `oom` ends it", async () => {
    const control = await registeredRunner({ sandbox: "bwrap" });
    const { created, spawn, link } = await placed(control, { id: "boxed", network: "none", limits: { memoryMiB: 256 } });
    // The spawn order carries exactly what was asked.
    expect(spawn.spec).toEqual({
      command: "/bin/bash",
      args: ["-l"],
      cwd: null,
      env: {},
      cols: 80,
      rows: 24,
      network: "none",
      limits: { memoryMiB: 256 },
    });
    // Before `started`: no sandbox yet, the network and the partial limits as asked.
    const starting = await session("boxed");
    expect(starting.status).toBe("starting");
    expect(sandboxOf(starting)).toEqual({ sandbox: null, network: "none", limits: { memoryMiB: 256 } });

    const applied = { sandbox: "bwrap", network: "none", limits: { memoryMiB: 256, pids: 512, cpus: 1 } };
    link.send({ type: "started", pid: 4242, ...applied });
    const answer = await created;
    expect(answer.status).toBe(201);
    const running = (await answer.json()) as Session;
    expect(running).toMatchObject({ id: "boxed", status: "running", pid: 4242 });
    expect(sandboxOf(running)).toEqual(applied);
    expect(sandboxOf(await session("boxed"))).toEqual(applied);
    // In the object's storage, which a restarted object reads its record from.
    const stored = await runInDurableObject(sessionStub(testEnv, "acme", "boxed"), (_instance, state) =>
      state.storage.kv.get<Stored>("session"),
    );
    expect(stored && sandboxOf(stored.record as Session)).toEqual(applied);

    // The kernel killed it for memory: the runner says so, and that is the session's reason.
    link.send({ type: "exited", exitCode: null, signal: "SIGKILL", reason: "oom" });
    await vi.waitFor(async () => expect((await session("boxed")).status).toBe("exited"), { timeout: 10_000 });
    const ended = await session("boxed");
    expect(ended).toMatchObject({ status: "exited", exitCode: null, signal: "SIGKILL", reason: "oom" });
    expect(sandboxOf(ended)).toEqual(applied);
  });

  it("keeps what was asked when the runner's `started` does not say, and null when nothing was asked", async () => {
    const control = await registeredRunner({});
    expect(await runners()).toEqual([{ runnerId: RUNNER_ID, capacity: 4, sessions: 0, draining: false, sandbox: null }]);

    const asked = await placed(control, { id: "asked", pty: false, command: "/bin/cat", network: "egress", limits: { cpus: 0.5, pids: 32 } });
    expect(asked.spawn.spec).toMatchObject({ network: "egress", limits: { cpus: 0.5, pids: 32 } });
    asked.link.send({ type: "started", pid: 7 });
    expect(sandboxOf((await (await asked.created).json()) as Session)).toEqual({
      sandbox: null,
      network: "egress",
      limits: { cpus: 0.5, pids: 32 },
    });
    asked.link.send({ type: "exited", exitCode: 0, signal: null });
    await vi.waitFor(async () => expect((await session("asked")).reason).toBe("exit"), { timeout: 10_000 });

    const plain = await placed(control, { id: "plain" });
    expect(plain.spawn.spec).not.toHaveProperty("network");
    expect(plain.spawn.spec).not.toHaveProperty("limits");
    expect(sandboxOf(await session("plain"))).toEqual({ sandbox: null, network: null, limits: null });
    plain.link.send({ type: "started", pid: 8 });
    expect(sandboxOf((await (await plain.created).json()) as Session)).toEqual({ sandbox: null, network: null, limits: null });
    plain.link.send({ type: "exited", exitCode: 0, signal: null });
    await vi.waitFor(async () => expect((await session("plain")).status).toBe("exited"), { timeout: 10_000 });
  });
});
