// The page's papercuts (issue 25), in a real browser — Debian's chromium driven by playwright-core —
// against the real stack, on a phone (390×844) and a desktop (1280×800): the Share panel mints a
// viewer or writer link that opens as one in another page; a failed create leaves the page "not
// attached" with the API's error and when to retry; the desktop's session list leaves the terminal
// most of the width; a viewer's keystrokes raise a hint and never reach the session. Every wait has
// a deadline; none is a fixed sleep.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../scripts/stack.js";
import { DESKTOP, type Device, expectOnScreen, PHONE, pageSuite } from "./browser.js";
import { TENANTS } from "./global-setup.js";
import { Api, fetchOutput, onSharedStack, startSuiteStack, SuiteCleanup, until } from "./harness.js";

// test/ compiles without the DOM library: the little of it the functions run in the page use.
interface PageElement {
  textContent: string | null;
  dataset: Record<string, string | undefined>;
  getBoundingClientRect(): { left: number; top: number; right: number; bottom: number; width: number; height: number };
}
interface TextField extends PageElement {
  value: string;
  selectionStart: number | null;
  selectionEnd: number | null;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  activeElement: PageElement | null;
};
declare const navigator: { clipboard: { readText(): Promise<string> } };

/** Screenshots, kept after the run: in dist/screenshots (git-ignored), or PTYB_SHOTS_DIR. */
const SHOTS = process.env.PTYB_SHOTS_DIR ?? join(ROOT, "dist/screenshots");
mkdirSync(SHOTS, { recursive: true });
const shot = (name: string) => join(SHOTS, name);

const suite = onSharedStack();
const { url, api, cleanup } = suite;
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

const { openPage: openContext } = pageSuite(cleanup);

/** A page that may use the clipboard (the Share panel's Copy). */
function openPage(address: string, device: Device = DESKTOP): Promise<Page> {
  return openContext(address, device, (context) => context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(address).origin }));
}

async function signIn(page: Page, key: string = TENANTS.acme): Promise<void> {
  await page.locator("#apikey").fill(key);
  await page.locator("#signin").click();
  await page.locator("#sidebar").waitFor();
}

/** Creates a session from the page's "New session" and answers its id, once connected. */
async function createFromPage(page: Page, label: string): Promise<string> {
  // On a phone the drawer is open after signing in; on a desktop the column is.
  await page.locator("#label").fill(label);
  await page.locator("#new").click();
  await status(page, "open").waitFor();
  const id = new URLSearchParams(new URL(page.url()).hash.slice(1)).get("session");
  if (!id) throw new Error(`no session in ${page.url()}`);
  suite.purgeLater(id);
  return id;
}

function status(page: Page, state: string) {
  return page.locator(`#status[data-state="${state}"]`);
}

/** Waits until a rendered terminal row matches `want`. */
async function waitForRow(page: Page, want: RegExp, timeout = 15_000): Promise<void> {
  await page.waitForFunction(
    (spec: { source: string; flags: string }) =>
      Array.from(document.querySelectorAll("#terminal .xterm-rows > div"), (row) =>
        (row.textContent ?? "").replace(/\u00a0/g, " ").trimEnd(),
      ).some((row) => new RegExp(spec.source, spec.flags).test(row)),
    { source: want.source, flags: want.flags },
    { timeout },
  );
}

/** The session's whole output, over REST. */
async function logged(id: string): Promise<string> {
  return (await fetchOutput(api, id, 0)).bytes.toString("utf8");
}

/** Waits until the session's output (over REST) holds `text`; answers the output. */
function outputHas(id: string, text: string): Promise<string> {
  return until(async () => {
    const out = await logged(id);
    return out.includes(text) ? out : undefined;
  }, 15_000, `${JSON.stringify(text)} in session ${id}'s output`);
}

/** Opens the Share panel with `role` chosen; answers the link shown, once minted. */
async function shareLinkFor(page: Page, role: "viewer" | "writer"): Promise<string> {
  if (await page.locator("#share-panel").isHidden()) await page.locator("#share").click();
  await page.locator("#share-role").selectOption(role);
  await page.locator(`#share-panel[data-role="${role}"]`).waitFor();
  return page.locator("#share-link").inputValue();
}

describe("the Share panel", () => {
  for (const [device, name] of [
    [PHONE, "phone"],
    [DESKTOP, "desktop"],
  ] as const) {
    it(`mints a viewer link (the default) and a writer link, each opening as a share link (${name})`, async () => {
      const page = await openPage(url, device);
      await signIn(page);
      expect(await page.locator("#share").isHidden()).toBe(true); // nothing attached yet
      const id = await createFromPage(page, `papercuts-share-${name}`);

      await page.locator("#share").click();
      await page.locator('#share-panel[data-role="viewer"]').waitFor();
      expect(await page.locator("#share").getAttribute("aria-expanded")).toBe("true");
      expect(await page.locator("#share-role").inputValue()).toBe("viewer");
      const viewerLink = await page.locator("#share-link").inputValue();
      const fragment = new URLSearchParams(new URL(viewerLink).hash.slice(1));
      expect(viewerLink).toBe(`${url}/#session=${id}&token=${fragment.get("token")}`);
      expect(fragment.get("token")).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
      // Shown selected, so it can be copied by hand too.
      const selection = await page.evaluate(() => {
        const field = document.querySelector("#share-link") as TextField;
        return { focused: document.activeElement === field, start: field.selectionStart, end: field.selectionEnd };
      });
      expect(selection).toEqual({ focused: true, start: 0, end: viewerLink.length });
      const expiry = await page.locator("#share-expiry").textContent();
      expect(expiry).toMatch(/^Anyone with this link can watch \(not type\) until .+ \(1 hour\); it cannot be revoked before then\.$/);
      await page.locator("#share-copy").click();
      await page.locator("#share-copy", { hasText: "Copied" }).waitFor();
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(viewerLink);
      for (const part of ["#share-panel", "#share-role", "#share-ttl", "#share-link", "#share-copy", "#share-close", "#share"]) {
        await expectOnScreen(page, part);
      }
      await page.screenshot({ path: shot(`papercuts-share-${name}.png`) });

      // The viewer link, in a page of its own: attached read-only, the session's output shows.
      const viewer = await openPage(viewerLink, device);
      await status(viewer, "open").waitFor();
      expect(await viewer.locator("#readonly").isVisible()).toBe(true);
      expect(await viewer.locator("#share").isHidden()).toBe(true); // a share link cannot mint
      await api.input(id, "echo shared-$((6*7))\n");
      await waitForRow(viewer, /^shared-42$/);

      // The writer link (a day): it types into the session.
      await page.locator("#share-ttl").selectOption("86400");
      const writerLink = await shareLinkFor(page, "writer");
      expect(writerLink).not.toBe(viewerLink);
      expect(await page.locator("#share-expiry").textContent()).toMatch(/^Anyone with this link can watch and type until .+ \(1 day\);/);
      const writer = await openPage(writerLink, device);
      await status(writer, "open").waitFor();
      expect(await writer.locator("#readonly").isHidden()).toBe(true);
      await writer.locator("#terminal").click();
      await writer.keyboard.type("echo written-$((2+3))");
      await writer.keyboard.press("Enter");
      await outputHas(id, "written-5");

      // Closed (✕ or Esc), the panel forgets its link; detached, the button goes.
      await page.locator("#share-close").click();
      expect(await page.locator("#share-panel").isHidden()).toBe(true);
      expect(await page.locator("#share-link").inputValue()).toBe("");
      // Opened again, it starts from a viewer link for an hour, whatever was chosen last.
      await page.locator("#share").click();
      await page.locator('#share-panel[data-role="viewer"]').waitFor();
      expect(await page.locator("#share-ttl").inputValue()).toBe("3600");
      await page.keyboard.press("Escape");
      expect(await page.locator("#share-panel").isHidden()).toBe(true);
      expect(await page.locator("#share").getAttribute("aria-expanded")).toBe("false");
      if (device === PHONE) await page.locator("#menu").click();
      await page.locator("#detach").click();
      expect(await page.locator("#share").isHidden()).toBe(true);
    });
  }
});

describe("a viewer's keystrokes", () => {
  it("raise a read-only hint and never reach the session", async () => {
    const s = await suite.session({ ...BASH, label: "papercuts-viewer" });
    const minted = await api.request<{ token: string }>("POST", `/v1/sessions/${s.id}/tokens`, { role: "viewer" });
    expect(minted.status).toBe(201);
    const page = await openPage(`${url}/#session=${s.id}&token=${minted.body.token}`, PHONE);
    await status(page, "open").waitFor();
    await api.input(s.id, "echo ready-$((1+1))\n");
    await waitForRow(page, /^ready-2$/);
    expect(await page.locator("#readonly-hint").isHidden()).toBe(true);

    await page.locator("#terminal").click();
    await page.keyboard.type("echo typed-by-viewer");
    await page.keyboard.press("Enter");
    await page.locator("#readonly-hint").waitFor();
    expect(await page.locator("#readonly-hint").textContent()).toBe("read-only: this link can watch, not type");
    await expectOnScreen(page, "#readonly-hint");
    await page.screenshot({ path: shot("papercuts-readonly-hint-phone.png") });
    // Non-blocking: the terminal still shows what comes, and the hint goes away by itself.
    await api.input(s.id, "echo after-$((1+2))\n");
    await waitForRow(page, /^after-3$/);
    await page.locator("#readonly-hint").waitFor({ state: "hidden", timeout: 10_000 });

    // The session's output holds the owner's lines and nothing the viewer typed (the owner's
    // second line came after the viewer's keys: had they been sent, they would be in it).
    const out = await outputHas(s.id, "after-3");
    expect(out).not.toContain("typed-by-viewer");
    expect(await page.locator("#message").isHidden()).toBe(true);
  });
});

describe("the desktop session list", () => {
  it("leaves the terminal at least 70 columns at 900 px and 110 at 1280 px, and folds away", async () => {
    const page = await openPage(url, { viewport: { width: 900, height: 700 } });
    await signIn(page);
    const id = await createFromPage(page, "papercuts-wide");
    // The session was created at the size the page measured: its columns are the terminal's.
    const at900 = (await api.get(id)).cols;
    // A 900 px window less a 256 px list gives ~640 px: 75 cells of DejaVu Sans Mono at 14 px
    // (8.4 px each) less the scrollbar; 70 keeps most of an 80-column layout (it was 43).
    expect(at900).toBeGreaterThanOrEqual(70);
    await expectOnScreen(page, "#sessions tr.attached button");
    const list = await page.locator("#sidebar").boundingBox();
    expect(list?.width).toBeLessThanOrEqual(300);

    await page.setViewportSize({ width: 1280, height: 800 });
    const at1280 = await until(async () => {
      const cols = (await api.get(id)).cols;
      return cols > at900 ? cols : undefined;
    }, 10_000, "the session to widen with the window");
    expect(at1280).toBeGreaterThanOrEqual(110);
    await expectOnScreen(page, "#sessions tr.attached button");

    // The menu button folds the list away: the terminal takes the whole width.
    await page.locator("#menu").click();
    expect(await page.locator("#sidebar").isHidden()).toBe(true);
    await until(async () => (await api.get(id)).cols > at1280 + 25, 10_000, "the session to take the list's width");
  });
});

describe("a create the API refuses (429 QUOTA_EXCEEDED)", () => {
  const key = "papercuts-acme";
  // This block's own edge, allowing one create a minute, and its runner; stopped after it.
  const own = new SuiteCleanup();
  const workspace = own.tempFolder("ptybroker-papercuts-");
  let edgeUrl: string;
  let small: Api;

  beforeAll(async () => {
    const { edge } = await startSuiteStack(
      {
        apiKeys: `acme:${key}`,
        vars: { MAX_CREATES_PER_MINUTE: "1" },
        runners: [{ runnerId: "papercuts", env: { RUNNER_WORKSPACE: workspace } }],
      },
      own,
    );
    edgeUrl = edge.url;
    small = new Api(edge.url, key);
    // The minute's one create.
    const first = await small.create({ command: "/bin/sleep", args: ["120"] });
    own.session(small, first.id);
  });

  for (const [device, name] of [
    [PHONE, "phone"],
    [DESKTOP, "desktop"],
  ] as const) {
    it(`leaves the page "not attached", without extra keys, saying when to retry (${name})`, async () => {
      const page = await openPage(edgeUrl, device);
      await signIn(page, key);
      await page.locator("#new").click();
      const message = page.locator("#message", { hasText: /^QUOTA_EXCEEDED: / });
      await message.waitFor();
      const text = await message.textContent();
      const match = /^QUOTA_EXCEEDED: at most 1 sessions may be created per minute — try again in (\d+) s$/.exec(text ?? "");
      expect(match, String(text)).not.toBeNull();
      expect(Number(match?.[1])).toBeGreaterThanOrEqual(1);
      expect(Number(match?.[1])).toBeLessThanOrEqual(60);

      expect(await page.locator("#status").getAttribute("data-state")).toBe("idle");
      expect(await page.locator("#status").textContent()).toBe("not attached");
      expect(await page.locator("#keys").isHidden()).toBe(true);
      expect(await page.locator("#share").isHidden()).toBe(true);
      expect(await page.locator("#detach").isHidden()).toBe(true);
      // The list is open to try again from (a phone closed its drawer to measure the terminal).
      expect(await page.locator("#sidebar").isVisible()).toBe(true);
      await expectOnScreen(page, "#message");
      expect(new URLSearchParams(new URL(page.url()).hash.slice(1)).get("session")).toBeNull();
      await page.screenshot({ path: shot(`papercuts-failed-create-${name}.png`) });

      // Nothing attached under the list either: on a phone, with the drawer folded, the pane says so.
      if (device === PHONE) {
        await page.locator("#menu").click();
        expect(await page.locator("#sidebar").isHidden()).toBe(true);
        expect(await page.locator("#keys").isHidden()).toBe(true);
        await page.screenshot({ path: shot("papercuts-failed-create-phone-pane.png") });
      }
    });
  }
});
