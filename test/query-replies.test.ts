// Replayed queries are never answered into the session (docs/protocol.md §5, "Replies to replayed
// queries"), on the page (Chromium, xterm.js) and in the CLI (tmux): a session's history holds
// terminal queries (DA1, DA2, CPR, OSC 10/11/4, DECRQM, DSR, DECRQSS, XTVERSION, XTWINOPS);
// attaching, reloading and attaching again replay them, and the terminal drawing them answers
// them again. Those answers must not reach the shell: what is typed next follows the prompt
// directly. A query that arrives live is still answered (a program waiting for it gets it).
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ROOT } from "../scripts/stack.js";
import { toolPath } from "../scripts/test-tools.js";
import { DESKTOP, PHONE, pageSuite } from "./browser.js";
import { TENANTS } from "./global-setup.js";
import { fetchOutput, onSharedStack, until } from "./harness.js";
import { startProxy, type TcpProxy } from "./tcp-proxy.js";

// test/ compiles without the DOM library: the little of it the page functions use.
interface PageElement {
  textContent: string | null;
  dispatchEvent(event: unknown): boolean;
}
declare const document: {
  body: PageElement & { dataset: Record<string, string | undefined> };
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
};
declare const MutationObserver: new (callback: () => void) => {
  observe(target: unknown, options: { attributes: boolean; attributeFilter: string[] }): void;
  disconnect(): void;
};
declare const KeyboardEvent: new (type: string, init: Record<string, unknown>) => unknown;
declare const window: { keyDuringReplay?: string | undefined };

const suite = onSharedStack();
const { url, api, cleanup } = suite;
/** No readline: the terminal's line discipline echoes what is typed, and a resize prints nothing. */
const PROMPT = "$ ";
const SHELL = { command: "/bin/bash", args: ["--norc", "--noprofile", "--noediting"], env: { PS1: PROMPT } };
/**
 * printf's escapes for the queries a `vim` start and its kind send (ST is `\033\\`). A real vim
 * that starts and quits goes before them: it turns focus reports on, which xterm.js and tmux
 * answer at once with a focus report.
 */
const QUERIES = String.raw`\033[c\033[>c\033[6n\033]10;?\033\\\033]11;?\007\033]4;1;?\033\\\033[?2$p\033[5n\033P$qm\033\\\033[>0q\033[18t`;
/** A live query: DA1, read back by the shell (its answer, `ESC[?1;2c`, up to the `c`). */
const LIVE_QUERY = String.raw`printf '\033[c'; read -rs -d c x; printf 'got %q\n' "$x"`;
const LIVE_ANSWER = String.raw`got $'\E[?1;2'`;

/** A session of SHELL at its first prompt. */
async function shellSession(): Promise<string> {
  const s = await suite.session(SHELL);
  await until(async () => (await fetchOutput(api, s.id, 0)).bytes.toString("latin1") === PROMPT, 15_000, "the prompt");
  return s.id;
}

/** A session whose history holds the queries; answers the offset after its last prompt. */
async function sessionWithQueries(): Promise<{ id: string; end: number }> {
  return printQueries(await shellSession());
}

/** Makes the session print the queries (no client needs to be attached); answers the offset after the prompt that follows. */
async function printQueries(id: string): Promise<{ id: string; end: number }> {
  await api.input(id, `vim -N -u DEFAULTS -i NONE -c q; printf '${QUERIES}'; echo QUERIES-DONE\n`);
  const history = await until(
    async () => {
      const out = await fetchOutput(api, id, 0);
      return out.bytes.toString("latin1").endsWith(`QUERIES-DONE\r\n${PROMPT}`) ? out : undefined;
    },
    15_000,
    "the queries in the history",
  );
  const text = history.bytes.toString("latin1");
  expect(text).toContain("\x1b[c\x1b[>c\x1b[6n\x1b]10;?\x1b\\");
  expect(text).toContain("\x1b[?1004h"); // vim turned focus reports on (and off as it quit)
  return { id, end: history.to };
}

/** The output from the last history prompt on, once it ends with `MARK` and a new prompt. */
async function afterHistory(id: string, end: number): Promise<string> {
  const from = end - PROMPT.length;
  let last = "";
  try {
    return await until(
      async () => {
        last = (await fetchOutput(api, id, from)).bytes.toString("latin1");
        return last.endsWith(`MARK\r\n${PROMPT}`) ? last : undefined;
      },
      15_000,
      "MARK and a prompt",
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}; the output after the history: ${JSON.stringify(last)}`);
  }
}

/** What a shell shows for `echo MARK` typed at its prompt, and nothing else. */
const TYPED_ALONE = `${PROMPT}echo MARK\r\nMARK\r\n${PROMPT}`;

/** A proxy to the edge that the test can refuse, so that a client reconnects and replays what it missed. */
async function edgeProxy(): Promise<TcpProxy> {
  return cleanup.proxy(await startProxy(Number(new URL(url).port)));
}

describe("the page (Chromium)", () => {
  const { openPage } = pageSuite(cleanup);

  async function waitForRow(page: Page, exact: string): Promise<void> {
    await page
      .waitForFunction(
        (want: string) =>
          Array.from(document.querySelectorAll("#terminal .xterm-rows > div"), (row) =>
            (row.textContent ?? "").replace(/\u00a0/g, " ").trimEnd(),
          ).includes(want),
        exact,
        { timeout: 15_000 },
      )
      .catch(async (error: Error) => {
        const rows = await page.evaluate(() =>
          Array.from(document.querySelectorAll("#terminal .xterm-rows > div"), (row) => row.textContent ?? ""),
        );
        throw new Error(`no row ${JSON.stringify(exact)}: ${error.message}\nrows: ${JSON.stringify(rows)}`);
      });
  }

  const DEVICES = { desktop: DESKTOP, phone: PHONE };
  it.each(Object.entries(DEVICES))("%s: attach and three reloads type no replies; a key typed after them follows the prompt; a live query is answered", async (_, device) => {
    const { id, end } = await sessionWithQueries();
    const page = await openPage(`${url}/#session=${id}`, device);
    await page.locator("#apikey").fill(TENANTS.acme);
    await page.locator("#signin").click(); // signs in and attaches to the session in the fragment
    await page.locator('#status[data-state="open"]').waitFor();
    await waitForRow(page, "QUERIES-DONE");

    for (let reload = 0; reload < 3; reload++) {
      await page.reload();
      await page.locator('#status[data-state="open"]').waitFor();
      await waitForRow(page, "QUERIES-DONE");
    }

    await page.locator("#terminal").click();
    await page.keyboard.type("echo MARK");
    await page.keyboard.press("Enter");
    expect(await afterHistory(id, end)).toBe(TYPED_ALONE);

    // Live, the page's terminal answers: the shell reads DA1's answer.
    await api.input(id, `${LIVE_QUERY}\n`);
    await waitForRow(page, LIVE_ANSWER);
  });

  it("a key typed while the terminal is still parsing the replay is sent, and only it", async () => {
    const { id, end } = await sessionWithQueries();
    const page = await openPage(`${url}/#session=${id}`);
    // The moment the page marks output as replay not yet parsed (data-replaying), a key goes into
    // xterm.js's own textarea, as a person's keydown does: xterm parses writes in a later task,
    // so the key is typed while the replay's queries still wait to be parsed and answered.
    await page.evaluate(() => {
      const observer = new MutationObserver(() => {
        if (document.body.dataset.replaying !== "true") return;
        observer.disconnect();
        window.keyDuringReplay = document.body.dataset.replaying;
        const textarea = document.querySelector(".xterm-helper-textarea");
        const key = { key: "K", code: "KeyK", keyCode: 75, which: 75, bubbles: true, cancelable: true };
        textarea?.dispatchEvent(new KeyboardEvent("keydown", key));
        textarea?.dispatchEvent(new KeyboardEvent("keypress", { ...key, charCode: 75 }));
      });
      observer.observe(document.body, { attributes: true, attributeFilter: ["data-replaying"] });
    });
    await page.locator("#apikey").fill(TENANTS.acme);
    await page.locator("#signin").click();
    await page.locator('#status[data-state="open"]').waitFor();
    await waitForRow(page, "QUERIES-DONE");
    await page.waitForFunction(() => document.body.dataset.replaying === "false", undefined, { timeout: 15_000 });
    expect(await page.evaluate(() => window.keyDuringReplay)).toBe("true");

    // The K typed during the replay is in the shell's line, right after the prompt, and nothing else is.
    await page.locator("#terminal").click();
    await page.keyboard.type("; echo MARK");
    await page.keyboard.press("Enter");
    const from = end - PROMPT.length;
    let last = "";
    const out = await until(
      async () => {
        last = (await fetchOutput(api, id, from)).bytes.toString("latin1");
        return last.endsWith(`MARK\r\n${PROMPT}`) ? last : undefined;
      },
      15_000,
      "MARK and a prompt",
    ).catch((error: Error) => {
      throw new Error(`${error.message}; the output after the history: ${JSON.stringify(last)}`);
    });
    expect(out).toBe(`${PROMPT}K; echo MARK\r\nbash: K: command not found\r\nMARK\r\n${PROMPT}`);
  });

  it("a reconnect's replay (queries printed while the page was away) types no replies", async () => {
    const id = await shellSession();
    const proxy = await edgeProxy();
    const page = await openPage(`${proxy.url}/#session=${id}`);
    await page.locator("#apikey").fill(TENANTS.acme);
    await page.locator("#signin").click();
    await page.locator('#status[data-state="open"]').waitFor();
    await waitForRow(page, PROMPT.trimEnd());

    proxy.refuse(true);
    await page.locator('#status[data-state="reconnecting"]').waitFor();
    const { end } = await printQueries(id);
    proxy.refuse(false);
    await page.locator('#status[data-state="open"]').waitFor({ timeout: 30_000 });
    await waitForRow(page, "QUERIES-DONE");

    await page.locator("#terminal").click();
    await page.keyboard.type("echo MARK");
    await page.keyboard.press("Enter");
    expect(await afterHistory(id, end)).toBe(TYPED_ALONE);
  });
});

describe("the CLI (tmux)", () => {
  const CLI = join(ROOT, "bin/ptybroker.js");
  const SOCKET = `ptyb-replies-test-${process.pid}`;
  const TMUX = toolPath("tmux");
  let tmuxStarted = false;
  const tmux = (...args: string[]) => execFileSync(TMUX, ["-L", SOCKET, "-f", "/dev/null", ...args], { encoding: "utf8" });
  const screen = (name: string) => tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", name);
  const waitForScreen = (name: string, check: (text: string) => boolean, what: string) =>
    until(() => check(screen(name)), 15_000, what).catch((error: Error) => {
      throw new Error(`${error.message}\n--- pane ---\n${screen(name)}`);
    });
  cleanup.first(() => {
    if (tmuxStarted) tmux("kill-server");
  });

  it("attach, detach and attach again type no replies; a key typed after them follows the prompt; a live query is answered", async () => {
    const { id, end } = await sessionWithQueries();
    tmux(
      "new-session",
      "-d",
      "-s",
      "replies",
      "-x",
      "100",
      "-y",
      "30",
      "-e",
      `PTYBROKER_URL=${url}`,
      "-e",
      `PTYBROKER_API_KEY=${TENANTS.acme}`,
      `node ${CLI} attach ${id}; node ${CLI} attach ${id}; echo CLI-EXIT=$?; exec sleep 300`,
    );
    tmuxStarted = true;
    const count = (text: string, line: RegExp) => text.match(line)?.length ?? 0;
    await waitForScreen("replies", (text) => count(text, /^QUERIES-DONE$/gm) === 1, "the first replay");
    tmux("send-keys", "-t", "replies", "C-]");
    await waitForScreen("replies", (text) => text.includes(`detached from ${id}`), "the detach");
    await waitForScreen("replies", (text) => count(text, /^QUERIES-DONE$/gm) === 2, "the second replay");

    tmux("send-keys", "-t", "replies", "echo MARK", "Enter");
    expect(await afterHistory(id, end)).toBe(TYPED_ALONE);

    // Live, tmux answers: the shell reads DA1's answer.
    tmux("send-keys", "-t", "replies", "-l", LIVE_QUERY);
    tmux("send-keys", "-t", "replies", "Enter");
    await waitForScreen("replies", (text) => text.split("\n").includes(LIVE_ANSWER), LIVE_ANSWER);

    tmux("send-keys", "-t", "replies", "C-]");
    await waitForScreen("replies", (text) => text.includes("CLI-EXIT=0"), "the CLI's exit");
  });

  it("a reconnect's replay (queries printed while the CLI was away) types no replies", async () => {
    const id = await shellSession();
    const proxy = await edgeProxy();
    tmux(
      "new-session",
      "-d",
      "-s",
      "reconnect",
      "-x",
      "100",
      "-y",
      "30",
      "-e",
      `PTYBROKER_URL=${proxy.url}`,
      "-e",
      `PTYBROKER_API_KEY=${TENANTS.acme}`,
      `node ${CLI} attach ${id}; echo CLI-EXIT=$?; exec sleep 300`,
    );
    tmuxStarted = true;
    await waitForScreen("reconnect", (text) => text.split("\n").includes(PROMPT), "the prompt");

    proxy.refuse(true);
    await waitForScreen("reconnect", (text) => text.includes("connection lost"), "the CLI to notice");
    const { end } = await printQueries(id);
    proxy.refuse(false);
    await waitForScreen("reconnect", (text) => text.includes("reconnected after"), "the reconnect");
    await waitForScreen("reconnect", (text) => text.split("\n").includes("QUERIES-DONE"), "the replay of what was missed");

    tmux("send-keys", "-t", "reconnect", "echo MARK", "Enter");
    expect(await afterHistory(id, end)).toBe(TYPED_ALONE);
    tmux("send-keys", "-t", "reconnect", "C-]");
    await waitForScreen("reconnect", (text) => text.includes("CLI-EXIT=0"), "the CLI's exit");
  });
});
