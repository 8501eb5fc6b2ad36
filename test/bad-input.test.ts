// Bad input answers with the right status and code, and changes nothing.
import { beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { Session, TenantEvent } from "../shared/session.js";
import { TENANTS } from "./global-setup.js";
import { Api, line, onSharedStack, tenantEvents } from "./harness.js";

const suite = onSharedStack({ clients: "close" });
const { url, api: acme, globex } = suite;
let s: Session;

const invalid = { error: { code: "INVALID_REQUEST", message: expect.any(String) } };

beforeAll(async () => {
  s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"], tags: ["bad-input"] });
});

async function unchanged(): Promise<void> {
  const now = await acme.get(s.id);
  expect(now).toMatchObject({ status: "running", cols: 80, rows: 24 });
  const list = await acme.request("GET", "/v1/sessions?tag=bad-input");
  expect(list.body.sessions.map((x: Session) => x.id)).toEqual([s.id]);
}

describe("bad input", () => {
  it("refuses malformed and out-of-range create requests with 400 and creates nothing", async () => {
    const before = (await acme.request("GET", "/v1/sessions?limit=1000")).body.sessions.length;
    const cases: [string | undefined, unknown][] = [
      ["{", undefined],
      ['{"cols": 80,', undefined],
      [undefined, { cols: 0 }],
      [undefined, { cols: 100000 }],
      [undefined, { rows: 1001 }],
      [undefined, { cols: "80" }],
      [undefined, { cols: 80.5 }],
      [undefined, { args: "ls" }],
      [undefined, { env: { "BAD NAME": "x" } }],
      [undefined, { id: "has space" }],
      [undefined, { id: "x".repeat(65) }],
      [undefined, { unknownField: true }],
      [undefined, ["not", "an", "object"]],
    ];
    const notJson = await fetch(`${url}/v1/sessions`, {
      method: "POST",
      headers: { authorization: `Bearer ${TENANTS.acme}`, "content-type": "application/x-www-form-urlencoded" },
      body: '{"command":"/bin/ls"}',
    });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toEqual(invalid);
    for (const [raw, body] of cases) {
      const res = await acme.request("POST", "/v1/sessions", body, raw);
      expect(res.status, `${raw ?? JSON.stringify(body)}`).toBe(400);
      expect(res.body).toEqual(invalid);
    }
    expect((await acme.request("GET", "/v1/sessions?limit=1000")).body.sessions.length).toBe(before);
  });

  it("answers 401 without a key or with a wrong one, and 404 for unknown sessions and routes", async () => {
    const anonymous = new Api(url, null);
    const wrong = new Api(url, "not-a-key");
    for (const api of [anonymous, wrong]) {
      for (const [method, path] of [
        ["GET", "/v1/sessions"],
        ["POST", "/v1/sessions"],
        ["GET", `/v1/sessions/${s.id}`],
        ["DELETE", `/v1/sessions/${s.id}`],
      ]) {
        const res = await api.request(method, path);
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ error: { code: "UNAUTHORIZED", message: expect.any(String) } });
      }
    }
    const missing = await acme.request("GET", "/v1/sessions/does-not-exist");
    expect(missing).toMatchObject({ status: 404, body: { error: { code: "NOT_FOUND" } } });
    expect((await acme.request("GET", "/v1/nothing-here")).status).toBe(404);
    expect((await acme.request("POST", "/v1/sessions/no-such/input", { data: "x" })).status).toBe(404);
    // The runner token is not an API key, and an API key opens no runner route: runner
    // routes refuse with plain HTTP, even for an upgrade.
    expect((await acme.request("GET", "/internal/runners")).status).toBe(401);
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(`${url.replace("http", "ws")}/internal/runners/connect`, {
        headers: { authorization: `Bearer ${TENANTS.acme}` },
      });
      ws.on("unexpected-response", (_req, res) => {
        resolve(res.statusCode ?? 0);
        ws.terminate();
      });
      ws.on("open", () => reject(new Error("an API key opened a runner socket")));
      ws.on("error", () => {});
    });
    expect(status).toBe(401);
    await unchanged();
  });

  it("hides another tenant's session: 404 on every route, absent from lists", async () => {
    const paths: [string, string, unknown?][] = [
      ["GET", `/v1/sessions/${s.id}`],
      ["POST", `/v1/sessions/${s.id}/input`, { data: "echo pwned\n" }],
      ["POST", `/v1/sessions/${s.id}/resize`, { cols: 100, rows: 40 }],
      ["POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGKILL" }],
      ["GET", `/v1/sessions/${s.id}/wait?timeoutSec=0`],
      ["DELETE", `/v1/sessions/${s.id}`],
    ];
    for (const [method, path, body] of paths) {
      const res = await globex.request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toEqual({ error: { code: "NOT_FOUND", message: expect.any(String) } });
    }
    const list = await globex.request("GET", "/v1/sessions");
    expect(list.body.sessions.map((x: Session) => x.id)).not.toContain(s.id);
    const socket = suite.connect(s.id, {}, TENANTS.globex);
    const rawSocket = suite.connect(s.id, { protocols: ["raw"] }, TENANTS.globex);
    expect(await socket.waitForClose()).toBe(4004);
    expect(socket.messages).toEqual([{ type: "error", code: "NOT_FOUND", message: expect.any(String) }]);
    expect(await rawSocket.waitForClose()).toBe(4004);
    expect(rawSocket.messages).toEqual([]);
    await unchanged();
  });

  it("refuses bad input, resize and signal bodies, and oversized input, leaving the session as it was", async () => {
    const base = `/v1/sessions/${s.id}`;
    const bad: [string, unknown][] = [
      ["input", {}],
      ["input", { data: 42 }],
      ["input", { data: "aGk=", encoding: "hex" }],
      ["input", { data: "not base64!", encoding: "base64" }],
      ["resize", { cols: 0, rows: 24 }],
      ["resize", { cols: 100000, rows: 24 }],
      ["resize", { cols: 80 }],
      ["signal", { signal: "SIGFOO" }],
      ["signal", {}],
    ];
    for (const [route, body] of bad) {
      const res = await acme.request("POST", `${base}/${route}`, body);
      expect(res.status, `${route} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body).toEqual(invalid);
    }
    expect((await acme.request("GET", `${base}/wait?timeoutSec=301`)).status).toBe(400);
    expect((await acme.request("GET", `${base}/wait?timeoutSec=soon`)).status).toBe(400);

    const tooBig = await acme.request("POST", `${base}/input`, { data: "x".repeat(65537) });
    expect(tooBig).toMatchObject({ status: 413, body: { error: { code: "PAYLOAD_TOO_LARGE" } } });
    const tooBig64 = await acme.request("POST", `${base}/input`, {
      data: Buffer.alloc(65537).toString("base64"),
      encoding: "base64",
    });
    expect(tooBig64.status).toBe(413);
    const hugeBody = await acme.request(
      "POST",
      `${base}/input`,
      undefined,
      JSON.stringify({ data: "y".repeat(1 << 20) }),
    );
    expect(hugeBody.status).toBe(413);
    await unchanged();

    // The session still works.
    const client = suite.connect(s.id);
    await client.opened;
    const command = Buffer.from("echo ok-$((2+3))\n");
    const ok = await acme.request("POST", `${base}/input`, { data: command.toString("base64"), encoding: "base64" });
    expect(ok).toMatchObject({ status: 202, body: { bytes: command.byteLength } });
    await client.waitForOutput(line("ok-5"));
  });

  it("answers garbage WebSocket frames with error messages and keeps the session working", async () => {
    const client = suite.connect(s.id);
    await client.opened;
    await client.waitForMessage((m) => m.type === "live", "live");
    const garbage: (string | Buffer)[] = [
      Buffer.from([]),
      Buffer.from([0x07, 1, 2, 3]),
      Buffer.from([0x01, 0, 0]), // an output frame from a client
      Buffer.from([0xff]),
      "not json",
      "{}",
      '{"type":"resize","cols":0,"rows":10}',
      '{"type":"resize","cols":"80","rows":24}',
      '{"type":"signal","signal":"SIGNOPE"}',
      '{"type":"launch-missiles"}',
      JSON.stringify({ type: "ping", pad: "x".repeat(5000) }),
      Buffer.concat([Buffer.from([0x02]), Buffer.alloc(65537, 0x61)]), // input over MAX_INPUT_BYTES
    ];
    for (const frame of garbage) client.socket.send(frame);
    await client.waitFor(
      () => client.messages.filter((m) => m.type === "error").length === garbage.length,
      "one error per garbage frame",
    );
    const errors = client.messages.filter((m) => m.type === "error");
    expect(errors.map((e) => e.code)).toEqual([
      ...Array(garbage.length - 1).fill("INVALID_REQUEST"),
      "PAYLOAD_TOO_LARGE",
    ]);

    client.control({ type: "ping" });
    await client.waitForMessage((m) => m.type === "pong", "pong");
    client.send("echo still-$((6*7))\n");
    await client.waitForOutput(line("still-42"));
    expect(client.closeCode).toBeUndefined();
    await unchanged();
  });

  it("refuses a duplicate id with 409 CONFLICT and leaves the first session alone", async () => {
    const res = await acme.request("POST", "/v1/sessions", { id: s.id });
    expect(res).toMatchObject({ status: 409, body: { error: { code: "CONFLICT" } } });
    await unchanged();
  });
});

describe("network and limits", () => {
  const bad: [Record<string, unknown>, string][] = [
    [{ network: "host" }, 'network: Invalid option: expected one of "none"|"egress"'],
    [{ network: 1 }, 'network: Invalid option: expected one of "none"|"egress"'],
    [{ network: null }, 'network: Invalid option: expected one of "none"|"egress"'],
    [{ limits: "big" }, "limits: Invalid input: expected object, received string"],
    [{ limits: [512] }, "limits: Invalid input: expected object, received array"],
    [{ limits: { memoryMiB: 512, disk: 5 } }, 'limits: Unrecognized key: "disk"'],
    [{ limits: { memoryMiB: "512" } }, "limits.memoryMiB: Invalid input: expected number, received string"],
    [{ limits: { memoryMiB: 31 } }, "limits.memoryMiB: at least 32 MiB"],
    [{ limits: { memoryMiB: 16385 } }, "limits.memoryMiB: at most 16384 MiB, the maximum"],
    [{ limits: { memoryMiB: 512.5 } }, "limits.memoryMiB: a whole number of MiB"],
    [{ limits: { pids: 7 } }, "limits.pids: at least 8"],
    [{ limits: { pids: 4097 } }, "limits.pids: at most 4096, the maximum"],
    [{ limits: { pids: 64.5 } }, "limits.pids: a whole number of processes"],
    [{ limits: { cpus: 0.04 } }, "limits.cpus: at least 0.05"],
    [{ limits: { cpus: 8.5 } }, "limits.cpus: at most 8, the maximum"],
    [{ limits: { cpus: "1" } }, "limits.cpus: Invalid input: expected number, received string"],
  ];

  it("refuses each bad network or limits on create and on exec with 400 naming the field, and creates nothing", async () => {
    const count = async () => (await acme.request("GET", "/v1/sessions?limit=1000")).body.sessions.length as number;
    const before = await count();
    for (const [fields, message] of bad) {
      const create = await acme.request("POST", "/v1/sessions", { command: "/bin/cat", pty: false, ...fields });
      expect(create, `create ${JSON.stringify(fields)}`).toMatchObject({ status: 400 });
      expect(create.body).toEqual({ error: { code: "INVALID_REQUEST", message } });
      const exec = await acme.request("POST", "/v1/exec", { command: "/bin/echo", args: ["ran"], ...fields });
      expect(exec, `exec ${JSON.stringify(fields)}`).toMatchObject({ status: 400 });
      expect(exec.body).toEqual({ error: { code: "INVALID_REQUEST", message } });
    }
    expect(await count()).toBe(before);
    await unchanged();
  });

  it("shows the network and limits asked for in the record before the start, and takes them on exec", async () => {
    const events = suite.cleanup.stream(tenantEvents(url, TENANTS.acme));
    await events.waitFor(() => events.status === 200, "the events stream open");
    const asked = { network: "none", limits: { memoryMiB: 256, cpus: 0.5 } };
    const s = await suite.session({ command: "/bin/cat", pty: false, tags: ["bad-input-sandbox"], ...asked });
    const createdOf = () => events.json<TenantEvent>("session.created").find((e) => e.session.id === s.id)?.session;
    await events.waitFor(() => createdOf() !== undefined, "session.created");
    // Placed, not yet started: the runner has said nothing, the record holds what was asked.
    const created = createdOf() as Session;
    expect(created.status).toBe("starting");
    expect({ sandbox: created.sandbox, network: created.network, limits: created.limits }).toEqual({ sandbox: null, ...asked });
    // Started: the network asked for, and these limits among what the runner applied.
    expect(s).toMatchObject({ status: "running", network: "none", limits: asked.limits });

    const ran = await acme.request("POST", "/v1/exec", { command: "/bin/echo", args: ["boxed"], network: "none", limits: { pids: 64 } });
    expect(ran).toMatchObject({ status: 200, body: { exitCode: 0, stdout: "boxed\n", stderr: "", reason: "exit" } });
    suite.purgeLater(ran.body.id);
    expect(await acme.get(ran.body.id)).toMatchObject({ status: "exited", network: "none", limits: { pids: 64 } });
  });
});
