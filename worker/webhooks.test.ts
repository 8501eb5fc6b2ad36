// Webhooks inside workerd (vitest-pool-workers, without WEBHOOK_ALLOW_PRIVATE): the URL rule on
// its own and through the real route (this host and private networks are 400 and create
// nothing), and the retry schedule to the end of its 24 h window.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { webhookUrlProblem } from "./http/webhook-url.js";
import { DELIVERY_WINDOW_MS, nextAttemptAt, retryDelay, retryPolicy } from "./tenant/webhook-schedule.js";

const worker = (exports as unknown as { default: { fetch(req: Request): Promise<Response> } }).default;

function call(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("authorization", "Bearer acme-key");
  if (init.body) headers.set("content-type", "application/json");
  return worker.fetch(new Request(`http://edge${path}`, { ...init, headers }));
}

const PRIVATE = [
  "http://127.0.0.1:6379/",
  "http://127.1/",
  "http://2130706433/",
  "http://0x7f000001/",
  "http://localhost:8787/",
  "http://api.localhost/",
  "http://169.254.169.254/latest/meta-data/",
  "http://10.1.2.3/",
  "http://172.16.0.1/",
  "http://172.31.255.255/",
  "http://192.168.1.1/",
  "http://100.64.0.1/",
  "http://0.0.0.0:6379/",
  "http://[::1]:6379/",
  "http://[::]/",
  "http://[fc00::1]/",
  "http://[fd12:3456::1]/",
  "http://[fe80::1]/",
  "http://[::ffff:127.0.0.1]/",
  "http://[::ffff:169.254.169.254]/",
  "http://redis/",
  "http://metadata.google.internal/",
];

describe("the webhook URL rule", () => {
  it("refuses this host, private networks and local names; takes public http(s) URLs", () => {
    for (const url of PRIVATE) expect(webhookUrlProblem(url, false), url).toMatch(/private network/);
    for (const url of ["https://hooks.example.com/ptyb", "http://93.184.216.34/x", "https://[2606:4700::1111]/", "http://172.32.0.1/"]) {
      expect(webhookUrlProblem(url, false), url).toBeNull();
    }
    expect(webhookUrlProblem("ftp://example.com/", false)).toMatch(/http or https/);
    expect(webhookUrlProblem("javascript:alert(1)", false)).toMatch(/http or https/);
    expect(webhookUrlProblem("not a url", false)).toMatch(/not a URL/);
    expect(webhookUrlProblem("https://user:pw@example.com/", false)).toMatch(/credentials/);
    expect(webhookUrlProblem(`https://example.com/${"a".repeat(2048)}`, false)).toMatch(/2048/);
    // WEBHOOK_ALLOW_PRIVATE=1 lets a local receiver in; the scheme rule still holds.
    expect(webhookUrlProblem("http://127.0.0.1:9999/", true)).toBeNull();
    expect(webhookUrlProblem("file:///etc/passwd", true)).toMatch(/http or https/);
  });

  it("the route refuses them with 400 and creates nothing (an edge without WEBHOOK_ALLOW_PRIVATE)", async () => {
    for (const url of ["http://127.0.0.1:6379/", "http://localhost/", "http://169.254.169.254/", "http://[::1]/", "http://10.0.0.1/"]) {
      const res = await call("/v1/webhooks", { method: "POST", body: JSON.stringify({ url }) });
      expect(res.status, url).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("INVALID_REQUEST");
      expect(body.error.message).toMatch(/private network/);
    }
    const listed = (await (await call("/v1/webhooks")).json()) as { webhooks: unknown[] };
    expect(listed.webhooks).toEqual([]);
    // A public URL is taken (nothing is sent: no event happens here).
    const made = await call("/v1/webhooks", { method: "POST", body: JSON.stringify({ url: "https://hooks.example.com/x" }) });
    expect(made.status).toBe(201);
    const hook = (await made.json()) as { id: string };
    expect((await call(`/v1/webhooks/${hook.id}`, { method: "DELETE" })).status).toBe(200);
  });
});

describe("the retry schedule", () => {
  const policy = { baseMs: 30_000, capMs: 3_600_000, windowMs: DELIVERY_WINDOW_MS };

  it("doubles from the base up to the cap", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 30].map((n) => retryDelay(n, policy))).toEqual([
      30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000, 3_600_000,
    ]);
  });

  it("stops at the end of the 24 h window: the last attempt is within it, none after", () => {
    const created = 0;
    let at = created;
    let attempt = 1;
    const times = [at];
    for (;;) {
      const next = nextAttemptAt(created, attempt, at, policy);
      if (next === null) break;
      at = next;
      attempt++;
      times.push(at);
    }
    expect(times[times.length - 1]).toBeLessThanOrEqual(DELIVERY_WINDOW_MS);
    expect(times[times.length - 1] + policy.capMs).toBeGreaterThan(DELIVERY_WINDOW_MS);
    // 30 s … 32 min (7 doubling steps) then hourly: 7 + 22 = 30 attempts in all.
    expect(attempt).toBe(30);
    // An attempt failing exactly at the window's end gets no next one.
    expect(nextAttemptAt(0, 3, DELIVERY_WINDOW_MS, policy)).toBeNull();
  });

  it("reads its base and cap from the edge's variables; the window stays 24 h", () => {
    expect(retryPolicy({})).toEqual(policy);
    expect(retryPolicy({ WEBHOOK_RETRY_BASE_MS: "500" })).toEqual({ ...policy, baseMs: 500 });
    expect(retryPolicy({ WEBHOOK_RETRY_BASE_MS: "500", WEBHOOK_RETRY_CAP_MS: "100" })).toEqual({ baseMs: 500, capMs: 500, windowMs: DELIVERY_WINDOW_MS });
    expect(retryPolicy({ WEBHOOK_RETRY_BASE_MS: "-1" }).baseMs).toBe(30_000);
  });
});
