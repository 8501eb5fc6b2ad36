// Debian's chromium for the suites that drive a page (web, cors, package), through
// playwright-core. The path comes from the pretest step (scripts/test-tools.ts).
import { type Browser, chromium } from "playwright-core";
import { toolPath } from "../scripts/test-tools.js";

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
