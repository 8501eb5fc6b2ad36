// Input exactly once through the CLI (docs/protocol.md §5, "Input exactly once"), in a real
// terminal (tmux): keys typed into `ptybroker attach` before a silent drop is noticed, then after
// it, run once, in order, as the one command line they make; meanwhile the CLI's status line
// says how many bytes it holds, and after the reconnect that they were delivered. The SDK's repro
// is test/input-once; how the CLI is driven in tmux, test/cli.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../scripts/stack.js";
import { toolPath } from "../scripts/test-tools.js";
import { TENANTS } from "./global-setup.js";
import { onSharedStack, until } from "./harness.js";
import { startProxy } from "./tcp-proxy.js";

const suite = onSharedStack();
const { url, api, cleanup } = suite;
const CLI = join(ROOT, "bin/ptybroker.js");
const SOCKET = `ptyb-cli-input-once-${process.pid}`;
const TMUX = toolPath("tmux");
/** Typed before the CLI notices the silence, and after: one command line together. */
const EARLY = "echo early-";
const LATE = "late";
/**
 * The CLI has no heartbeat flag: the SDK's default pings every 5 s and gives up on a socket
 * silent for two intervals, so it notices 10-15 s after the network goes silent.
 */
const NOTICE_MS = 30_000;

function tmux(...args: string[]): string {
  return execFileSync(TMUX, ["-L", SOCKET, "-f", "/dev/null", ...args], { encoding: "utf8" });
}
let tmuxStarted = false;
cleanup.first(() => {
  if (!tmuxStarted) return;
  try {
    tmux("kill-server");
  } catch {
    // already gone
  }
});

/** What the pane shows, scrollback included, wrapped lines joined. */
function screen(name: string): string {
  return tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", name);
}

/** Until the pane matches `pattern` (a string: is that whole line); the time it was first seen. */
async function waitForScreen(name: string, pattern: RegExp | string, deadlineMs = 15_000): Promise<number> {
  const seen = (pane: string) => (typeof pattern === "string" ? pane.split("\n").includes(pattern) : pattern.test(pane));
  await until(() => seen(screen(name)), deadlineMs, `${String(pattern)} in pane ${name}`).catch((error: Error) => {
    throw new Error(`${error.message}\n--- pane ---\n${screen(name)}`);
  });
  return Date.now();
}

describe("CLI: what is typed around a silent drop runs once, in order", () => {
  it("keys typed before the drop is noticed and after it: the shell runs exactly `echo early-late`; the status line says what is held", { timeout: 120_000 }, async () => {
    const proxy = await startProxy(Number(new URL(url).port));
    cleanup.proxy(proxy);
    // The login shell: its integration reports each command it runs (GET .../commands).
    const session = await suite.session({ cols: 100, rows: 30 });
    tmux(
      "new-session", "-d", "-s", "attach", "-x", "100", "-y", "30",
      "-e", `PTYBROKER_URL=${proxy.url}`, "-e", `PTYBROKER_API_KEY=${TENANTS.acme}`,
      `node ${CLI} attach ${session.id}; echo CLI-EXIT=$?; exec sleep 300`,
    );
    tmuxStarted = true;
    const keys = (...input: string[]) => tmux("send-keys", "-t", "attach", ...input);
    const said = (pane: string) => pane.match(/\[ptybroker: [^\]]*\]/g) ?? [];
    const typed = `${EARLY}${LATE}\r`.length;
    const held = (bytes: number) => `[ptybroker: connection lost; reconnecting… ${bytes} bytes typed, held until the session has them]`;
    // The same line once the link is back: "typed input delivered" when the acknowledgement comes
    // before the shell's echo, else "sending" stays, and the echo after it shows the keys arrived.
    const reconnected = new RegExp(`^\\[ptybroker: reconnected after [\\d.]+ s; (?:sending ${typed} bytes typed|typed input delivered)\\]$`, "m");
    const timings: string[] = [];
    let whileHeld = "";
    try {
      // The remote prompt in the pane: the CLI has the terminal in raw mode and the socket open.
      await waitForScreen("attach", /\$ $/m);

      proxy.blackhole(true);
      const silentAt = Date.now();
      keys("-l", EARLY); // at once: long before the heartbeat can notice
      const noticedAt = await waitForScreen("attach", held(EARLY.length), NOTICE_MS);
      timings.push(`silence noticed after ${noticedAt - silentAt} ms`);
      keys("-l", LATE);
      keys("Enter");
      await waitForScreen("attach", held(typed), 5_000);
      whileHeld = screen("attach");
      // One status line, redrawn in place: the count before the last keys is gone.
      expect(said(whileHeld)).toEqual([held(typed)]);
      // Nothing reached the shell: no echo of the keys, no command.
      expect(whileHeld).not.toContain(EARLY);
      expect(await api.commands(session.id)).toEqual([]);

      proxy.blackhole(false);
      const restoredAt = Date.now();
      const reconnectedAt = await waitForScreen("attach", reconnected, 20_000);
      const ranAt = await waitForScreen("attach", /^early-late$/m, 20_000);
      timings.push(`reconnected ${reconnectedAt - restoredAt} ms after the network returned`, `the command ran ${ranAt - reconnectedAt} ms after that`);
      const commands = await api.commandsWhen(session.id);
      expect(commands.map((c) => [c.command, c.exitCode])).toEqual([["echo early-late", 0]]);

      // Nothing of it comes again later: the next command is the second and last one.
      keys("-l", "echo after-$((6*7))");
      keys("Enter");
      await waitForScreen("attach", /^after-42$/m);
      await until(async () => (await api.commands(session.id)).length >= 2, 10_000, "the second command");
      expect((await api.commands(session.id)).map((c) => [c.command, c.exitCode])).toEqual([
        ["echo early-late", 0],
        ["echo after-$((6*7))", 0],
      ]);
      const final = screen("attach");
      expect(final).not.toMatch(/command not found/);
      expect(final.match(/^early-late$/gm)).toHaveLength(1);
      // Still one status line: the reconnect took the place of the outage.
      expect(said(final)).toEqual([expect.stringMatching(reconnected)]);

      keys("C-]");
      await waitForScreen("attach", /^CLI-EXIT=0$/m);
    } finally {
      console.log(`cli-input-once: ${timings.join("; ")}\n--- pane while held ---\n${whileHeld.trimEnd()}\n--- pane at the end ---\n${screen("attach").trimEnd()}`);
    }
  });
});
