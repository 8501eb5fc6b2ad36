// A silent network drop cannot leave a client reconnecting for ever (docs/protocol.md §5, "What a
// client does on reconnect"). The clients reach the edge through test/tcp-proxy.ts, whose
// blackhole drops everything without a reset; it ends with `strand`, so the connections it
// caught stay dead (a phone that changed networks), and only a client's own deadlines or a nudge
// get it out. Asserted: the SDK in Node and the page in Chromium are open again soon after the
// network is back, with every byte they missed exactly once; and the page's `online`,
// `visibilitychange` and `pageshow` events redial before its heartbeat could have noticed.
import type { BrowserContext, Page } from "playwright-core";
import WebSocket from "ws";
import { describe, expect, it } from "vitest";
import { type ConnectionState, PtyBroker, type SocketLike } from "../client/index.js";
import { pageSuite } from "./browser.js";
import { TENANTS } from "./global-setup.js";
import { fetchOutput, onSharedStack, sha256, until } from "./harness.js";
import { startProxy, type TcpProxy } from "./tcp-proxy.js";

// test/ compiles without the DOM library: the little of it the functions run in the page use.
interface PageElement {
  textContent: string | null;
  dataset: Record<string, string | undefined>;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  dispatchEvent(event: unknown): boolean;
};
declare const MutationObserver: new (callback: () => void) => {
  observe(target: PageElement, options: { attributes: boolean; attributeFilter: string[] }): void;
};
declare const Event: new (type: string) => unknown;
declare const PageTransitionEvent: new (type: string, init: { persisted: boolean }) => unknown;
declare const window: { statesSeen?: string[]; dispatchEvent(event: unknown): boolean };

const suite = onSharedStack();
const { url, api, cleanup } = suite;
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

/** `count` numbered marks, `<01>` to `<NN>`, one every `every` s, then `done-42`. */
function marks(count: number, every: number): string {
  return `for i in $(seq 1 ${count}); do printf "<%02d>" $i; sleep ${every}; done; echo; echo done-$((6*7))\n`;
}
const MARK = /<(\d\d)>/g;
const allMarks = (count: number) => Array.from({ length: count }, (_, i) => String(i + 1).padStart(2, "0"));

async function proxied(): Promise<TcpProxy> {
  const proxy = await startProxy(Number(new URL(url).port));
  cleanup.proxy(proxy);
  return proxy;
}

describe("SDK (Node): a reconnect caught in a silent drop", () => {
  it("the token fetch inside the blackhole times out, and the redial resumes every missed byte once the network is back", async () => {
    const proxy = await proxied();
    const requests: string[] = [];
    const broker = new PtyBroker({
      url: proxy.url,
      apiKey: TENANTS.acme,
      timeoutMs: 1000,
      // A WebSocket class as a browser has it (no headers): each socket's token is fetched first.
      WebSocket: WebSocket as unknown as new (address: string) => SocketLike,
      fetch: (input, init) => {
        requests.push(`${init?.method ?? "GET"} ${String(input)}`);
        return fetch(input, init);
      },
    });
    const session = await suite.session(BASH);
    const chunks: Buffer[] = [];
    const offsets: number[] = [];
    const states: ConnectionState[] = [];
    const pty = await broker.connect(session.id, {
      from: 0,
      heartbeatMs: 250,
      reconnect: { baseMs: 50, maxMs: 200 },
      onData: (bytes, offset) => {
        chunks.push(Buffer.from(bytes));
        offsets.push(offset);
      },
      onState: (state) => states.push(state),
    });
    cleanup.first(() => pty.close());
    const text = () => Buffer.concat(chunks).toString("utf8");
    await api.input(session.id, marks(40, 0.1));
    await until(() => text().includes("<03>"), 15_000, "the first marks");

    proxy.blackhole(true);
    await until(() => pty.state === "reconnecting", 5_000, "the heartbeat to notice the silence");
    const before = requests.length;
    const tokenFetch = (call: string) => /^POST .*\/tokens$/.test(call);
    await until(() => requests.slice(before).some(tokenFetch), 5_000, "the redial's token fetch, inside the blackhole");
    // The network comes back; the connections the blackhole caught stay dead.
    proxy.blackhole(false, { strand: true });
    const back = Date.now();
    await until(() => pty.state === "open", 5_000, "the terminal open again within 5 s of the network's return");
    const reopenedMs = Date.now() - back;
    console.log(`reconnect: the SDK open again ${reopenedMs} ms after the blackhole ended`);

    await until(() => /done-42\r\n/.test(text()), 15_000, "the end of the marks");
    // Every byte exactly once, in order, and the same bytes as the session's log.
    const received = Buffer.concat(chunks);
    expect(offsets.every((offset, i) => offset === (i === 0 ? 0 : offsets[i - 1] + chunks[i - 1].byteLength))).toBe(true);
    const logged = await fetchOutput(api, session.id, 0);
    expect(sha256(received)).toBe(sha256(logged.bytes.subarray(0, received.byteLength)));
    expect([...text().matchAll(MARK)].map((m) => m[1])).toEqual(allMarks(40));
    expect(states.slice(0, 2)).toEqual(["connecting", "open"]);
    expect(states).toContain("reconnecting");
    expect(reopenedMs).toBeLessThan(5_000);
  });
});

describe("the page: a reconnect caught in a silent drop, and the browser's nudges", () => {
  const { openPage } = pageSuite(cleanup);

  /** The page through `proxy`, signed in and attached to a new bash session; the badge's states are recorded. */
  async function attached(proxy: TcpProxy): Promise<{ context: BrowserContext; page: Page; id: string }> {
    const session = await suite.session(BASH);
    const page = await openPage(`${proxy.url}/#session=${session.id}`);
    const context = page.context();
    await page.locator("#apikey").fill(TENANTS.acme);
    await page.locator("#signin").click();
    await page.locator('#status[data-state="open"]').waitFor({ timeout: 15_000 });
    await page.evaluate(() => {
      const badge = document.querySelector("#status");
      if (!badge) throw new Error("no #status");
      const seen: string[] = [];
      window.statesSeen = seen;
      new MutationObserver(() => seen.push(badge.dataset.state ?? "")).observe(badge, { attributes: true, attributeFilter: ["data-state"] });
    });
    return { context, page, id: session.id };
  }

  /** The marks the page's terminal shows, in order (its rows joined: a long line wraps). */
  async function shownMarks(page: Page): Promise<string[]> {
    const text = await page.evaluate(() =>
      Array.from(document.querySelectorAll("#terminal .xterm-rows > div"), (row) => (row.textContent ?? "").replace(/\u00a0/g, " ").trimEnd()).join(""),
    );
    return [...text.matchAll(MARK)].map((m) => m[1]);
  }

  const statesSeen = (page: Page) => page.evaluate(() => window.statesSeen ?? []);

  it("a token fetch caught in a 20 s blackhole: open again within 10 s of the network's return, every mark once", async () => {
    const proxy = await proxied();
    const { page, id } = await attached(proxy);
    const tokenFetches: number[] = [];
    page.on("request", (request) => {
      if (request.method() === "POST" && /\/tokens$/.test(request.url())) tokenFetches.push(Date.now());
    });
    await api.input(id, marks(60, 0.5));
    await until(async () => (await shownMarks(page)).includes("03"), 15_000, "the first marks on the page");

    const dark = Date.now();
    proxy.blackhole(true);
    // The page's heartbeat (5 s) notices within 15 s; its redial then fetches a token, inside the blackhole.
    await page.waitForFunction(() => (window.statesSeen ?? []).includes("reconnecting"), undefined, { timeout: 20_000 });
    await until(() => tokenFetches.some((at) => at > dark), 10_000, "the redial's token fetch");
    await until(() => Date.now() - dark >= 20_000, 25_000, "20 s of blackhole");
    proxy.blackhole(false, { strand: true });
    const back = Date.now();
    // The open deadline (5 s) ends the attempt caught in the blackhole, and the next one, after the
    // base delay, works: within 10 s of the return, as the page promises; without it, never.
    await page.locator('#status[data-state="open"]').waitFor({ timeout: 20_000 });
    const reopenedMs = Date.now() - back;
    console.log(`reconnect: the page open again ${reopenedMs} ms after a 20 s blackhole ended`);
    expect(reopenedMs).toBeLessThan(10_000);
    await until(async () => (await shownMarks(page)).length === 60, 30_000, "every mark on the page");
    expect(await shownMarks(page)).toEqual(allMarks(60));
  });

  it("online, visibilitychange (hidden, then visible) and pageshow (from the cache) redial a dead socket at once, before the heartbeat could notice", async () => {
    const proxy = await proxied();
    const { context, page, id } = await attached(proxy);
    await api.input(id, marks(60, 0.4));
    await until(async () => (await shownMarks(page)).includes("03"), 15_000, "the first marks on the page");
    const nudges: Record<string, { before?: () => Promise<void>; nudge: () => Promise<void> }> = {
      // Chromium's own `online` event: offline emulation leaves an open socket be, coming back online fires it.
      online: { before: () => context.setOffline(true), nudge: () => context.setOffline(false) },
      visibilitychange: {
        nudge: () =>
          page.evaluate(() => {
            const shown = (state: string) => {
              Object.defineProperty(document, "visibilityState", { configurable: true, get: () => state });
              document.dispatchEvent(new Event("visibilitychange"));
            };
            shown("hidden");
            shown("visible");
          }),
      },
      // A page restored from the back-forward cache (a `pageshow` that is not persisted is a first load: ignored).
      pageshow: {
        nudge: () =>
          page.evaluate(() => {
            window.dispatchEvent(new PageTransitionEvent("pageshow", { persisted: true }));
          }),
      },
    };
    for (const [name, { before, nudge }] of Object.entries(nudges)) {
      await page.evaluate(() => (window.statesSeen ?? []).splice(0));
      // The socket goes dead: output keeps coming to the edge, none reaches the page.
      const offset = (await api.get(id)).offset;
      await before?.();
      proxy.blackhole(true);
      await until(async () => (await api.get(id)).offset > offset, 5_000, "output the page misses");
      proxy.blackhole(false, { strand: true });
      const back = Date.now();
      await nudge();
      // The heartbeat needs 10 s of silence; the nudge's ping gives up after 2 s and redials.
      await page.waitForFunction(() => (window.statesSeen ?? []).includes("reconnecting"), undefined, { timeout: 5_000 });
      await page.locator('#status[data-state="open"]').waitFor({ timeout: 5_000 });
      expect(Date.now() - back, `${name}: open again`).toBeLessThan(6_000);
      expect(await statesSeen(page)).toEqual(["reconnecting", "open"]);
    }
    await until(async () => (await shownMarks(page)).length === 60, 30_000, "every mark on the page");
    expect(await shownMarks(page)).toEqual(allMarks(60));
  });
});
