// The agent calls' requests and answers, against a scripted fetch: bodies, headers, errors and
// retries. The real edge answers them in test/ (end to end).
import { describe, expect, it } from "vitest";
import { AgentCalls, expectBody } from "./agent.js";
import { PtyBrokerError } from "./errors.js";
import { Http } from "./http.js";

interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
  dispatcher: unknown;
}

function scripted(answer: (call: Call, index: number) => Response | Promise<Response>) {
  const calls: Call[] = [];
  const fetchImpl: typeof fetch = async (input, init) => {
    const call = {
      method: init?.method ?? "GET",
      url: String(input),
      headers: (init?.headers ?? {}) as Record<string, string>,
      body: init?.body ? JSON.parse(String(init.body)) : undefined,
      dispatcher: (init as { dispatcher?: unknown } | undefined)?.dispatcher,
    };
    calls.push(call);
    return answer(call, calls.length - 1);
  };
  const agent = new AgentCalls(new Http("http://broker.test/", { apiKey: "k" }, fetchImpl), "my session");
  return { agent, calls };
}

const json = (value: unknown, status = 200) =>
  new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } });

describe("expectBody", () => {
  it("a string is literal unless literal: false", () => {
    expect(expectBody("$ ")).toEqual({ pattern: "$ ", literal: true });
    expect(expectBody("v(\\d+)", { literal: false, flags: "i", from: 7, timeoutSec: 5 })).toEqual({
      pattern: "v(\\d+)",
      literal: false,
      flags: "i",
      from: 7,
      timeoutSec: 5,
    });
  });

  it("a RegExp sends its source and the flags the server takes; g, y and d are left out", () => {
    expect(expectBody(/name: (\w+)/gim, { from: 0 })).toEqual({ pattern: "name: (\\w+)", literal: false, flags: "im", from: 0 });
    expect(expectBody(/x/y)).toEqual({ pattern: "x", literal: false });
  });

  it("refuses what the server could not honour, before asking it", () => {
    expect(() => expectBody(new RegExp("x", "v"))).toThrow(PtyBrokerError);
    expect(() => expectBody(/x/, { literal: true })).toThrow(/RegExp/);
    expect(() => expectBody("")).toThrow(/pattern/);
  });
});

describe("AgentCalls", () => {
  it("input: a string as is, bytes as base64, the key as Idempotency-Key; answers {bytes, offset}", async () => {
    const { agent, calls } = scripted(() => json({ bytes: 3, offset: 120 }, 202));
    expect(await agent.input("ls\n", { idempotencyKey: "step-1" })).toEqual({ bytes: 3, offset: 120 });
    await agent.input(new Uint8Array([0x03]));
    expect(calls[0]).toMatchObject({
      method: "POST",
      url: "http://broker.test/v1/sessions/my%20session/input",
      headers: { "idempotency-key": "step-1", authorization: "Bearer k" },
      body: { data: "ls\n" },
    });
    expect(calls[1].body).toEqual({ data: "Aw==", encoding: "base64" });
    expect(calls[1].headers["idempotency-key"]).toBeUndefined();
  });

  it("input with eof: true closes stdin after the data (empty data too); without it the body has no eof", async () => {
    const { agent, calls } = scripted(() => json({ bytes: 0, offset: 7 }, 202));
    expect(await agent.input("", { eof: true })).toEqual({ bytes: 0, offset: 7 });
    await agent.input(new Uint8Array([0x61]), { eof: true });
    await agent.input("x", { eof: false });
    expect(calls.map((c) => c.body)).toEqual([{ data: "", eof: true }, { data: "YQ==", encoding: "base64", eof: true }, { data: "x" }]);
  });

  it("input with a key retries a request that got no answer; without one it does not", async () => {
    const flaky = scripted((_call, i) => (i === 0 ? Promise.reject(new TypeError("fetch failed")) : json({ bytes: 1, offset: 9 }, 202)));
    expect(await flaky.agent.input("y", { idempotencyKey: "k1" })).toEqual({ bytes: 1, offset: 9 });
    expect(flaky.calls.map((c) => c.headers["idempotency-key"])).toEqual(["k1", "k1"]);

    const once = scripted(() => Promise.reject(new TypeError("fetch failed")));
    await expect(once.agent.input("y")).rejects.toMatchObject({ code: "NETWORK" });
    expect(once.calls).toHaveLength(1);
  });

  it("input: a bad key is refused locally; a reused key with another body is the server's CONFLICT", async () => {
    const { agent, calls } = scripted(() => json({ error: { code: "CONFLICT", message: "key reused" } }, 409));
    await expect(agent.input("x", { idempotencyKey: "has space" })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    expect(calls).toHaveLength(0);
    await expect(agent.input("x", { idempotencyKey: "k" })).rejects.toMatchObject({ code: "CONFLICT", status: 409 });
  });

  it("expect posts the body and answers the result as the server gave it", async () => {
    const result = { matched: true, match: "Name? ", groups: [], start: 10, end: 16 };
    const { agent, calls } = scripted(() => json(result));
    expect(await agent.expect("Name? ", { from: 4 })).toEqual(result);
    expect(calls[0]).toMatchObject({ method: "POST", url: "http://broker.test/v1/sessions/my%20session/expect" });
    expect(calls[0].body).toEqual({ pattern: "Name? ", literal: true, from: 4 });
  });

  it("run: BUSY and NO_SHELL_INTEGRATION come as PtyBrokerErrors with their code", async () => {
    const { agent, calls } = scripted((_call, i) =>
      json({ error: { code: i === 0 ? "BUSY" : "NO_SHELL_INTEGRATION", message: "no" } }, 409),
    );
    await expect(agent.run("ls", { timeoutSec: 5 })).rejects.toMatchObject({ code: "BUSY", status: 409 });
    await expect(agent.run("ls")).rejects.toMatchObject({ code: "NO_SHELL_INTEGRATION" });
    expect(calls[0].body).toEqual({ command: "ls", timeoutSec: 5 });
    expect(calls[1].body).toEqual({ command: "ls" });
  });

  it("run refuses more than one line locally", async () => {
    const { agent, calls } = scripted(() => json({}));
    await expect(agent.run("ls\nrm -rf x")).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(agent.run("  ")).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    expect(calls).toHaveLength(0);
  });

  it("commands unwraps the list; limit goes in the query", async () => {
    const record = { seq: 1, command: "ls", exitCode: 0, from: 1, to: 2, startedAt: "a", endedAt: "b" };
    const { agent, calls } = scripted(() => json({ commands: [record] }));
    expect(await agent.commands({ limit: 5 })).toEqual([record]);
    expect(calls[0].url).toBe("http://broker.test/v1/sessions/my%20session/commands?limit=5");
  });

  it("screen in its three formats", async () => {
    const state = { offset: 9, cols: 80, rows: 2, cursor: { x: 0, y: 1, visible: true }, alternate: false, title: null, lines: ["a", ""] };
    const { agent, calls } = scripted((call) => {
      if (call.url.endsWith("format=json")) return json(state);
      const headers = { "x-offset": "9", "x-cols": "80", "x-rows": "2" };
      if (call.url.endsWith("format=text")) return new Response("a\n", { headers: { ...headers, "content-type": "text/plain" } });
      return new Response(new Uint8Array([0x1b, 0x5b, 0x48]), { headers });
    });
    expect(await agent.screen()).toEqual(state);
    expect(await agent.screenText()).toBe("a\n");
    const repaint = await agent.screenAnsi();
    expect(repaint).toMatchObject({ offset: 9, cols: 80, rows: 2 });
    expect([...repaint.data]).toEqual([0x1b, 0x5b, 0x48]);
    expect(calls.map((c) => new URL(c.url).search)).toEqual(["?format=json", "?format=text", "?format=ansi"]);
  });

  it("a request held past Node's 300 s header limit goes through a patient undici Agent", async () => {
    const { agent, calls } = scripted(() => json({ matched: false, reason: "timeout", offset: 0 }));
    await agent.expect("x", { timeoutSec: 300 });
    await agent.run("sleep 1000", { timeoutSec: 1200 }).catch(() => undefined);
    await agent.expect("x", { timeoutSec: 30 });
    expect(calls.map((c) => (c.dispatcher as object | undefined)?.constructor.name)).toEqual(["Agent", "Agent", undefined]);
    expect(calls[0].dispatcher).toBe(calls[1].dispatcher); // one, shared
  });

  it("an aborted expect rejects with the signal's reason, not NETWORK", async () => {
    const { agent } = scripted(
      (_call) =>
        new Promise<Response>((_resolve, reject) => {
          setTimeout(() => reject(new DOMException("aborted", "AbortError")), 5);
        }),
    );
    const stop = new AbortController();
    const pending = agent.expect("never", { signal: stop.signal });
    stop.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
  });
});
