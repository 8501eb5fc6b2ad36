// Issue 28, part A: tenants and keys as data (docs/protocol.md, "Tenants and keys"). On a stack
// of its own with ADMIN_KEY set: tenants made and changed through the admin API, keys minted
// there and at /v1/keys, scopes (a read-only key reads and attaches as a viewer, nothing more),
// expiry (401 naming since when), revocation (the next request is 401, the key's sockets and
// streams close with 4011 and its session tokens are 401), tenant limits applied from the next
// request, a tenant's delete (its sessions ended and purged, its keys 401), bad bodies (400,
// nothing changed), `ptybroker keys`, and an edge without ADMIN_KEY, where /admin/* is 404 like
// an unknown route.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { CloseCode } from "../shared/errors.js";
import { ROOT, secret } from "../scripts/stack.js";
import { Api, EventStreamClient, SuiteCleanup, type SuiteStack, TermClient, startSuiteStack, tenantEvents, until } from "./harness.js";

const ADMIN_KEY = secret();
const STATIC = { tenant: "static-t", key: "keys-static-key" };
const cleanup = new SuiteCleanup();
let stack: SuiteStack;
let admin: Api;
let url: string;

beforeAll(async () => {
  stack = await startSuiteStack(
    { apiKeys: `${STATIC.tenant}:${STATIC.key}`, vars: { ADMIN_KEY }, runners: [{}] },
    cleanup,
  );
  url = stack.edge.url;
  admin = new Api(url, ADMIN_KEY);
});

interface Minted {
  keyId: string;
  key: string;
  prefix: string;
  scopes: string[];
  expiresAt: string | null;
}

/** A tenant made through the admin API, and an API client with a key of every scope (`owner`). */
async function newTenant(id: string, limits?: Record<string, number>): Promise<{ owner: Api; ownerKey: Minted }> {
  const made = await admin.request("POST", "/admin/v1/tenants", limits ? { id, limits } : { id });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const ownerKey = await mint(id, { name: "owner" });
  return { owner: new Api(url, ownerKey.key), ownerKey };
}

async function mint(tenant: string, body: Record<string, unknown>): Promise<Minted> {
  const res = await admin.request<Minted>("POST", `/admin/v1/tenants/${tenant}/keys`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function shell(api: Api): Promise<string> {
  const session = await api.create({});
  cleanup.session(api, session.id);
  return session.id;
}

function connect(id: string, key: string): TermClient {
  return cleanup.client(new TermClient(url, id, key));
}

describe("revocation", () => {
  it("a revoked key is 401 at its next request, its sockets and streams close with 4011, and its tokens are 401", async () => {
    await newTenant("rev");
    const minted = await mint("rev", { name: "ci" });
    expect(minted.key.startsWith(`${minted.prefix}.`)).toBe(true);
    const key = new Api(url, minted.key);
    const id = await shell(new Api(url, (await mint("rev", { name: "cleanup" })).key));
    // The minted key creates a session of its own and mints a token for it.
    const own = await key.create({});
    cleanup.session(new Api(url, (await mint("rev", { name: "cleanup-2" })).key), own.id);
    const token = (await key.request<{ token: string }>("POST", `/v1/sessions/${own.id}/tokens`, { role: "writer" })).body.token;
    expect((await new Api(url, token).request("GET", `/v1/sessions/${own.id}`)).status).toBe(200);

    const client = connect(own.id, minted.key);
    const viaToken = connect(own.id, token);
    const other = connect(id, minted.key);
    await Promise.all([client.opened, viaToken.opened, other.opened]);
    await client.waitForMessage((m) => m.type === "hello", "hello");
    await viaToken.waitForMessage((m) => m.type === "hello", "hello");
    const stream = cleanup.stream(new EventStreamClient(url, `/v1/sessions/${own.id}/stream`, minted.key));
    const events = cleanup.stream(tenantEvents(url, minted.key));
    await stream.waitFor(() => stream.status === 200, "the stream open");
    await events.waitFor(() => events.comments.length > 0, "the events stream open");

    const revoked = await admin.request("DELETE", `/admin/v1/tenants/rev/keys/${minted.keyId}`);
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);

    // The next request: 401 (no cache outlives the revoke); the key's tokens die with it.
    const next = await key.request("GET", "/v1/sessions");
    expect(next.status).toBe(401);
    expect(next.body.error.message).toMatch(/revoked/);
    const tokenNext = await new Api(url, token).request("GET", `/v1/sessions/${own.id}`);
    expect(tokenNext.status).toBe(401);
    expect(tokenNext.body.error.message).toMatch(/minted with/);
    // The revoke answers once the closes are sent: each socket sees 4011 within a second of it.
    const codes = await Promise.all([client, viaToken, other].map((c) => c.waitForClose(1000)));
    expect(codes).toEqual([CloseCode.KeyRevoked, CloseCode.KeyRevoked, CloseCode.KeyRevoked]);
    await stream.waitFor(() => stream.events.some((e) => e.event === "revoked"), "revoked on the output stream", 1000);
    await events.waitFor(() => events.events.some((e) => e.event === "revoked"), "revoked on the events stream", 1000);
    expect(JSON.parse(stream.events.find((e) => e.event === "revoked")?.data ?? "{}")).toEqual({
      code: CloseCode.KeyRevoked,
      reason: "API key revoked",
    });
    const listed = await admin.request<{ keys: Minted[] }>("GET", "/admin/v1/tenants/rev/keys");
    expect(listed.body.keys.map((k) => k.keyId)).not.toContain(minted.keyId);
    // A new socket with the revoked key is refused.
    expect(await connect(own.id, minted.key).closed).toBe(CloseCode.Unauthorized);
  });
});

describe("scopes", () => {
  it("a sessions:read key lists and attaches as a viewer, and cannot create, type, kill or read events (403)", async () => {
    const { owner } = await newTenant("scoped");
    const id = await shell(owner);
    const read = await mint("scoped", { name: "reader", scopes: ["sessions:read"] });
    expect(read.scopes).toEqual(["sessions:read"]);
    const reader = new Api(url, read.key);

    const list = await reader.request<{ sessions: { id: string }[] }>("GET", "/v1/sessions");
    expect(list.status).toBe(200);
    expect(list.body.sessions.map((s) => s.id)).toContain(id);
    expect((await reader.request("GET", `/v1/sessions/${id}`)).status).toBe(200);

    const viewer = connect(id, read.key);
    await viewer.opened;
    await viewer.waitForMessage((m) => m.type === "hello", "hello");
    viewer.send("echo typed-by-viewer\n");
    await viewer.waitForMessage((m) => m.type === "error" && m.code === "FORBIDDEN", "the viewer's input refused");

    const refusals = [
      await reader.request("POST", "/v1/sessions", {}),
      await reader.request("POST", `/v1/sessions/${id}/input`, { data: "x" }),
      await reader.request("POST", `/v1/sessions/${id}/signal`, { signal: "SIGKILL" }),
      await reader.request("DELETE", `/v1/sessions/${id}`),
      await reader.request("POST", `/v1/sessions/${id}/tokens`, { role: "viewer" }),
      await reader.request("POST", "/v1/exec", { command: "/bin/true" }),
    ];
    for (const res of refusals) {
      expect(res.status, JSON.stringify(res.body)).toBe(403);
      expect(res.body.error.message).toContain("sessions:write");
    }
    const events = await fetch(`${url}/v1/events`, { headers: { authorization: `Bearer ${read.key}` } });
    expect(events.status).toBe(403);
    expect(((await events.json()) as any).error.message).toContain("events:read");
    expect((await reader.request("GET", "/v1/keys")).status).toBe(403);
    // The session still runs: nothing the reader sent reached it.
    expect((await owner.get(id)).status).toBe("running");
  });

  it("/v1/keys: a key with every scope lists, creates and revokes the tenant's keys; a narrower one gets 403", async () => {
    const { owner, ownerKey } = await newTenant("self");
    const made = await owner.request<Minted>("POST", "/v1/keys", { name: "deploy", scopes: ["sessions:write", "sessions:read"] });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.scopes).toEqual(["sessions:read", "sessions:write"]);
    const listed = await owner.request<{ keys: Minted[] }>("GET", "/v1/keys");
    expect(listed.body.keys.map((k) => k.keyId).sort()).toEqual([ownerKey.keyId, made.body.keyId].sort());
    expect(JSON.stringify(listed.body)).not.toContain(made.body.key);
    const narrow = new Api(url, made.body.key);
    const refused = await narrow.request("GET", "/v1/keys");
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toContain("events:read");
    expect((await narrow.request("DELETE", `/v1/keys/${ownerKey.keyId}`)).status).toBe(403);
    expect((await owner.request("DELETE", `/v1/keys/${made.body.keyId}`)).status).toBe(200);
    expect((await narrow.request("GET", "/v1/sessions")).status).toBe(401);
    // An API_KEYS key has every scope.
    expect((await new Api(url, STATIC.key).request("GET", "/v1/keys")).status).toBe(200);
  });
});

describe("CLI", () => {
  it("ptybroker keys creates (the key printed once), lists and revokes the tenant's keys", async () => {
    const { ownerKey } = await newTenant("cli");
    const cli = (...args: string[]) =>
      promisify(execFile)("node", [join(ROOT, "bin/ptybroker.js"), "keys", ...args], {
        env: { ...process.env, PTYBROKER_URL: url, PTYBROKER_API_KEY: ownerKey.key },
        encoding: "utf8",
      });
    const made = await cli("create", "ci", "--scope", "sessions:read", "--json");
    const key = JSON.parse(made.stdout) as Minted;
    expect(key.scopes).toEqual(["sessions:read"]);
    expect((await new Api(url, key.key).request("GET", "/v1/sessions")).status).toBe(200);
    const listed = (await cli()).stdout;
    expect(listed).toMatch(/^ID\s+NAME\s+SCOPES\s+CREATED\s+LAST USED\s+EXPIRES\n/);
    expect(listed).toContain(`${key.keyId}  ci`);
    expect(listed).not.toContain(key.key);
    expect((await cli("revoke", key.keyId)).stdout).toBe(`${key.keyId}: revoked\n`);
    expect((await new Api(url, key.key).request("GET", "/v1/sessions")).status).toBe(401);
  });
});

describe("expiry", () => {
  it("an expired key is 401 and says since when", async () => {
    await newTenant("expiring");
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const minted = await mint("expiring", { name: "short", expiresAt });
    const key = new Api(url, minted.key);
    const res = await until(
      async () => {
        const answer = await key.request("GET", "/v1/sessions");
        return answer.status === 200 ? null : answer;
      },
      15_000,
      "the key to expire",
    );
    expect(res.status).toBe(401);
    expect(res.body.error.message).toBe(`this API key expired at ${expiresAt}`);
  });
});

describe("admin API", () => {
  it("refuses a tenant's keys and session tokens (401), and a wrong admin key", async () => {
    const { owner, ownerKey } = await newTenant("intruder");
    const id = await shell(owner);
    const token = (await owner.request<{ token: string }>("POST", `/v1/sessions/${id}/tokens`, { role: "writer" })).body.token;
    for (const credential of [ownerKey.key, STATIC.key, token, `${ADMIN_KEY}x`]) {
      const api = new Api(url, credential);
      expect((await api.request("GET", "/admin/v1/tenants")).status).toBe(401);
      expect((await api.request("POST", "/admin/v1/tenants/intruder/keys", { name: "mine" })).status).toBe(401);
      expect((await api.request("PATCH", "/admin/v1/tenants/intruder", { limits: { sessions: 1000 } })).status).toBe(401);
    }
    expect((await admin.request<{ keys: Minted[] }>("GET", "/admin/v1/tenants/intruder/keys")).body.keys).toHaveLength(1);
    expect((await admin.request<any>("GET", "/admin/v1/tenants/intruder")).body.limits).toEqual({});
  });

  it("PATCH a tenant's session limit: its next create past it is refused; DELETE ends and purges its sessions and its keys are 401", async () => {
    const { owner, ownerKey } = await newTenant("bounded");
    const first = await shell(owner);
    const client = connect(first, ownerKey.key);
    await client.opened;
    const patched = await admin.request<any>("PATCH", "/admin/v1/tenants/bounded", { limits: { sessions: 1 } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.limits).toEqual({ sessions: 1 });
    const refused = await owner.request("POST", "/v1/sessions", {});
    expect(refused.status).toBe(429);
    expect(refused.body.error.message).toContain("at most 1 sessions");
    // Back to the deployment's default: the next create passes.
    expect((await admin.request<any>("PATCH", "/admin/v1/tenants/bounded", { limits: { sessions: null } })).body.limits).toEqual({});
    const second = await shell(owner);

    const deleted = await admin.request<any>("DELETE", "/admin/v1/tenants/bounded");
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(deleted.body).toMatchObject({ id: "bounded", deleted: true, sessions: 2, keys: 1 });
    expect(await client.waitForClose()).toBe(CloseCode.SessionEnded);
    expect((await owner.request("GET", "/v1/sessions")).status).toBe(401);
    expect((await admin.request("GET", "/admin/v1/tenants/bounded")).status).toBe(404);
    // Made again under the same id, the tenant has none of its old sessions.
    const { owner: again } = await newTenant("bounded");
    for (const id of [first, second]) expect((await again.request("GET", `/v1/sessions/${id}`)).status).toBe(404);
    expect((await again.request<any>("GET", "/v1/sessions")).body.sessions).toEqual([]);
  });

  it("a tenant's sandbox maximum: a create asking more is 400, one asking nothing gets at most it", async () => {
    const { owner } = await newTenant("small", { memoryMiB: 256 });
    const refused = await owner.request("POST", "/v1/sessions", { limits: { memoryMiB: 512 } });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toBe("limits.memoryMiB: at most 256, this tenant's maximum");
    const id = await shell(owner);
    expect((await owner.get(id)).limits?.memoryMiB).toBe(256);
  });

  it("bad bodies are 400 and change nothing", async () => {
    await newTenant("tidy");
    const before = {
      tenants: (await admin.request("GET", "/admin/v1/tenants")).body,
      tidy: (await admin.request("GET", "/admin/v1/tenants/tidy")).body,
      keys: (await admin.request("GET", "/admin/v1/tenants/tidy/keys")).body,
    };
    const bad: [string, string, unknown][] = [
      ["POST", "/admin/v1/tenants/tidy/keys", { name: "x", scopes: ["sessions:admin"] }],
      ["POST", "/admin/v1/tenants/tidy/keys", { name: "x", expiresAt: new Date(Date.now() - 60_000).toISOString() }],
      ["POST", "/admin/v1/tenants/tidy/keys", { name: "x", expiresAt: "tomorrow" }],
      ["POST", "/admin/v1/tenants/tidy/keys", { name: "" }],
      ["POST", "/admin/v1/tenants", { id: "no spaces" }],
      ["POST", "/admin/v1/tenants", { id: "a.b" }],
      ["POST", "/admin/v1/tenants", { id: "new-one", limits: { sessions: 0 } }],
      ["POST", "/admin/v1/tenants", { id: "new-one", limits: { memoryMiB: 1 << 20 } }],
      ["POST", "/admin/v1/tenants", { id: "new-one", limits: { unknown: 1 } }],
      ["PATCH", "/admin/v1/tenants/tidy", { limits: { clientsPerSession: 1 } }],
      ["PATCH", "/admin/v1/tenants/tidy", { limits: { cpus: 100 } }],
      ["PATCH", "/admin/v1/tenants/tidy", { sessions: 5 }],
    ];
    for (const [method, path, body] of bad) {
      const res = await admin.request(method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.error.code).toBe("INVALID_REQUEST");
    }
    const self = await newTenant("tidy-self");
    const selfBefore = (await self.owner.request("GET", "/v1/keys")).body;
    expect((await self.owner.request("POST", "/v1/keys", { name: "x", scopes: ["root"] })).status).toBe(400);
    expect((await self.owner.request("GET", "/v1/keys")).body).toEqual(selfBefore);
    expect((await admin.request("GET", "/admin/v1/tenants/tidy")).body).toEqual(before.tidy);
    expect((await admin.request("GET", "/admin/v1/tenants/tidy/keys")).body).toEqual(before.keys);
    const after = (await admin.request<{ tenants: { id: string }[] }>("GET", "/admin/v1/tenants")).body;
    expect(after.tenants.map((t) => t.id)).toEqual([...(before.tenants as any).tenants.map((t: any) => t.id), "tidy-self"].sort());
  });
});

describe("without ADMIN_KEY", () => {
  // An edge of its own without ADMIN_KEY (no runner: nothing here starts a session).
  const local = new SuiteCleanup();
  let bare: SuiteStack;
  beforeAll(async () => {
    bare = await startSuiteStack({ apiKeys: `${STATIC.tenant}:${STATIC.key}` }, local);
  });

  it("every /admin/* path answers 404, as an unknown route does", async () => {
    const api = new Api(bare.edge.url, ADMIN_KEY);
    const unknown = await api.request("GET", "/no-such-route");
    expect(unknown.status).toBe(404);
    for (const [method, path] of [
      ["GET", "/admin/v1/tenants"],
      ["POST", "/admin/v1/tenants"],
      ["DELETE", "/admin/v1/tenants/static-t"],
      ["GET", "/admin/v1/tenants/static-t/keys"],
    ]) {
      const res = await api.request(method, path, method === "POST" ? { id: "x" } : undefined);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toEqual(unknown.body);
    }
  });
});
