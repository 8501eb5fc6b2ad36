// The web page (web/, served by the edge as static assets) in a real browser — Debian's chromium
// driven by playwright-core — against the real stack: sign in and type into a new session,
// reload and see it replayed, a read-only share link, the session list and kill, and a dropped
// connection that resumes by offset. Every wait has a deadline; none is a fixed sleep.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ROOT } from "../scripts/stack.js";
import { mkdirSync, readFileSync } from "node:fs";
import { DESKTOP, expectOnScreen, PHONE, pageSuite } from "./browser.js";
import { TENANTS } from "./global-setup.js";
import { fetchOutput, onSharedStack, until } from "./harness.js";
import { startProxy } from "./tcp-proxy.js";

// test/ compiles without the DOM library: the little of it the functions run in the page use.
interface PageElement {
  textContent: string | null;
  dataset: Record<string, string | undefined>;
  getBoundingClientRect(): { left: number; top: number; right: number; bottom: number; width: number; height: number };
}
interface Drawing {
  drawImage(image: unknown, x: number, y: number): void;
  getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray };
}
declare const createImageBitmap: (blob: unknown) => Promise<{ width: number; height: number }>;
declare const Blob: new (parts: unknown[], options: { type: string }) => unknown;
declare const OffscreenCanvas: new (w: number, h: number) => { getContext(kind: "2d"): Drawing | null };
declare const atob: (base64: string) => string;
declare const getComputedStyle: (element: PageElement) => { fontSize: string };
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
};
declare const MutationObserver: new (callback: () => void) => {
  observe(target: PageElement, options: { attributes: boolean; attributeFilter: string[] }): void;
};
declare const window: { statesSeen?: string[] };

/**
 * Screenshots are the suite's artefacts, kept in dist/screenshots (git-ignored) after every run;
 * `PTYB_SCREENSHOTS=docs npm test -- test/web.test.ts` writes them over the README's images.
 */
const SHOTS = process.env.PTYB_SCREENSHOTS === "docs" ? join(ROOT, "docs") : join(ROOT, "dist/screenshots");
mkdirSync(SHOTS, { recursive: true });
const shot = (name: string) => join(SHOTS, name);
// The browser goes first; then the sessions the tests made and the proxies.
const suite = onSharedStack();
const { url, api, cleanup } = suite;
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

const { openPage } = pageSuite(cleanup);

async function signIn(page: Page, key: string = TENANTS.acme): Promise<void> {
  await page.locator("#apikey").fill(key);
  await page.locator("#signin").click();
  await page.locator("#sidebar").waitFor();
}

/** The size the page's terminal is drawn at (xterm's cols and rows) and the scale it is shown at. */
async function drawn(page: Page): Promise<{ cols: number; rows: number; scale: number }> {
  const data = await page.evaluate(() => {
    const box = document.querySelector("#terminal");
    return { cols: box?.dataset.cols, rows: box?.dataset.rows, scale: box?.dataset.scale };
  });
  return { cols: Number(data.cols), rows: Number(data.rows), scale: Number(data.scale) };
}

/** What fits the page's terminal area at its font size: what a writer asks the session for. */
async function fits(page: Page): Promise<{ cols: number; rows: number }> {
  const text = await page.evaluate(() => document.querySelector("#terminal")?.dataset.fits ?? "");
  const [cols, rows] = text.split("x").map(Number);
  if (!cols || !rows) throw new Error(`no size fits the terminal: ${JSON.stringify(text)}`);
  return { cols, rows };
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

/** How `exitText` in web/ui.ts words an ended session. */
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
    suite.purgeLater(id);

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
    await page.screenshot({ path: shot("web.png") });

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
    suite.purgeLater(s.id);
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

  it("downloads the open session's recording (asciicast v2, o events equal to the output) on a phone and a desktop; shows a pty: false session's stderr", async () => {
    const s = await api.create({ pty: false, command: "/bin/sh", args: ["-c", "echo to-out; echo to-err >&2; read x"] });
    suite.purgeLater(s.id);
    const minted = await api.request<{ token: string }>("POST", `/v1/sessions/${s.id}/tokens`, { role: "viewer" });
    for (const [device, name] of [
      [PHONE, "recording-phone.png"],
      [DESKTOP, "recording-desktop.png"],
    ] as const) {
      const page = await openPage(`${url}/#session=${s.id}&token=${minted.body.token}`, device);
      await status(page, "open").waitFor();
      await waitForRow(page, "to-err");
      await waitForRow(page, "to-out");
      await expectOnScreen(page, "#record");
      expect(await page.locator("#record").innerText()).toBe(device === PHONE ? ".cast" : "Download recording (.cast)");
      await page.screenshot({ path: shot(name) });
      const [download] = await Promise.all([page.waitForEvent("download"), page.locator("#record").click()]);
      expect(download.suggestedFilename()).toBe(`${s.id}.cast`);
      const path = await download.path();
      const text = readFileSync(path, "utf8");
      const [header, ...events] = text.trimEnd().split("\n").map((line) => JSON.parse(line) as unknown);
      expect(header).toMatchObject({ version: 2, width: 80, height: 24 });
      const shown = (events as [number, string, string][]).filter((e) => e[1] === "o").map((e) => e[2]).join("");
      expect(shown).toBe((await fetchOutput(api, s.id, 0)).bytes.toString("utf8"));
      // two pipes, read apart: either line may come first
      expect(shown.split("\n").sort()).toEqual(["", "to-err", "to-out"]);
    }
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
    suite.purgeLater(s.id);
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
    cleanup.proxy(proxy);
    const page = await openPage(proxy.url);
    await signIn(page);
    const s = await api.create({ ...BASH, label: "web-e2e-drop" });
    suite.purgeLater(s.id);
    await page.locator("#refresh").click();
    await page.locator(`#sessions tr[data-id="${s.id}"] button.attach`).click();
    await status(page, "open").waitFor();
    // The page gave the session its size (nobody had typed yet): all the ticks below fit on one
    // screen. The terminal draws the session's size, so it has those rows once the server said so.
    const screenRows = (await fits(page)).rows;
    await until(async () => (await api.get(s.id)).rows === screenRows, 10_000, `the session to take the page's ${screenRows} rows`);
    await until(async () => (await rows(page)).length === screenRows, 10_000, `the page to draw ${screenRows} rows`);
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
  it("on a phone (390×844): a full-screen terminal of at least 40 columns, every control on screen, extra keys that send the right bytes", async () => {
    const page = await openPage(url, PHONE);
    await signIn(page);
    // Nothing attached yet: the list is open, full width, with its buttons on screen.
    for (const control of ["#menu", "#label", "#new", "#refresh", "#show-ended", "#purge-ended", "#signout-drawer"]) {
      await expectOnScreen(page, control);
    }
    await page.locator("#label").fill("web-e2e-phone");
    await page.locator("#new").click();
    await status(page, "open").waitFor();
    const id = attachedId(page);
    suite.purgeLater(id);
    // The drawer gave way to the terminal, created with what fits the phone's screen.
    expect(await page.locator("#sidebar").isHidden()).toBe(true);
    const session = await api.get(id);
    expect(session.cols).toBeGreaterThanOrEqual(40);
    await until(
      async () => JSON.stringify(await drawn(page)) === JSON.stringify({ cols: session.cols, rows: session.rows, scale: 1 }),
      10_000,
      `the terminal drawn at the session's ${session.cols}×${session.rows}, unscaled`,
    );
    const fontSize = await page.evaluate(() => {
      const row = document.querySelector("#terminal .xterm-rows > div");
      return row ? Number.parseFloat(getComputedStyle(row).fontSize) : 0;
    });
    expect(fontSize).toBeGreaterThanOrEqual(14);

    await waitForRow(page, /[$#>]$/);
    await page.locator("#terminal").click();
    await page.keyboard.type("echo $((6*7))-phone");
    await page.keyboard.press("Enter");
    await waitForRow(page, "42-phone");
    for (const control of ["#menu", "#status", "#record", "#detach", "#keys button", "#terminal .xterm-screen"]) {
      await expectOnScreen(page, control);
    }
    expect(await page.locator("#keys button").count()).toBe(9);

    // The extra keys, as `cat -A` sees them: Esc, Tab, ↑ (normal cursor mode), | and ~.
    const key = (name: string) => page.locator(`#keys button[data-key="${name}"]`).click();
    await page.keyboard.type("cat -A");
    await page.keyboard.press("Enter");
    for (const name of ["esc", "tab", "up", "pipe", "tilde"]) await key(name);
    await page.keyboard.press("Enter");
    await waitForRow(page, "^[^I^[[A|~$");
    // Ctrl is sticky for the next key typed: Ctrl, then "c" is ^C and ends cat.
    await key("ctrl");
    expect(await page.locator('#keys button[data-key="ctrl"]').getAttribute("aria-pressed")).toBe("true");
    await page.keyboard.type("c");
    expect(await page.locator('#keys button[data-key="ctrl"]').getAttribute("aria-pressed")).toBe("false");
    await page.keyboard.type("echo after-ctrl-c-$((2*4))");
    await page.keyboard.press("Enter");
    await waitForRow(page, "after-ctrl-c-8");
    // In application cursor mode (what vim and less turn on) the arrows send ESC O A…D.
    await page.keyboard.type("printf '\\e[?1h'; cat -A; printf '\\e[?1l'");
    await page.keyboard.press("Enter");
    await until(async () => (await rows(page)).some((row) => row.endsWith("printf '\\e[?1l'")), 10_000, "the command to echo");
    for (const name of ["up", "left", "down", "right"]) await key(name);
    await page.keyboard.press("Enter");
    await waitForRow(page, "^[OA^[OD^[OB^[OC$");
    await key("ctrl");
    await page.keyboard.type("d"); // ^D: end of input for cat
    await page.keyboard.type("clear");
    await page.keyboard.press("Enter");
    await page.keyboard.type("ls -1 /etc | head -n 6; echo container_info.json; echo $((6*7))-phone");
    await page.keyboard.press("Enter");
    await waitForRow(page, "42-phone");
    await page.screenshot({ path: shot("web-phone.png") });

    // The list is a drawer over the terminal: full width, every button on screen.
    await page.locator("#menu").click();
    await page.locator(`#sessions tr[data-id="${id}"].attached`).waitFor();
    for (const control of ["#label", "#new", "#refresh", "#show-ended", "#purge-ended", "#signout-drawer", `#sessions tr[data-id="${id}"] button`]) {
      await expectOnScreen(page, control);
    }
    const drawer = await page.locator("#sidebar").boundingBox();
    expect(drawer?.width).toBe(390);
    await page.screenshot({ path: shot("web-phone-list.png") });
    await page.locator("#menu").click();
    expect(await page.locator("#sidebar").isHidden()).toBe(true);
    expect(await page.locator("#message").isHidden()).toBe(true);

    // Sign out is at the foot of the list on a phone.
    await page.locator("#menu").click();
    await page.locator("#signout-drawer").click();
    await page.locator("#signin-form").waitFor();
    expect(await page.locator("#pane").isHidden()).toBe(true);
  });

  it("a phone viewer and a desktop writer on one session: the session keeps the writer's size, the phone shows it scaled", async () => {
    const desktop = await openPage(url);
    await signIn(desktop);
    await desktop.locator("#label").fill("web-e2e-shared");
    await desktop.locator("#new").click();
    await status(desktop, "open").waitFor();
    const id = attachedId(desktop);
    suite.purgeLater(id);
    const wide = await drawn(desktop);
    expect(wide.cols).toBeGreaterThan(80);

    const minted = await api.request<{ token: string }>("POST", `/v1/sessions/${id}/tokens`, { role: "viewer" });
    const phone = await openPage(`${url}/#session=${id}&token=${minted.body.token}`, PHONE);
    await status(phone, "open").waitFor();
    await desktop.locator("#terminal").click();
    await desktop.keyboard.type("echo writer-$((2+3)); tput cols");
    await desktop.keyboard.press("Enter");
    await waitForRow(desktop, "writer-5");
    await waitForRow(phone, "writer-5");
    await waitForRow(phone, String(wide.cols));

    // The session has the desktop's size; the phone draws that size, scaled down to fit.
    const session = await api.get(id);
    expect({ cols: session.cols, rows: session.rows }).toEqual({ cols: wide.cols, rows: wide.rows });
    const small = await drawn(phone);
    expect({ cols: small.cols, rows: small.rows }).toEqual({ cols: wide.cols, rows: wide.rows });
    expect(small.scale).toBeLessThan(1);
    await expectOnScreen(phone, "#terminal .xterm-screen");
    expect(await phone.locator("#keys").isHidden()).toBe(true); // a viewer has nothing to type
    await phone.screenshot({ path: shot("web-phone-viewer.png") });
    // A tap on the size shows the session at actual size, scrolled; another scales it again.
    await phone.locator("#size", { hasText: `${wide.cols}×${wide.rows} fit` }).click();
    await phone.locator("#size", { hasText: `${wide.cols}×${wide.rows} 1:1` }).waitFor();
    expect((await drawn(phone)).scale).toBe(1);
    await phone.locator("#size").click();
    await phone.locator("#size", { hasText: /fit$/ }).waitFor();
    expect((await drawn(phone)).scale).toBeLessThan(1);

    // The phone turned sideways is still a viewer: the session keeps its size.
    await phone.setViewportSize({ width: 844, height: 390 });
    await desktop.keyboard.type("echo still-$((3+4))");
    await desktop.keyboard.press("Enter");
    await waitForRow(phone, "still-7");
    const after = await api.get(id);
    expect({ cols: after.cols, rows: after.rows }).toEqual({ cols: wide.cols, rows: wide.rows });
    expect(await desktop.locator("#message").isHidden()).toBe(true);
    expect(await phone.locator("#message").isHidden()).toBe(true);
  });

  it("two writers, a phone and a desktop: the session's size follows the one that typed last; the other draws it scaled", async () => {
    const desktop = await openPage(url);
    await signIn(desktop);
    await desktop.locator("#new").click();
    await status(desktop, "open").waitFor();
    const id = attachedId(desktop);
    suite.purgeLater(id);
    const wide = await drawn(desktop);
    await desktop.locator("#terminal").click();
    await desktop.keyboard.type("echo desk-$((1+1))");
    await desktop.keyboard.press("Enter");
    await waitForRow(desktop, "desk-2");

    // The phone signs in with the session in its URL: it attaches and asks for its own size,
    // which the server keeps for later, since the desktop typed last.
    const phone = await openPage(`${url}/#session=${id}`, PHONE);
    await phone.locator("#apikey").fill(TENANTS.acme);
    await phone.locator("#signin").click();
    await status(phone, "open").waitFor();
    await api.input(id, "echo sync-$((4+4))\n");
    await waitForRow(phone, "sync-8");
    expect(await api.get(id)).toMatchObject({ cols: wide.cols, rows: wide.rows });
    const narrow = await fits(phone);
    expect(narrow.cols).toBeGreaterThanOrEqual(40);
    const scaled = await drawn(phone);
    expect({ cols: scaled.cols, rows: scaled.rows }).toEqual({ cols: wide.cols, rows: wide.rows });
    expect(scaled.scale).toBeLessThan(1);
    expect(await phone.locator("#size").textContent()).toBe(`${wide.cols}×${wide.rows} fit`);

    // The phone types: the session takes the phone's size; the desktop draws it as it is.
    await phone.locator("#terminal").click();
    await phone.keyboard.type("echo phone-$((3+3))");
    await phone.keyboard.press("Enter");
    await waitForRow(desktop, "phone-6");
    await until(async () => (await api.get(id)).cols === narrow.cols, 10_000, `the session to take the phone's ${narrow.cols} columns`);
    expect(await api.get(id)).toMatchObject(narrow);
    await until(async () => (await drawn(phone)).scale === 1, 10_000, "the phone to draw the session unscaled");
    await until(async () => (await drawn(desktop)).cols === narrow.cols, 10_000, "the desktop to draw the phone's size");
    expect(await drawn(desktop)).toEqual({ ...narrow, scale: 1 });
    await desktop.screenshot({ path: shot("web-desktop-follows-phone.png") });

    // The desktop types again: back to the desktop's size.
    await desktop.keyboard.type("echo desk-again-$((2+2))");
    await desktop.keyboard.press("Enter");
    await waitForRow(phone, "desk-again-4");
    await until(async () => (await api.get(id)).cols === wide.cols, 10_000, "the session to take the desktop's size again");
    expect(await api.get(id)).toMatchObject({ cols: wide.cols, rows: wide.rows });
    await until(async () => (await drawn(phone)).cols === wide.cols, 10_000, "the phone to draw the desktop's size");
    expect(await desktop.locator("#message").isHidden()).toBe(true);
    expect(await phone.locator("#message").isHidden()).toBe(true);
  });

  it("a writer whose size applies while it is still replaying a long history draws that size once live", async () => {
    const s = await api.create({ ...BASH, cols: 80, rows: 24, label: "web-e2e-long-history" });
    suite.purgeLater(s.id);
    await api.input(s.id, "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo big-$((5*5))\n");
    await until(async () => (await api.get(s.id)).offset > 3_000_000, 30_000, "3 MB of output");
    // `from=0`: the whole history is replayed, as asked (without it the page draws the screen).
    const page = await openPage(`${url}/#session=${s.id}&from=0`);
    await page.locator("#apikey").fill(TENANTS.acme);
    await page.locator("#signin").click();
    await waitForRow(page, "big-25", 30_000);
    const want = await fits(page);
    await until(async () => (await api.get(s.id)).cols === want.cols, 10_000, `the session to take the page's ${want.cols} columns`);
    await until(async () => (await drawn(page)).cols === want.cols, 10_000, `the page to draw ${want.cols} columns`);
    expect(await drawn(page)).toEqual({ ...want, scale: 1 });
  });

  it("attaches to a long history by drawing its current screen: a few KiB over the socket, then live", async () => {
    const s = await api.create({ ...BASH, cols: 80, rows: 24, label: "web-e2e-screen" });
    suite.purgeLater(s.id);
    await api.input(s.id, "head -c 3000000 /dev/zero | tr '\\0' y; echo; echo screen-$((6*7))\n");
    await until(async () => (await api.get(s.id)).offset > 3_000_000, 30_000, "3 MB of output");
    const page = await openPage(`${url}/#session=${s.id}`);
    let received = 0;
    page.on("websocket", (socket) => {
      socket.on("framereceived", (frame) => {
        received += typeof frame.payload === "string" ? Buffer.byteLength(frame.payload) : frame.payload.byteLength;
      });
    });
    await signIn(page);
    await waitForRow(page, "screen-42", 30_000);
    expect(received).toBeLessThan(64 * 1024);
    // Live output follows the screen.
    await api.input(s.id, "echo after-$((6*8))\n");
    await waitForRow(page, "after-48", 15_000);
    expect(received).toBeLessThan(64 * 1024);
  });

  it("draws underscores: the pixels under a row of `_` are lit", async () => {
    const page = await openPage(url);
    await signIn(page);
    await page.locator("#new").click();
    await status(page, "open").waitFor();
    suite.purgeLater(attachedId(page));
    await waitForRow(page, /[$#>]$/);
    await page.locator("#terminal").click();
    await page.keyboard.type("printf '%.0s_' $(seq 1 40); echo; echo");
    await page.keyboard.press("Enter");
    const underscores = "_".repeat(40);
    const shown = await waitForRow(page, underscores);
    const index = shown.indexOf(underscores);

    // Where that row is inside the terminal's screen, and how wide its 40 cells are.
    const where = await page.evaluate((index: number) => {
      const screen = document.querySelector("#terminal .xterm-screen");
      const row = Array.from(document.querySelectorAll("#terminal .xterm-rows > div"))[index];
      const box = document.querySelector("#terminal");
      if (!screen || !row || !box) throw new Error("no terminal");
      const s = screen.getBoundingClientRect();
      const r = row.getBoundingClientRect();
      const cell = s.width / Number(box.dataset.cols);
      // The row's box, and half the (empty) row below it, where a glyph's descent may reach.
      const half = Math.floor(r.height / 2);
      return { top: Math.round(r.top - s.top), bottom: Math.round(r.bottom - s.top) + half, left: 0, right: Math.floor(cell * 40) };
    }, index);
    const png = await page.locator("#terminal .xterm-screen").screenshot();
    // Decoded in the page (createImageBitmap, a canvas): how many pixels are lit on each pixel row of the cells.
    const lit = await page.evaluate(
      async (arg: { png: string; top: number; bottom: number; left: number; right: number }) => {
        const bytes = Uint8Array.from(atob(arg.png), (c) => c.charCodeAt(0));
        const bitmap = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
        const context = new OffscreenCanvas(bitmap.width, bitmap.height).getContext("2d");
        if (!context) throw new Error("no 2d context");
        context.drawImage(bitmap, 0, 0);
        const { data } = context.getImageData(0, 0, bitmap.width, bitmap.height);
        const counts: number[] = [];
        for (let y = arg.top; y < arg.bottom; y++) {
          let n = 0;
          for (let x = arg.left; x < arg.right; x++) {
            const i = (y * bitmap.width + x) * 4;
            if ((data[i] ?? 0) + (data[i + 1] ?? 0) + (data[i + 2] ?? 0) > 3 * 96) n++;
          }
          counts.push(n);
        }
        return counts;
      },
      { png: png.toString("base64"), ...where },
    );
    // A line of lit pixels across (nearly) all 40 cells, below the middle of the row. (With
    // xterm's lineHeight at 1 there is none: the line is cut off, and `_` reads as a space.)
    const best = Math.max(...lit);
    const at = lit.indexOf(best);
    expect(best, `lit pixels per pixel row: ${JSON.stringify(lit)}`).toBeGreaterThanOrEqual(0.8 * (where.right - where.left));
    expect(at, `lit pixels per pixel row: ${JSON.stringify(lit)}`).toBeGreaterThanOrEqual(lit.length / 2);
  });

  it("hides ended sessions unless asked, and purges them one by one or all at once", async () => {
    const tag = randomBytes(4).toString("hex");
    const running = await api.create({ ...BASH, label: `web-e2e-running-${tag}` });
    const ended = [await api.create({ ...BASH, label: `web-e2e-ended-a-${tag}` }), await api.create({ ...BASH, label: `web-e2e-ended-b-${tag}` })];
    for (const s of [running, ...ended]) suite.purgeLater(s.id);
    for (const s of ended) await api.input(s.id, "exit 0\n");
    for (const s of ended) {
      await until(async () => (await api.get(s.id)).status === "exited", 15_000, `${s.id} to exit`);
    }

    const page = await openPage(url);
    await signIn(page);
    await page.locator(`#sessions tr[data-id="${running.id}"]`).waitFor();
    for (const s of ended) expect(await page.locator(`#sessions tr[data-id="${s.id}"]`).count()).toBe(0);
    expect(Number(await page.locator("#ended-count").textContent())).toBeGreaterThanOrEqual(2);

    await page.locator("#show-ended").check();
    const [first, second] = ended as [(typeof ended)[0], (typeof ended)[0]];
    const firstRow = page.locator(`#sessions tr[data-id="${first.id}"]`);
    expect(await firstRow.locator("td.status").textContent()).toBe("exited (code 0)");
    expect(await page.locator(`#sessions tr[data-id="${running.id}"] button.purge`).count()).toBe(0);
    // Long labels and statuses are cut short: every button of the list is inside its column.
    const column = await page.locator("#sidebar").boundingBox();
    for (const box of await page.locator("#sessions button").evaluateAll((all) =>
      all.map((e) => (e as unknown as PageElement).getBoundingClientRect().right),
    )) {
      expect(box).toBeLessThanOrEqual((column?.x ?? 0) + (column?.width ?? 0));
    }
    await page.screenshot({ path: shot("web-ended.png") });
    await firstRow.locator("button.purge").click();
    await firstRow.waitFor({ state: "detached" });
    expect((await api.request("GET", `/v1/sessions/${first.id}`)).status).toBe(404);
    await page.locator(`#sessions tr[data-id="${second.id}"]`).waitFor();

    // "Purge ended" takes a second click, then every ended session goes; the running one stays.
    await page.locator("#show-ended").uncheck();
    await page.locator("#purge-ended").click();
    await page.locator("#purge-ended", { hasText: /Click again/ }).waitFor();
    expect((await api.request("GET", `/v1/sessions/${second.id}`)).status).toBe(200);
    await page.locator("#purge-ended").click();
    await until(async () => (await api.request("GET", `/v1/sessions/${second.id}`)).status === 404, 15_000, "the purge");
    await page.locator("#ended-count", { hasText: /^0$/ }).waitFor();
    expect(await page.locator("#purge-ended").isDisabled()).toBe(true);
    expect((await api.get(running.id)).status).toBe("running");
    expect(await page.locator("#message").isHidden()).toBe(true);
  });
});
