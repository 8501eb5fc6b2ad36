// CORS (issue 14): a page on an origin listed in CORS_ORIGINS calls the REST API from a real
// browser (Debian's chromium via playwright-core) with session tokens in `Authorization`, which
// makes chromium send a preflight first; a page on an origin not listed is blocked by the
// browser. The pages are served by a tiny HTTP server on other ports (other origins) than the
// edge's, which runs with CORS_ORIGINS set to the first page's origin (and an entry that is not an
// origin, which the edge warns about: the warning shows how the edge's logs are printed).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, Page } from "playwright-core";
import { beforeAll, describe, expect, it } from "vitest";
import type { Edge } from "../scripts/stack.js";
import { launchChromium } from "./browser.js";
import { Api, SuiteCleanup, fetchOutput, startSuiteStack, stripEscapes, until } from "./harness.js";

const KEY = "cors-key";
/** A CORS_ORIGINS entry that is not an origin: ignored, with a warning in the edge's log. */
const BAD_ORIGIN = "ftp://bad.example";
// The browser goes first, the page servers last.
const cleanup = new SuiteCleanup();
let edge: Edge;
let browser: Browser;
let allowedOrigin: string;
let otherOrigin: string;

/** A page server: one empty HTML page at `/`, on a port of its own (its own origin). */
async function pageServer(): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>cors page</title><p>another origin</p>");
  });
  cleanup.last(() => server.close());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  allowedOrigin = await pageServer();
  otherOrigin = await pageServer();
  ({ edge } = await startSuiteStack(
    {
      apiKeys: `cors-t:${KEY}`,
      vars: { CORS_ORIGINS: `${allowedOrigin}, https://unused.example, ${BAD_ORIGIN}` },
      runners: [{ runnerId: "cors-runner" }],
    },
    cleanup,
  ));
  browser = await launchChromium();
  cleanup.first(() => browser.close());
});

async function openPage(origin: string): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${origin}/`);
  return page;
}

interface PageAnswer {
  ok: boolean;
  status?: number;
  body?: string;
  headers?: Record<string, string | null>;
  error?: string;
}

/** `fetch` run by the page itself (its origin, its CORS rules); the answer as the page can read it. */
function pageFetch(page: Page, target: string, init: { method?: string; headers?: Record<string, string>; body?: string }) {
  return page.evaluate(
    async ({ target, init }): Promise<PageAnswer> => {
      try {
        const res = await fetch(target, init);
        const headers: Record<string, string | null> = {};
        for (const name of ["content-type", "x-offset-from", "x-offset-to", "retry-after"]) headers[name] = res.headers.get(name);
        return { ok: true, status: res.status, body: await res.text(), headers };
      } catch (error) {
        return { ok: false, error: String(error) };
      }
    },
    { target, init },
  );
}

describe("CORS", () => {
  it("lets a page on a listed origin use the API with session tokens, and blocks a page on another", async () => {
    const api = new Api(edge.url, KEY);
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const token = async (role: string) => (await api.request("POST", `/v1/sessions/${s.id}/tokens`, { role })).body.token as string;
    const viewer = await token("viewer");
    const writer = await token("writer");
    const page = await openPage(allowedOrigin);
    const auth = (t: string) => ({ authorization: `Bearer ${t}` });

    // Reading with a viewer token (Authorization makes it a preflighted request).
    const got = await pageFetch(page, `${edge.url}/v1/sessions/${s.id}`, { headers: auth(viewer) });
    expect(got).toMatchObject({ ok: true, status: 200 });
    expect(JSON.parse(got.body ?? "")).toMatchObject({ id: s.id, status: "running" });

    // Typing with a writer token: a JSON POST.
    const typed = await pageFetch(page, `${edge.url}/v1/sessions/${s.id}/input`, {
      method: "POST",
      headers: { ...auth(writer), "content-type": "application/json" },
      body: JSON.stringify({ data: "echo cors-$((6*7))\n" }),
    });
    expect(typed).toMatchObject({ ok: true, status: 202 });
    expect(JSON.parse(typed.body ?? "")).toEqual({ bytes: 19, offset: expect.any(Number) as number });
    await until(async () => (await fetchOutput(api, s.id, 0)).bytes.includes("cors-42\r\n"), 10_000, "the page's input to run");

    // Errors are readable by the page too, and exposed headers are visible.
    const refused = await pageFetch(page, `${edge.url}/v1/sessions/${s.id}/input`, {
      method: "POST",
      headers: { ...auth(viewer), "content-type": "application/json" },
      body: JSON.stringify({ data: "echo no\n" }),
    });
    expect(refused).toMatchObject({ ok: true, status: 403 });
    expect(JSON.parse(refused.body ?? "").error.code).toBe("FORBIDDEN");
    const output = await pageFetch(page, `${edge.url}/v1/sessions/${s.id}/output?from=0`, { headers: auth(viewer) });
    expect(output).toMatchObject({ ok: true, status: 200 });
    expect(output.body).toContain("cors-42");
    expect(output.headers?.["x-offset-from"]).toBe("0");
    expect(Number(output.headers?.["x-offset-to"])).toBeGreaterThan(0);

    // A page on an origin that is not listed: the browser refuses to hand over the answer.
    const other = await openPage(otherOrigin);
    const blocked = await pageFetch(other, `${edge.url}/v1/sessions/${s.id}`, { headers: auth(viewer) });
    expect(blocked).toEqual({ ok: false, error: "TypeError: Failed to fetch" });
    const blockedSimple = await pageFetch(other, `${edge.url}/healthz`, {});
    expect(blockedSimple).toEqual({ ok: false, error: "TypeError: Failed to fetch" });
    const health = await pageFetch(page, `${edge.url}/healthz`, {});
    expect(health).toMatchObject({ ok: true, status: 200 });
    expect(JSON.parse(health.body ?? "")).toMatchObject({ ok: true }); // and the instance stack.ts named this edge
    await api.destroy(s.id);
  });

  it("lets a page on a listed origin retitle and resize an OpenCode PTY (PUT on /compat), and blocks a page on another", async () => {
    const api = new Api(edge.url, KEY);
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const put = (page: Page) =>
      pageFetch(page, `${edge.url}/compat/opencode/pty/${s.id}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ title: "from-a-page", size: { cols: 101, rows: 33 } }),
      });
    const renamed = await put(await openPage(allowedOrigin));
    expect(renamed).toMatchObject({ ok: true, status: 200 });
    expect(JSON.parse(renamed.body ?? "")).toMatchObject({ id: s.id, title: "from-a-page" });
    expect(await api.get(s.id)).toMatchObject({ label: "from-a-page", cols: 101, rows: 33 });
    expect(await put(await openPage(otherOrigin))).toEqual({ ok: false, error: "TypeError: Failed to fetch" });
    await api.destroy(s.id);
  });

  it("answers preflights from listed origins without credentials, and gives other origins no CORS headers", async () => {
    const preflight = (origin: string) =>
      fetch(`${edge.url}/v1/sessions/anything/input`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type" },
      });
    const allowed = await preflight(allowedOrigin);
    expect(allowed.status).toBe(204);
    const cors = (res: Response) => {
      const found: Record<string, string> = {};
      res.headers.forEach((value, name) => {
        if (name.startsWith("access-control-")) found[name] = value;
      });
      return found;
    };
    expect(cors(allowed)).toEqual({
      "access-control-allow-origin": allowedOrigin,
      "access-control-allow-methods": "GET,POST,PUT,PATCH,DELETE",
      "access-control-allow-headers": "Authorization,Content-Type,Last-Event-ID,Idempotency-Key",
      "access-control-expose-headers": "X-Offset-From,X-Offset-To,X-Offset,X-Cols,X-Rows,Retry-After",
      "access-control-max-age": "600",
    });
    expect(allowed.headers.get("vary")).toContain("Origin");

    const unlisted = await preflight(otherOrigin);
    expect(cors(unlisted)).toEqual({});
    expect(unlisted.status).toBe(401);
    const plain = await fetch(`${edge.url}/v1/sessions`, { headers: { origin: otherOrigin, authorization: `Bearer ${KEY}` } });
    expect(plain.status).toBe(200);
    expect(cors(plain)).toEqual({});
    const listed = await fetch(`${edge.url}/v1/sessions`, { headers: { origin: allowedOrigin, authorization: `Bearer ${KEY}` } });
    expect(listed.status).toBe(200);
    expect(listed.headers.get("access-control-allow-origin")).toBe(allowedOrigin);
  });

  it("logs a bad CORS_ORIGINS entry as a warning, which wrangler prints as one, not as an error", async () => {
    await fetch(`${edge.url}/healthz`, { headers: { origin: allowedOrigin } });
    const event = '"event":"cors.config"';
    await until(() => edge.output().includes(event), 10_000, "the edge's cors.config warning");
    // wrangler colours its labels; the line as a terminal shows it, without the colours.
    const lines = stripEscapes(edge.output()).split("\n").filter((l) => l.includes(event));
    expect(lines).toEqual([`▲ [WARNING] {"level":"warn",${event},"outcome":"bad_origin","entry":"${BAD_ORIGIN}"}`]);
  });
});
