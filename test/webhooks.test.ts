// Issue 28, part B: signed webhooks (docs/protocol.md, "Webhooks"). On a stack of its own with
// WEBHOOK_ALLOW_PRIVATE=1 (its receiver is on loopback) and a short retry base: a real receiver
// verifies every signature with the SDK's verifyWebhook; an event answered 500 twice arrives a
// third time with the same event id, on schedule even while sessions are being created (the
// tenant's sweep shares the one alarm: alarm-plan.ts); the deliveries route lists the attempts;
// a tampered body and an old timestamp fail verification; a deleted hook is sent nothing more;
// a `sessions:read` key cannot create a hook; bad bodies are 400 and create nothing; the hook cap
// is 409; `ptybroker webhooks` and `ptybroker audit`. (The refusal of private URLs without WEBHOOK_ALLOW_PRIVATE: test/audit.test.ts, whose
// stack does not set it, and worker/webhooks.test.ts.)
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type WebhookDelivery, WebhookVerifyError, verifyWebhook } from "../client/index.js";
import { signWebhook } from "../shared/webhook-signature.js";
import { ROOT, secret } from "../scripts/stack.js";
import { Api, SuiteCleanup, type SuiteStack, startSuiteStack, stripEscapes, until } from "./harness.js";
import { WebhookReceiver } from "./webhook-receiver.js";

const ADMIN_KEY = secret();
const cleanup = new SuiteCleanup();
// Every POST's signature is checked on arrival with the SDK's verifyWebhook.
const receiver = new WebhookReceiver((body, header, key) => verifyWebhook(body, header, key));
let stack: SuiteStack;
let admin: Api;
let url: string;
let hooksUrl: string;

beforeAll(async () => {
  [stack, hooksUrl] = await Promise.all([
    startSuiteStack(
      {
        apiKeys: "hooks-static:hooks-static-key",
        vars: { ADMIN_KEY, WEBHOOK_ALLOW_PRIVATE: "1", WEBHOOK_RETRY_BASE_MS: "500", WEBHOOK_RETRY_CAP_MS: "2000" },
        runners: [{}],
      },
      cleanup,
    ),
    receiver.start(),
  ]);
  url = stack.edge.url;
  admin = new Api(url, ADMIN_KEY);
});

afterAll(() => receiver.stop());

/** A tenant made through the admin API and a key of it with `scopes` (every scope when none). */
async function tenantKey(tenant: string, scopes?: string[]): Promise<Api> {
  const made = await admin.request("POST", "/admin/v1/tenants", { id: tenant });
  expect([201, 409], JSON.stringify(made.body)).toContain(made.status);
  const key = await admin.request<{ key: string }>("POST", `/admin/v1/tenants/${tenant}/keys`, scopes ? { name: "k", scopes } : { name: "k" });
  expect(key.status, JSON.stringify(key.body)).toBe(201);
  return new Api(url, key.body.key);
}

async function hook(api: Api, path: string, body: Record<string, unknown> = {}): Promise<{ id: string; secret: string; events: string[] }> {
  const res = await api.request<{ id: string; secret: string; events: string[] }>("POST", "/v1/webhooks", { url: `${hooksUrl}${path}`, ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  receiver.secrets.set(path, res.body.secret);
  return res.body;
}

async function session(api: Api): Promise<string> {
  const made = await api.create({ command: "sleep", args: ["30"] });
  cleanup.session(api, made.id);
  return made.id;
}

describe("deliveries", () => {
  it("an event answered 500 twice comes a third time with the same id, on schedule while sessions are created; every signature verifies", async () => {
    const api = await tenantKey("retry");
    const secretText = "retry-suite-secret-0123456789";
    const made = await hook(api, "/retry", { secret: secretText, events: ["session.created"] });
    expect(made.secret).toBe(secretText);
    expect(made.events).toEqual(["session.created"]);
    let flaky = "";
    receiver.answer = (path, _eventId, attempt, event) => (path === "/retry" && event.session.id === flaky && attempt <= 2 ? 500 : 200);
    flaky = `flaky-${secret().slice(0, 8)}`;
    const created = await api.create({ id: flaky, command: "sleep", args: ["30"] });
    cleanup.session(api, created.id);
    // The retry window: creates in the same tenant move the sweep's due time (the old shared
    // alarm pushed the retry back by a minute here).
    await receiver.waitFor("/retry", flaky, "session.created", 1, 10_000);
    // Sessions created back to back until the third attempt comes (at least 3, at most 12): the
    // alarm runs while rows without a record exist, as the old shared alarm's sweep needed.
    const others: string[] = [];
    const third = receiver.waitFor("/retry", flaky, "session.created", 3, 15_000);
    let arrived = false;
    void third.then(() => (arrived = true), () => (arrived = true));
    while (others.length < 3 || (!arrived && others.length < 12)) others.push(await session(api));
    const got = await third;
    expect(got.map((r) => r.status)).toEqual([500, 500, 200]);
    // Backoff 500 ms then 1 s: the third attempt comes seconds after the first, not a minute.
    expect(got[2].at - got[0].at).toBeLessThan(10_000);
    expect(new Set(got.map((r) => r.eventId)).size).toBe(1);
    expect(got[0].event.id).toBe(got[0].eventId);
    for (const r of got) {
      expect(r.refused).toBeNull();
      expect(r.headers["content-type"]).toMatch(/^application\/json/);
      expect(r.headers["ptybroker-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    }
    // The other sessions' events were delivered too, each verified.
    for (const id of others) await receiver.waitFor("/retry", id, "session.created", 1, 10_000);
    expect(receiver.received.filter((r) => r.path === "/retry").every((r) => r.refused === null)).toBe(true);

    // Each failed attempt is logged as a warning naming the hook, the event, the attempt and its status.
    const warned = await until(() => {
      const lines = stripEscapes(stack.edge.output()).split("\n").filter((l) => l.includes('"event":"webhook.attempt"') && l.includes(`"hookId":"${made.id}"`));
      return lines.length >= 2 ? lines : undefined;
    }, 5000, "the webhook.attempt warnings");
    expect(warned[0]).toContain(`"eventId":"${got[0].eventId}","attempt":1,"status":500`);
    expect(warned[0]).toMatch(/"outcome":"retry"/);
    expect(warned[1]).toContain('"attempt":2,"status":500');

    // The deliveries route: the three attempts, oldest first.
    const listed = await api.request<{ deliveries: WebhookDelivery[] }>("GET", `/v1/webhooks/${made.id}/deliveries`);
    expect(listed.status).toBe(200);
    const delivery = listed.body.deliveries.find((d) => d.eventId === got[0].eventId);
    expect(delivery?.state).toBe("delivered");
    expect(delivery?.type).toBe("session.created");
    expect(delivery?.nextAttemptAt).toBeNull();
    expect(delivery?.attempts.map((a) => [a.attempt, a.status, a.error])).toEqual([
      [1, 500, "HTTP 500"],
      [2, 500, "HTTP 500"],
      [3, 200, null],
    ]);
    for (const a of delivery?.attempts ?? []) expect(a.ms).toBeGreaterThanOrEqual(0);

    // A tampered body, another secret and an old timestamp fail verification.
    const { body, headers } = got[2];
    const header = headers["ptybroker-signature"] as string;
    await expect(verifyWebhook(body, header, secretText)).resolves.toBeGreaterThan(0);
    const refusal = (p: Promise<unknown>) => p.then(() => "accepted", (e: WebhookVerifyError) => e.code);
    expect(await refusal(verifyWebhook(body.replace(flaky, "someone-else"), header, secretText))).toBe("bad_signature");
    expect(await refusal(verifyWebhook(body, header, "not-the-secret-at-all"))).toBe("bad_signature");
    const old = await signWebhook(secretText, body, Math.floor(Date.now() / 1000) - 600);
    expect(await refusal(verifyWebhook(body, old, secretText))).toBe("too_old");
    expect(await refusal(verifyWebhook(body, header, secretText, 300, Date.now() + 301_000))).toBe("too_old");
    expect(await refusal(verifyWebhook(body, undefined, secretText))).toBe("missing_header");
  });

  it("a deleted hook is sent nothing more (a second hook gets the event)", async () => {
    const api = await tenantKey("deleted");
    const gone = await hook(api, "/gone", { events: ["session.created"] });
    await hook(api, "/kept", { events: ["session.created"] });
    const deleted = await api.request("DELETE", `/v1/webhooks/${gone.id}`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(deleted.body).toEqual({ id: gone.id, deleted: true });
    expect((await api.request("GET", `/v1/webhooks/${gone.id}`)).status).toBe(404);
    expect((await api.request("GET", `/v1/webhooks/${gone.id}/deliveries`)).status).toBe(404);
    const id = await session(api);
    // Both hooks' deliveries of one event go in the same alarm run: once /kept has it, /gone would have too.
    await receiver.waitFor("/kept", id, "session.created", 1, 10_000);
    expect(receiver.received.filter((r) => r.path === "/gone")).toEqual([]);
    const listed = await api.request<{ webhooks: { id: string }[] }>("GET", "/v1/webhooks");
    expect(listed.body.webhooks.map((h) => h.id)).not.toContain(gone.id);
  });
});

describe("redirects", () => {
  it("a receiver's redirect is not followed: the attempt fails with its status and the target gets nothing", async () => {
    const api = await tenantKey("redirect");
    const made = await hook(api, "/bounce", { events: ["session.created"] });
    receiver.secrets.set("/redirected", made.secret);
    const previous = receiver.answer;
    receiver.answer = (path, eventId, attempt, event) => (path === "/bounce" ? 307 : previous(path, eventId, attempt, event));
    try {
      const id = await session(api);
      await receiver.waitFor("/bounce", id, "session.created", 2, 10_000);
      const listed = await api.request<{ deliveries: WebhookDelivery[] }>("GET", `/v1/webhooks/${made.id}/deliveries`);
      const delivery = listed.body.deliveries.find((d) => d.type === "session.created");
      expect(delivery?.state).toBe("pending");
      expect(delivery?.attempts[0]).toMatchObject({ attempt: 1, status: 307, error: "HTTP 307" });
      expect(receiver.received.filter((r) => r.path === "/redirected")).toEqual([]);
    } finally {
      expect((await api.request("DELETE", `/v1/webhooks/${made.id}`)).status).toBe(200);
      receiver.answer = previous;
    }
  });
});

describe("who may, and what is refused", () => {
  it("a sessions:read key cannot create, list or delete hooks (403); a session token neither", async () => {
    const owner = await tenantKey("scopes");
    const reader = await tenantKey("scopes", ["sessions:read"]);
    const made = await hook(owner, "/scoped");
    const refused = await reader.request("POST", "/v1/webhooks", { url: `${hooksUrl}/scoped-2` });
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toMatch(/webhooks:write/);
    expect((await reader.request("GET", "/v1/webhooks")).status).toBe(403);
    expect((await reader.request("DELETE", `/v1/webhooks/${made.id}`)).status).toBe(403);
    const id = await session(owner);
    const token = (await owner.request<{ token: string }>("POST", `/v1/sessions/${id}/tokens`, { role: "writer" })).body.token;
    expect((await new Api(url, token).request("POST", "/v1/webhooks", { url: `${hooksUrl}/t` })).status).toBe(403);
    const listed = await owner.request<{ webhooks: { id: string }[] }>("GET", "/v1/webhooks");
    expect(listed.body.webhooks.map((h) => h.id)).toEqual([made.id]);
  });

  it("bad bodies are 400 and create nothing; the 17th hook is 409", async () => {
    const api = await tenantKey("bounds");
    const before = (await api.request("GET", "/v1/webhooks")).body;
    const bad: unknown[] = [
      {},
      { url: 5 },
      { url: "ftp://example.com/x" },
      { url: "javascript:alert(1)" },
      { url: `${hooksUrl}/${"a".repeat(2100)}` },
      { url: `${hooksUrl}/x`, events: [] },
      { url: `${hooksUrl}/x`, events: ["session.nope"] },
      { url: `${hooksUrl}/x`, secret: "short" },
      { url: `${hooksUrl}/x`, secret: "has spaces in it, sixteen+" },
      { url: `${hooksUrl}/x`, extra: true },
    ];
    for (const body of bad) {
      const res = await api.request("POST", "/v1/webhooks", body);
      expect(res.status, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.error.code).toBe("INVALID_REQUEST");
    }
    const notJson = await fetch(`${url}/v1/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${api.key}`, "content-type": "text/plain" },
      body: JSON.stringify({ url: `${hooksUrl}/x` }),
    });
    expect(notJson.status).toBe(400);
    expect((await api.request("GET", "/v1/webhooks")).body).toEqual(before);
    expect((await api.request("GET", "/v1/webhooks/wh_nope")).status).toBe(404);
    expect((await api.request("DELETE", `/v1/webhooks/wh_${"0".repeat(24)}`)).status).toBe(404);

    for (let i = 0; i < 16; i++) await hook(api, `/cap-${i}`);
    const over = await api.request("POST", "/v1/webhooks", { url: `${hooksUrl}/cap-16` });
    expect(over.status).toBe(409);
    expect(over.body.error.message).toMatch(/at most 16/);
    expect((await api.request<{ webhooks: unknown[] }>("GET", "/v1/webhooks")).body.webhooks).toHaveLength(16);
  });
});

describe("the CLI", () => {
  it("ptybroker webhooks creates (the secret printed once), lists, shows deliveries and deletes; ptybroker audit pages the log", async () => {
    const api = await tenantKey("cli");
    const run = (...args: string[]) =>
      promisify(execFile)("node", [join(ROOT, "bin/ptybroker.js"), ...args], {
        env: { ...process.env, PTYBROKER_URL: url, PTYBROKER_API_KEY: api.key ?? "" },
        encoding: "utf8",
      });
    const made = await run("webhooks", "create", "--url", `${hooksUrl}/cli`, "--events", "session.created,session.exited");
    const secretText = made.stdout.trim();
    expect(secretText).toMatch(/^whsec_[0-9a-f]{64}$/);
    expect(made.stderr).toMatch(/^webhook wh_[0-9a-f]{24} → .*\/cli \(session.created session.exited\): its signing secret is shown this once\n$/);
    receiver.secrets.set("/cli", secretText);
    const listed = (await run("webhooks")).stdout;
    expect(listed).toMatch(/^ID\s+URL\s+EVENTS\s+CREATED\n/);
    expect(listed).not.toContain(secretText);
    const id = /wh_[0-9a-f]{24}/.exec(listed)?.[0] as string;
    const session = await api.create({ command: "sleep", args: ["30"] });
    cleanup.session(api, session.id);
    await receiver.waitFor("/cli", session.id, "session.created", 1, 10_000);
    await until(async () => {
      const res = await api.request<{ deliveries: WebhookDelivery[] }>("GET", `/v1/webhooks/${id}/deliveries`);
      return res.body.deliveries.some((d) => d.state === "delivered");
    }, 5000, "the delivery recorded as delivered");
    const deliveries = (await run("webhooks", "deliveries", id)).stdout;
    expect(deliveries).toMatch(/^EVENT\s+TYPE\s+STATE\s+ATTEMPTS\s+LAST\s+NEXT\n\d+\s+session.created\s+delivered\s+1\s+200 in \d+ ms\s+-\n/);
    expect((await run("webhooks", "delete", id)).stdout).toBe(`${id}: deleted\n`);
    expect((await api.request<{ webhooks: unknown[] }>("GET", "/v1/webhooks")).body.webhooks).toEqual([]);
    // A missing id is exit 1 with the edge's message; a bad flag is a usage error, exit 2.
    await expect(run("webhooks", "delete", `wh_${"0".repeat(24)}`)).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/not found/) });
    await expect(run("webhooks", "create")).rejects.toMatchObject({ code: 2, stderr: expect.stringMatching(/needs --url/) });

    const audit = (await run("audit")).stdout;
    expect(audit).toMatch(/^ID\s+AT\s+ACTOR\s+ACTION\s+SESSION\s+IP\s+OUTCOME\s+DETAIL\n/);
    for (const action of ["key.create", "webhook.create", "session.create", "webhook.delete"]) expect(audit).toContain(action);
    const page = JSON.parse((await run("audit", "--limit", "2", "--json")).stdout) as { entries: { id: string }[]; nextCursor: string };
    expect(page.entries).toHaveLength(2);
    const next = JSON.parse((await run("audit", "--after", page.nextCursor, "--json")).stdout) as { entries: { id: string }[] };
    expect(Number(next.entries[0].id)).toBeGreaterThan(Number(page.entries[1].id));
  });
});
