// Issue 28, part B: the audit log (docs/protocol.md, "Audit log"). On a stack of its own, which
// does not set WEBHOOK_ALLOW_PRIVATE: a scripted sequence (a session created, a writer token
// minted, a writer attaching with it, input typed over REST with it, the session killed, a key
// revoked) is listed once per step, in order, with the right actor (key id, `tok:<jti>`, admin),
// the client's address and no input content; another tenant's log never shows it; a key without
// every scope is 403; paging with after/limit returns every entry once. And the SSRF rule: a
// hostile tenant's webhook at this host or a private network is 400 here.
import { beforeAll, describe, expect, it } from "vitest";
import type { AuditEntry, AuditPage } from "../client/index.js";
import { secret } from "../scripts/stack.js";
import { Api, SuiteCleanup, type SuiteStack, TermClient, startSuiteStack, until } from "./harness.js";

const ADMIN_KEY = secret();
const cleanup = new SuiteCleanup();
let stack: SuiteStack;
let admin: Api;
let url: string;

beforeAll(async () => {
  stack = await startSuiteStack({ apiKeys: "audit-static:audit-static-key", vars: { ADMIN_KEY }, runners: [{}] }, cleanup);
  url = stack.edge.url;
  admin = new Api(url, ADMIN_KEY);
});

async function tenant(id: string): Promise<void> {
  const made = await admin.request("POST", "/admin/v1/tenants", { id });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
}

async function mint(tenantId: string, body: Record<string, unknown>): Promise<{ keyId: string; key: string }> {
  const res = await admin.request<{ keyId: string; key: string }>("POST", `/admin/v1/tenants/${tenantId}/keys`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function everything(api: Api): Promise<AuditEntry[]> {
  const res = await api.request<AuditPage>("GET", "/v1/audit?limit=1000");
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.entries;
}

describe("the audit log", () => {
  it("lists a scripted sequence once per step, in order, with its actors and address, and no input content", async () => {
    await tenant("aud");
    const owner = await mint("aud", { name: "owner" });
    const spare = await mint("aud", { name: "spare" });
    const api = new Api(url, owner.key);
    const typed = `echo AUDIT-SECRET-${secret().slice(0, 12)}`;

    const created = await api.create({});
    cleanup.session(api, created.id);
    const minted = await api.request<{ token: string }>("POST", `/v1/sessions/${created.id}/tokens`, { role: "writer" });
    expect(minted.status).toBe(201);
    const token = minted.body.token;
    const writer = cleanup.client(new TermClient(url, created.id, token));
    await writer.opened;
    await writer.waitForMessage((m) => m.type === "hello", "hello");
    await new Api(url, token).input(created.id, `${typed}\n`);
    const killed = await api.request("POST", `/v1/sessions/${created.id}/signal`, { signal: "SIGKILL" });
    expect(killed.status).toBe(202);
    const revoked = await api.request("DELETE", `/v1/keys/${spare.keyId}`);
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);

    // Entries are written as the answers go out (ctx.waitUntil): the last one is there within moments.
    const entries = await until(async () => {
      const all = await everything(api);
      return all.some((e) => e.action === "key.revoke") ? all : undefined;
    }, 5000, "the revoke's audit entry");
    const tokenEntry = entries.find((e) => e.action === "token.mint");
    const tokenActor = String(tokenEntry?.detail?.tokenId);
    expect(tokenActor).toMatch(/^tok:[0-9a-f]{24}$/);
    const steps = entries.map((e) => [e.action, e.actor.id, e.actor.kind, e.actor.role ?? null, e.sessionId ?? null, e.outcome]);
    expect(steps).toEqual([
      ["key.create", "admin", "admin", null, null, "ok"],
      ["key.create", "admin", "admin", null, null, "ok"],
      ["session.create", owner.keyId, "key", null, created.id, "ok"],
      ["token.mint", owner.keyId, "key", null, created.id, "ok"],
      ["session.attach", tokenActor, "token", "writer", created.id, "ok"],
      ["session.input", tokenActor, "token", "writer", created.id, "ok"],
      ["session.signal", owner.keyId, "key", null, created.id, "ok"],
      ["key.revoke", owner.keyId, "key", null, null, "ok"],
    ]);
    expect(entries[0].detail).toEqual({ keyId: owner.keyId });
    expect(entries[1].detail).toEqual({ keyId: spare.keyId });
    expect(entries[5].detail).toEqual({ bytes: typed.length + 1 });
    expect(entries[6].detail).toEqual({ signal: "SIGKILL" });
    expect(entries[7].detail).toEqual({ keyId: spare.keyId });
    // The client's address (this test's loopback connection) on every entry; ids only grow.
    for (const e of entries) {
      expect(e.ip, JSON.stringify(e)).toMatch(/^(127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)$/);
      expect(Date.parse(e.at)).toBeGreaterThan(0);
    }
    expect(entries.map((e) => Number(e.id))).toEqual([...entries.map((e) => Number(e.id))].sort((a, b) => a - b));
    // What was typed is nowhere in the log.
    expect(JSON.stringify(entries)).not.toContain("AUDIT-SECRET");
    expect(JSON.stringify(entries)).not.toContain(typed.slice(5));

    // A refusal is recorded with its code: a viewer token may not type.
    const viewer = (await api.request<{ token: string }>("POST", `/v1/sessions/${created.id}/tokens`, { role: "viewer" })).body.token;
    expect((await new Api(url, viewer).request("POST", `/v1/sessions/${created.id}/input`, { data: "x" })).status).toBe(403);
    const after = await until(async () => {
      const all = await everything(api);
      return all.length >= entries.length + 2 ? all : undefined;
    }, 5000, "the refused input's entry");
    expect(after.slice(entries.length).map((e) => [e.action, e.actor.role ?? null, e.outcome])).toEqual([
      ["token.mint", null, "ok"],
      ["session.input", "viewer", "FORBIDDEN"],
    ]);

    // Another tenant's log never shows any of it.
    await tenant("aud-other");
    const other = new Api(url, (await mint("aud-other", { name: "owner" })).key);
    await other.create({}).then((s) => cleanup.session(other, s.id));
    const theirs = await until(async () => {
      const all = await everything(other);
      return all.some((e) => e.action === "session.create") ? all : undefined;
    }, 5000, "the other tenant's create");
    const text = JSON.stringify(theirs);
    for (const needle of [created.id, owner.keyId, spare.keyId, tokenActor]) expect(text).not.toContain(needle);
    // API_KEYS tenants have a log of their own too.
    const staticLog = await everything(new Api(url, "audit-static-key"));
    expect(JSON.stringify(staticLog)).not.toContain(created.id);
  });

  it("a key without every scope, and a session token, are 403 on /v1/audit", async () => {
    await tenant("aud-scopes");
    const narrow = await mint("aud-scopes", { name: "narrow", scopes: ["sessions:read", "sessions:write", "events:read"] });
    const res = await new Api(url, narrow.key).request("GET", "/v1/audit");
    expect(res.status).toBe(403);
    expect(res.body.error.message).toMatch(/webhooks:write/);
    const owner = new Api(url, (await mint("aud-scopes", { name: "owner" })).key);
    // A key refused for a missing scope is recorded with the code it got.
    const reader = await mint("aud-scopes", { name: "reader", scopes: ["sessions:read"] });
    expect((await new Api(url, reader.key).request("POST", "/v1/sessions", {})).status).toBe(403);
    const refused = await until(async () => (await everything(owner)).find((e) => e.action === "session.create"), 5000, "the refused create's entry");
    expect(refused).toMatchObject({ actor: { id: reader.keyId, kind: "key" }, outcome: "FORBIDDEN" });
    const session = await owner.create({});
    cleanup.session(owner, session.id);
    const token = (await owner.request<{ token: string }>("POST", `/v1/sessions/${session.id}/tokens`, { role: "writer" })).body.token;
    expect((await new Api(url, token).request("GET", "/v1/audit")).status).toBe(403);
    expect((await owner.request("GET", "/v1/audit?limit=0")).status).toBe(400);
    expect((await owner.request("GET", "/v1/audit?after=x")).status).toBe(400);
  });

  it("paging with after and limit returns every entry once, in order", async () => {
    await tenant("aud-pages");
    const owner = await mint("aud-pages", { name: "owner" });
    const api = new Api(url, owner.key);
    for (let i = 0; i < 4; i++) expect((await api.request("POST", "/v1/keys", { name: `k${i}` })).status).toBe(201);
    const all = await until(async () => {
      const got = await everything(api);
      return got.length >= 5 ? got : undefined;
    }, 5000, "five entries");
    expect(all).toHaveLength(5);
    const seen: string[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const res: { body: AuditPage } = await api.request<AuditPage>("GET", `/v1/audit?limit=2${after ? `&after=${after}` : ""}`);
      seen.push(...res.body.entries.map((e) => e.id));
      after = res.body.nextCursor;
      if (!after) break;
    }
    expect(seen).toEqual(all.map((e) => e.id));
  });
});

describe("the webhook URL rule (this stack does not set WEBHOOK_ALLOW_PRIVATE)", () => {
  it("a hostile tenant cannot point a webhook at this host's services or a private network (400, nothing created)", async () => {
    const api = new Api(url, "audit-static-key");
    const edgePort = new URL(url).port;
    for (const target of [
      "http://127.0.0.1:6379/",
      `http://127.0.0.1:${edgePort}/v1/sessions`,
      "http://localhost:6379/",
      "http://169.254.169.254/latest/meta-data/",
      "http://[::1]:6379/",
      "http://10.0.0.5/",
      "http://192.168.0.1/",
      "http://172.20.0.1/",
      "http://[fd00::1]/",
    ]) {
      const res = await api.request("POST", "/v1/webhooks", { url: target });
      expect(res.status, target).toBe(400);
      expect(res.body.error.message).toMatch(/private network/);
    }
    expect((await api.request<{ webhooks: unknown[] }>("GET", "/v1/webhooks")).body.webhooks).toEqual([]);
    // The refusals are in the tenant's audit log, with their code.
    const log = await until(async () => {
      const got = await everything(api);
      return got.filter((e) => e.action === "webhook.create").length >= 9 ? got : undefined;
    }, 5000, "the refused creates' entries");
    expect(log.filter((e) => e.action === "webhook.create").every((e) => e.outcome === "INVALID_REQUEST")).toBe(true);
  });
});
