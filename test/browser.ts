// Debian's chromium for the suites that drive a page (web, web-papercuts, query-replies,
// reconnect-deadlines, cors, package), through playwright-core. The path comes from the pretest
// step (scripts/test-tools.ts). `pageSuite` is what the page suites share: one browser per suite,
// a context per page, and no uncaught exception in any page.
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterEach, beforeAll, expect } from "vitest";
import { toolPath } from "../scripts/test-tools.js";
import type { SuiteCleanup } from "./cleanup.js";

/** Headless chromium; without the background-networking flags it keeps dialling out of this closed network. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: toolPath("chromium"),
    headless: true,
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
}

export interface Device {
  viewport: { width: number; height: number };
  isMobile?: boolean;
  hasTouch?: boolean;
}

/** A desktop window, and a phone (an iPhone 12–15's CSS pixels, touch, mobile viewport). */
export const DESKTOP: Device = { viewport: { width: 1280, height: 800 } };
export const PHONE: Device = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true };

export interface PageSuite {
  /** A page of its own (a new context: no storage shared with another page) at `address`. */
  openPage(address: string, device?: Device, prepare?: (context: BrowserContext) => Promise<void>): Promise<Page>;
}

/**
 * Chromium for the suite (or describe block) that calls this at its top level: launched before
 * its tests, closed by `cleanup`; the pages a test opened are closed after it, and the test fails
 * if any of them threw an uncaught exception.
 */
export function pageSuite(cleanup: SuiteCleanup): PageSuite {
  let browser: Browser | undefined;
  const contexts = new Set<BrowserContext>();
  let pageErrors: string[] = [];

  beforeAll(async () => {
    const launched = await launchChromium();
    browser = launched;
    cleanup.first(() => launched.close());
  });

  afterEach(async () => {
    await Promise.all([...contexts].map((c) => c.close()));
    contexts.clear();
    const errors = pageErrors;
    pageErrors = [];
    expect(errors).toEqual([]);
  });

  return {
    async openPage(address, device = DESKTOP, prepare) {
      if (!browser) throw new Error("openPage before the suite's browser started");
      const context = await browser.newContext({ ...device, deviceScaleFactor: 1 });
      contexts.add(context);
      await prepare?.(context);
      const page = await context.newPage();
      page.on("pageerror", (error) => pageErrors.push(error.message));
      await page.goto(address);
      return page;
    },
  };
}

/** Fails unless every element matching is on screen: its whole box inside the viewport. */
export async function expectOnScreen(page: Page, selector: string): Promise<void> {
  const { width, height } = page.viewportSize() ?? { width: 0, height: 0 };
  const boxes = await page.locator(selector).evaluateAll((elements) =>
    elements.map((e) => {
      const r = (e as unknown as { getBoundingClientRect(): { left: number; top: number; right: number; bottom: number } }).getBoundingClientRect();
      return { left: r.left, top: r.top, right: r.right, bottom: r.bottom };
    }),
  );
  expect(boxes.length, `${selector} on the page`).toBeGreaterThan(0);
  for (const box of boxes) {
    expect(box.right - box.left, `${selector} has a width`).toBeGreaterThan(0);
    expect(box.left, `${selector} left edge`).toBeGreaterThanOrEqual(0);
    expect(box.top, `${selector} top edge`).toBeGreaterThanOrEqual(0);
    expect(box.right, `${selector} right edge`).toBeLessThanOrEqual(width);
    expect(box.bottom, `${selector} bottom edge`).toBeLessThanOrEqual(height);
  }
}
