// The web page (web/, served by the edge as static assets) in a real browser — Debian's chromium
// driven by playwright-core — against the real stack: sign in and type into a new session,
// reload and see it replayed, a read-only share link, the session list and kill, and a dropped
// connection that resumes by offset. Every wait has a deadline; none is a fixed sleep.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { type Browser, type BrowserContext, type Page, chromium } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { ROOT } from "../scripts/stack.js";
import { toolPath } from "../scripts/test-tools.js";
import { TENANTS } from "./global-setup.js";
import { Api, fetchOutput, until } from "./harness.js";
import { type TcpProxy, startProxy } from "./tcp-proxy.js";

// test/ compiles without the DOM library: the little of it the functions run in the page use.
interface PageElement {
  textContent: string | null;
  dataset: Record<string, string | undefined>;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
};
declare const MutationObserver: new (callback: () => void) => {
  observe(target: PageElement, options: { attributes: boolean; attributeFilter: string[] }): void;
};
declare const window: { statesSeen?: string[] };

/** Debian's chromium, found or provided by npm test's pretest step (scripts/test-tools.ts). */
const CHROMIUM = toolPath("chromium");
const url = inject("edgeUrl");
const api = new Api(url, TENANTS.acme);
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

let browser: Browser;
const created = new Set<string>();
const contexts = new Set<BrowserContext>();
const proxies = new Set<TcpProxy>();
/** Uncaught exceptions in the page: every test ends with none. */
let pageErrors: string[] = [];

beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Without the background-networking flags chromium keeps dialling out of this closed network.
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

afterEach(async () => {
  await Promise.all([...contexts].map((c) => c.close()));
  contexts.clear();
  const errors = pageErrors;
  pageErrors = [];
  expect(errors).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([...proxies].map((p) => p.close()));
  await Promise.all([...created].map((id) => api.destroy(id)));
});

async function openPage(address: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  contexts.add(context);
  const page = await context.newPage();
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(address);
  return page;
}

async function signIn(page: Page, key: string = TENANTS.acme): Promise<void> {
  await page.locator("#apikey").fill(key);
  await page.locator("#signin").click();
  await page.locator("#sidebar").waitFor();
}

/** The terminal's rendered rows (xterm.js's DOM renderer), trailing blanks trimmed. */
function rows(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll("#terminal .xterm-rows > div"), (row) =>
      (row.textContent ?? "").replace(/\u00a0/g, " ").trimEnd(),
    ),
  );
}

/** Waits until a rendered row is exactly `want` (or matches it); answers with all rows. */
async function waitForRow(page: Page, want: string | RegExp, timeout = 15_000): Promise<string[]> {
  const spec = typeof want === "string" ? { exact: want } : { source: want.source, flags: want.flags };
  try {
    const handle = await page.waitForFunction(
      (spec: { exact?: string; source?: string; flags?: string }) => {
        const all = Array.from(document.querySelectorAll("#terminal .xterm-rows > div"), (row) =>
          (row.textContent ?? "").replace(/\u00a0/g, " ").trimEnd(),
        );
        const pattern = spec.source === undefined ? null : new RegExp(spec.source, spec.flags);
        return all.some((row) => (pattern ? pattern.test(row) : row === spec.exact)) ? all : null;
      },
      spec,
      { timeout },
    );
    return (await handle.jsonValue()) as string[];
  } catch (error) {
    const shown = await rows(page).catch(() => []);
    throw new Error(`no terminal row ${String(want)}: ${(error as Error).message}\nrows: ${JSON.stringify(shown)}`);
  }
}

function status(page: Page, state: string) {
  return page.locator(`#status[data-state="${state}"]`);
}

/** The session id the page keeps in its URL fragment. */
function attachedId(page: Page): string {
  const id = new URLSearchParams(new URL(page.url()).hash.slice(1)).get("session");
  if (!id) throw new Error(`no session in ${page.url()}`);
  return id;
}

/** How `exitText` in web/main.ts words an ended session. */
function exitWords(s: { status: string; exitCode: number | null; signal: string | null; reason: string | null }): string {
  if (s.status !== "exited") return s.status;
  const how = s.exitCode !== null ? `code ${s.exitCode}` : s.signal;
  return s.reason && s.reason !== "exit" ? `exited (${how}, ${s.reason})` : `exited (${how})`;
}

describe("web page", () => {
  it("signs in, creates a session, types into it, and replays it after a reload", async () => {
    const page = await openPage(url);
    await signIn(page);
    await page.locator("#label").fill("web-e2e");
    await page.locator("#new").click();
    await status(page, "open").waitFor();
    expect(await page.locator("#status").textContent()).toBe("connected");
    const id = attachedId(page);
    created.add(id);

    // Created with the terminal's size; the login shell's prompt is on screen.
    const shown = await waitForRow(page, /[$#>]$/);
    const session = await api.get(id);
    expect(session.rows).toBe(shown.length);
    expect(session.label).toBe("web-e2e");
    expect(await page.locator("#readonly").isHidden()).toBe(true);

    await page.locator("#terminal").click();
    await page.keyboard.type("echo $((6*7))-web");
    await page.keyboard.press("Enter");
    const before = await waitForRow(page, "42-web");
    expect(before.some((row) => row.endsWith("echo $((6*7))-web"))).toBe(true);
    await page.locator(`#sessions tr[data-id="${id}"].attached`).waitFor();
    await page.screenshot({ path: join(ROOT, "docs/web.png") });

    // A reload attaches again (the fragment keeps the id, sessionStorage the key) and replays.
    await page.reload();
    await status(page, "open").waitFor();
    expect(attachedId(page)).toBe(id);
    const after = await waitForRow(page, "42-web");
    expect(after.some((row) => row.endsWith("echo $((6*7))-web"))).toBe(true);
    expect(after.filter((row) => row === "42-web")).toHaveLength(1);

    // Still a live terminal after the replay.
    await page.keyboard.type("echo again-$((5+5))");
    await page.keyboard.press("Enter");
    await waitForRow(page, "again-10");

    // A smaller window: the terminal fits it again and the session takes the new size.
    await page.setViewportSize({ width: 1000, height: 480 });
    await page.waitForFunction(
      (before: number) => Array.from(document.querySelectorAll("#terminal .xterm-rows > div")).length < before,
      after.length,
      { timeout: 10_000 },
    );
    const smaller = (await rows(page)).length;
    await until(async () => (await api.get(id)).rows === smaller, 10_000, `the session to resize to ${smaller} rows`);
    await page.keyboard.type("echo rows=$(tput lines)");
    await page.keyboard.press("Enter");
    await waitForRow(page, `rows=${smaller}`);
  });

  it("opens a share link with a viewer token read-only: output shows, typing never reaches the session", async () => {
    const s = await api.create({ ...BASH, label: "web-e2e-viewer" });
    created.add(s.id);
    const minted = await api.request<{ token: string }>("POST", `/v1/sessions/${s.id}/tokens`, { role: "viewer" });
    expect(minted.status).toBe(201);

    const page = await openPage(`${url}/#session=${s.id}&token=${minted.body.token}`);
    await status(page, "open").waitFor();
    await page.locator("#readonly").waitFor();
    expect(await page.locator("#readonly").textContent()).toBe("read-only");
    expect(await page.locator("#signin-form").isHidden()).toBe(true);
    expect(await page.locator("#sidebar").isHidden()).toBe(true);

    await api.input(s.id, "echo viewer-$((40+2))\n");
    await waitForRow(page, "viewer-42");

    await page.locator("#terminal").click();
    await page.keyboard.type("echo typed-by-viewer");
    await page.keyboard.press("Enter");
    await api.input(s.id, "echo after-$((1+1))\n");
    const shown = await waitForRow(page, "after-2");
    expect(shown.join("\n")).not.toContain("typed-by-viewer");
    const logged = (await fetchOutput(api, s.id, 0)).bytes.toString("utf8");
    expect(logged).toContain("after-2");
    expect(logged).not.toContain("typed-by-viewer");
    expect(await page.locator("#message").isHidden()).toBe(true);
  });

  it("lists sessions, refuses a wrong key, attaches from the list and kills", async () => {
    const page = await openPage(url);
    await page.locator("#apikey").fill("not-a-key");
    await page.locator("#signin").click();
    await page.locator("#message", { hasText: /^UNAUTHORIZED: / }).waitFor();
    expect(await page.locator("#sidebar").isHidden()).toBe(true);
    await signIn(page);
    expect(await page.locator("#message").isHidden()).toBe(true);

    const label = `web-e2e-list-${randomBytes(4).toString("hex")}`;
    const s = await api.create({ ...BASH, label });
    created.add(s.id);
    await page.locator("#refresh").click();
    const row = page.locator("#sessions tbody tr", { hasText: label });
    await row.waitFor();
    expect(await row.getAttribute("data-id")).toBe(s.id);
    expect(await row.locator("td.status").textContent()).toBe("running");

    await row.locator("button.attach").click();
    await status(page, "open").waitFor();
    expect(attachedId(page)).toBe(s.id);
    await api.input(s.id, "echo listed-$((3*3))\n");
    await waitForRow(page, "listed-9");

    await row.locator("button.kill").click();
    const ended = await until(
      async () => {
        const now = await api.get(s.id);
        return now.status === "exited" ? now : undefined;
      },
      15_000,
      "the killed session to exit",
    );
    await page.locator(`#sessions tr[data-id="${s.id}"][data-status="exited"]`).waitFor();
    expect(await page.locator(`#sessions tr[data-id="${s.id}"] td.status`).textContent()).toBe(exitWords(ended));
    await status(page, "exited").waitFor();
    expect(await page.locator("#status").textContent()).toBe(exitWords(ended));
    expect(await page.locator("#message").isHidden()).toBe(true);
  });

  it("shows the API's error for a forged share link and for a session that does not exist", async () => {
    const forged = await openPage(`${url}/#session=nope&token=e30.e30.forged`);
    await forged.locator("#message", { hasText: /^UNAUTHORIZED: / }).waitFor();
    await status(forged, "closed").waitFor();
    expect(await forged.locator("#signin-form").isHidden()).toBe(true);

    const page = await openPage(url);
    await signIn(page);
    await page.goto(`${url}/#session=no-such-session`);
    await page.locator("#message", { hasText: /^NOT_FOUND: / }).waitFor();
    await status(page, "closed").waitFor();
  });

  it("shows reconnecting when the connection drops, then resumes without losing output", async () => {
    // The browser reaches the edge through a TCP proxy that can reset every connection at once.
    const proxy = await startProxy(Number(new URL(url).port));
    proxies.add(proxy);
    const page = await openPage(proxy.url);
    await signIn(page);
    const s = await api.create({ ...BASH, label: "web-e2e-drop" });
    created.add(s.id);
    await page.locator("#refresh").click();
    await page.locator(`#sessions tr[data-id="${s.id}"] button.attach`).click();
    await status(page, "open").waitFor();
    // The page gave the session its size: all the ticks below fit on one screen.
    const screenRows = (await rows(page)).length;
    await until(async () => (await api.get(s.id)).rows === screenRows, 10_000, "the session to take the page's size");
    expect(screenRows).toBeGreaterThan(30);

    await page.evaluate(() => {
      const badge = document.querySelector("#status");
      if (!badge) throw new Error("no #status");
      const seen: string[] = [];
      window.statesSeen = seen;
      new MutationObserver(() => seen.push(badge.dataset.state ?? "")).observe(badge, {
        attributes: true,
        attributeFilter: ["data-state"],
      });
    });
    await api.input(s.id, "for i in $(seq 1 24); do echo tick-$i; sleep 0.1; done; echo loop-$((3*11))\n");
    await waitForRow(page, "tick-4");
    const connections = proxy.connections();
    proxy.cutAll();
    expect(connections).toBeGreaterThan(0);

    await page.waitForFunction(() => (window.statesSeen ?? []).includes("reconnecting"), undefined, { timeout: 15_000 });
    const shown = await waitForRow(page, "loop-33", 20_000);
    await status(page, "open").waitFor();
    const seen = await page.evaluate(() => window.statesSeen ?? []);
    expect(seen.slice(seen.indexOf("reconnecting"))).toContain("open");
    // Every tick once, in order: nothing lost across the drop, nothing replayed twice.
    const ticks = shown.filter((row) => /^tick-\d+$/.test(row));
    expect(ticks).toEqual(Array.from({ length: 24 }, (_, i) => `tick-${i + 1}`));
    expect(await page.locator("#message").isHidden()).toBe(true);
  });
});
