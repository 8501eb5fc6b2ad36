// Messages a person can act on (issue 14): an expired session token says it expired and when, an
// Authorization header without `Bearer` says what it must look like, a forged token is still
// just "invalid"; a command that is not there ends as a shell's would (127, "command not found"
// as output), one that may not be executed with 126 and "permission denied".
import { sign } from "hono/jwt";
import { describe, expect, inject, it } from "vitest";
import WebSocket from "ws";
import { TENANTS } from "./global-setup.js";
import { Api, fetchOutput, onSharedStack } from "./harness.js";

const suite = onSharedStack();
const { url, api: acme } = suite;
const tokenSecret = inject("tokenSecret");
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

function session(body: Record<string, unknown>) {
  return suite.session(body);
}

/** A WebSocket's first control message and its close code and reason. */
async function socketRefusal(target: string, headers: Record<string, string> = {}) {
  const ws = new WebSocket(target, { headers });
  const messages: any[] = [];
  ws.on("message", (data: Buffer, isBinary) => {
    if (!isBinary) messages.push(JSON.parse(data.toString()));
  });
  ws.on("error", () => {});
  const [code, reason] = await new Promise<[number, string]>((resolve) =>
    ws.on("close", (c, r) => resolve([c, r.toString()])),
  );
  return { code, reason, messages };
}

async function ended(id: string) {
  const res = await acme.request("GET", `/v1/sessions/${id}/wait?timeoutSec=20`);
  expect(res.status).toBe(200);
  return res.body;
}

describe("credential messages", () => {
  it("says when a genuine session token expired, over REST and WebSocket; a forged expired one is invalid", async () => {
    const s = await session(BASH);
    const token = await acme.request("POST", `/v1/sessions/${s.id}/tokens`, { role: "viewer", ttlSec: 60 });
    const inc = JSON.parse(Buffer.from(token.body.token.split(".")[1], "base64url").toString()).inc as string;
    const now = Math.floor(Date.now() / 1000);
    const claims = { aud: "ptybroker-session", ten: "acme", sid: s.id, inc, role: "viewer", iat: now - 120, exp: now - 60 };
    const expired = await sign(claims, tokenSecret, "HS256");
    const expiredAt = new Date((now - 60) * 1000).toISOString();
    const message = `session token expired at ${expiredAt}`;

    const res = await new Api(url, expired).request("GET", `/v1/sessions/${s.id}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: "UNAUTHORIZED", message } });
    const ws = await socketRefusal(`${url.replace(/^http/, "ws")}/v1/sessions/${s.id}/connect?token=${encodeURIComponent(expired)}`);
    expect(ws).toEqual({ code: 4001, reason: message, messages: [{ type: "error", code: "UNAUTHORIZED", message }] });

    // The same claims under another secret are a forgery: "invalid", never "expired".
    const forged = await sign(claims, "not-the-secret", "HS256");
    const forgedRes = await new Api(url, forged).request("GET", `/v1/sessions/${s.id}`);
    expect(forgedRes.status).toBe(401);
    expect(forgedRes.body).toEqual({
      error: { code: "UNAUTHORIZED", message: "invalid API key or session token (forged or malformed)" },
    });
    // And a live token of ours still works.
    expect((await new Api(url, token.body.token).request("GET", `/v1/sessions/${s.id}`)).status).toBe(200);
  });

  it("says an Authorization header must be 'Bearer <...>' when the scheme is missing", async () => {
    for (const header of [TENANTS.acme, `Basic ${TENANTS.acme}`, `Bearer ${TENANTS.acme} extra`]) {
      const res = await fetch(`${url}/v1/sessions`, { headers: { authorization: header } });
      expect(res.status, header).toBe(401);
      expect(await res.json()).toEqual({
        error: { code: "UNAUTHORIZED", message: "Authorization must be 'Bearer <api key or session token>'" },
      });
    }
    // No header, or the bare scheme (a client with nothing to put there): missing credentials.
    for (const headers of [{}, { authorization: "Bearer " }] as Record<string, string>[]) {
      const none = await fetch(`${url}/v1/sessions`, { headers });
      expect(none.status).toBe(401);
      expect(await none.json()).toEqual({
        error: { code: "UNAUTHORIZED", message: "missing credentials: send Authorization: Bearer <api key or session token>" },
      });
    }
  });
});

describe("commands that cannot run", () => {
  it("ends a command that does not exist with 127 and 'command not found' as its output", async () => {
    const s = await session({ command: "no-such-cmd", args: ["--flag"] });
    expect(await ended(s.id)).toMatchObject({ status: "exited", exitCode: 127, signal: null, reason: "exit", command: "no-such-cmd" });
    expect((await fetchOutput(acme, s.id, 0)).bytes.toString("utf8")).toBe("ptybroker: no-such-cmd: command not found\r\n");
  });

  it("ends a path that does not exist with 127, and a file that may not be executed with 126", async () => {
    const cwd = `messages-${Date.now()}`;
    const maker = await session({ command: "/bin/sh", args: ["-c", "printf '#!/bin/sh\\necho ran\\n' > plain.sh; chmod 644 plain.sh"], cwd });
    expect(await ended(maker.id)).toMatchObject({ status: "exited", exitCode: 0 });

    const plain = await session({ command: "./plain.sh", cwd });
    expect(await ended(plain.id)).toMatchObject({ status: "exited", exitCode: 126 });
    expect((await fetchOutput(acme, plain.id, 0)).bytes.toString("utf8")).toBe("ptybroker: ./plain.sh: permission denied\r\n");

    const missing = await session({ command: "./gone.sh", cwd });
    expect(await ended(missing.id)).toMatchObject({ status: "exited", exitCode: 127 });
    expect((await fetchOutput(acme, missing.id, 0)).bytes.toString("utf8")).toBe("ptybroker: ./gone.sh: no such file or directory\r\n");
  });
});
