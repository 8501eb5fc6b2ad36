// Input exactly once on the page (docs/protocol.md §5, "Input exactly once"), in Chromium on the
// shared stack, through test/tcp-proxy.ts: the repro, keys typed into a silent drop before
// the page notices it and after, runs once as exactly `echo page-early-late`, at a phone's size
// and a desktop's; while it is undelivered the page shows it (web/pending.ts, `#pending`), and
// it goes once delivered. A queue that fills up (`#inputQueueBytes=64`) is said in the message
// line, and keys typed into an ended session raise no error. The SDK's half is test/input-once.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ROOT } from "../scripts/stack.js";
import { DESKTOP, type Device, expectOnScreen, PHONE, pageSuite } from "./browser.js";
import { TENANTS } from "./global-setup.js";
import { fetchOutput, onSharedStack, until } from "./harness.js";
import { startProxy, type TcpProxy } from "./tcp-proxy.js";

// test/ compiles without the DOM library: the little of it the functions run in the page use.
declare const document: {
  querySelector(selector: string): { scrollWidth: number; clientWidth: number } | null;
  querySelectorAll(selector: string): Iterable<{ textContent: string | null }>;
};

/**
 * Screenshots, kept in dist/screenshots (git-ignored) after every run;
 * `PTYB_SCREENSHOTS=docs` writes them over docs/web-pending.png and docs/web-phone-pending.png.
 */
const SHOTS = process.env.PTYB_SCREENSHOTS === "docs" ? join(ROOT, "docs") : join(ROOT, "dist/screenshots");
mkdirSync(SHOTS, { recursive: true });

const suite = onSharedStack();
const { url, api, cleanup } = suite;
const { openPage } = pageSuite(cleanup);
/** The end of a prompt drawn by the login shell's integration (OSC 133 B). */
const PROMPT = "\x1b]133;B\x07";

async function proxied(): Promise<TcpProxy> {
  const proxy = await startProxy(Number(new URL(url).port));
  cleanup.proxy(proxy);
  return proxy;
}

/** The page through `proxy` at `hash` (after `#session=<id>`), signed in, attached and open. */
async function attached(proxy: TcpProxy, id: string, device: Device, hash = ""): Promise<Page> {
  const page = await openPage(`${proxy.url}/#session=${id}${hash}`, device);
  await page.locator("#apikey").fill(TENANTS.acme);
  await page.locator("#signin").click();
  await page.locator('#status[data-state="open"]').waitFor({ timeout: 15_000 });
  return page;
}

/** The terminal's rendered rows, trailing blanks trimmed. */
function rows(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll("#terminal .xterm-rows > div"), (row) => (row.textContent ?? "").replace(/\u00a0/g, " ").trimEnd()),
  );
}

/** The overlay of what is typed and not yet delivered (web/pending.ts) while `bytes` are. */
const pending = (page: Page, bytes: number) => page.locator(`#pending[data-bytes="${bytes}"]`);
/** Nothing pending, and the overlay hidden (a locator's "hidden" also holds when nothing matches). */
const noneShown = (page: Page, timeout: number) => page.locator('#pending[data-bytes="0"][hidden]').waitFor({ state: "attached", timeout });

describe("the page: keys typed around a silent drop run once, and are shown until they do", () => {
  for (const [name, device, shot] of [
    ["phone 390×844", PHONE, "web-phone-pending.png"],
    ["desktop 1280×800", DESKTOP, "web-pending.png"],
  ] as const) {
    it(`${name}: typed before the drop is noticed and after it, the shell runs exactly \`echo page-early-late\``, async () => {
      const proxy = await proxied();
      const session = await suite.session(); // the login shell: shell integration, so commands are listed
      const page = await attached(proxy, session.id, device);
      await until(async () => (await fetchOutput(api, session.id, 0)).bytes.toString("utf8").includes(PROMPT), 15_000, "the first prompt");
      await until(async () => (await rows(page)).some((row) => /[$#]$/.test(row)), 10_000, "the prompt on the page");
      await page.locator("#terminal").click();

      proxy.blackhole(true);
      // Part of the repro, not a wait for anything: the keys were typed a second into a
      // silent drop, into a socket the page still took for open (its heartbeat has not noticed).
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(await page.locator("#status").getAttribute("data-state")).toBe("open");
      await page.keyboard.type("echo page-early-");
      await page.locator('#status[data-state="reconnecting"]').waitFor({ timeout: 20_000 });
      await page.keyboard.type("late");
      await page.keyboard.press("Enter");

      // Shown after the prompt's cursor, dim and underlined, every byte typed: none has arrived.
      const typed = "echo page-early-late\r";
      const overlay = pending(page, Buffer.byteLength(typed));
      await overlay.waitFor({ state: "visible", timeout: 5_000 });
      expect(await overlay.textContent()).toBe("echo page-early-late⏎");
      await expectOnScreen(page, "#pending span");
      await page.screenshot({ path: join(SHOTS, shot) });
      const header = await page.evaluate(() => {
        const box = document.querySelector("header");
        return box ? { scroll: box.scrollWidth, client: box.clientWidth } : null;
      });
      expect(header && header.scroll <= header.client, `the header fits: ${JSON.stringify(header)}`).toBe(true);

      proxy.blackhole(false);
      await page.locator('#status[data-state="open"]').waitFor({ timeout: 20_000 });
      const reopened = Date.now();
      await noneShown(page, 10_000);
      // Sent again as the socket opens (a few ms here), not when the SDK's retry timer (1 s, doubling up to 8 s) next fires.
      expect(Date.now() - reopened, "delivered after the reconnect (ms)").toBeLessThan(1_000);
      const commands = await api.commandsWhen(session.id);
      expect(commands.map((c) => [c.command, c.exitCode])).toEqual([["echo page-early-late", 0]]);
      await until(async () => (await rows(page)).includes("page-early-late"), 5_000, "the command's output on the page");
      expect(await page.locator("#message").isHidden()).toBe(true);
    });
  }
});

describe("the page: a full input queue is said plainly; an ended session's keys raise nothing", () => {
  it("#inputQueueBytes=64: 80 keys into a silent drop, 64 kept and then delivered once, the rest refused in the message line", async () => {
    const proxy = await proxied();
    const session = await suite.session({ command: "sleep", args: ["1000"] });
    const page = await attached(proxy, session.id, DESKTOP, "&inputQueueBytes=64");
    await page.locator("#terminal").click();

    proxy.blackhole(true);
    const keys = Array.from({ length: 80 }, (_, i) => "abcdefghijklmnopqrstuvwxyz"[i % 26]).join("");
    await page.keyboard.type(keys);
    await pending(page, 64).waitFor({ state: "visible", timeout: 5_000 });
    const message = page.locator('#message[data-kind="error"]');
    await message.waitFor({ timeout: 5_000 });
    expect(await message.textContent()).toBe(
      "input queue full: 64 bytes typed are not yet delivered (the page keeps at most 64); keys typed past that are dropped",
    );
    // The bound stays in the fragment, for a reload.
    expect(new URLSearchParams(new URL(page.url()).hash.slice(1)).get("inputQueueBytes")).toBe("64");

    // The network back: the 64 kept go, once (the terminal echoes them), and the message goes.
    proxy.blackhole(false);
    await noneShown(page, 20_000);
    await page.locator("#message[hidden]").waitFor({ state: "attached", timeout: 5_000 });
    const echoed = await until(
      async () => {
        const text = (await fetchOutput(api, session.id, 0)).bytes.toString("utf8");
        return text.includes(keys.slice(0, 64)) ? text : undefined;
      },
      10_000,
      "the 64 kept keys echoed",
    );
    expect(echoed).not.toContain(keys.slice(0, 65));
    expect(echoed.split(keys.slice(0, 64))).toHaveLength(2);

    // Ended: the badge says so; a key typed now is not delivered, and no error says it again.
    await api.request("DELETE", `/v1/sessions/${session.id}`);
    await page.locator('#status[data-state="exited"]').waitFor({ timeout: 10_000 });
    await page.keyboard.type("z");
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0))); // the rejection is handled
    expect(await page.locator("#message").isHidden()).toBe(true);
  });
});
