// The `ptybroker` CLI in a real terminal: tmux panes driven with send-keys and read with
// capture-pane, or with pipe-pane where every byte the CLI prints must be checked.
import { execFile, execFileSync, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { freePort, ROOT } from "../scripts/stack.js";
import { toolPath } from "../scripts/test-tools.js";
import { TENANTS } from "./global-setup.js";
import { fetchOutput, liveSessionProcesses, onSharedStack, until } from "./harness.js";
import { startProxy } from "./tcp-proxy.js";

const suite = onSharedStack();
const { url, api, cleanup } = suite;
const CLI = join(ROOT, "bin/ptybroker.js");
const SOCKET = `ptyb-cli-test-${process.pid}`;
/** tmux, found or provided by npm test's pretest step (scripts/test-tools.ts). */
const TMUX = toolPath("tmux");
const dir = cleanup.tempFolder("ptyb-cli-");
let tmuxStarted = false;

function tmux(...args: string[]): string {
  return execFileSync(TMUX, ["-L", SOCKET, "-f", "/dev/null", ...args], { encoding: "utf8" });
}

/** A detached tmux session of `cols`×`rows` running `command` under sh, with the CLI's env. */
function pane(name: string, command: string, brokerUrl = url, size = { cols: 100, rows: 30 }): void {
  tmux(
    "new-session",
    "-d",
    "-s",
    name,
    "-x",
    String(size.cols),
    "-y",
    String(size.rows),
    "-e",
    `PTYBROKER_URL=${brokerUrl}`,
    "-e",
    `PTYBROKER_API_KEY=${TENANTS.acme}`,
    command,
  );
  tmuxStarted = true;
}

/** What the pane shows, scrollback included, wrapped lines joined. */
function screen(name: string): string {
  return tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", name);
}

function waitForScreen(name: string, pattern: RegExp, deadlineMs = 15_000): Promise<RegExpMatchArray> {
  return until(() => screen(name).match(pattern), deadlineMs, `${pattern} in pane ${name}`).catch((error: Error) => {
    throw new Error(`${error.message}\n--- pane ---\n${screen(name)}`);
  });
}

function keys(name: string, ...input: string[]): void {
  tmux("send-keys", "-t", name, ...input);
}

/** The pane's terminal modes, as tmux tracks them (tmux 3.3's FORMATS). */
const MODES = ["alternate_on", "mouse_any_flag", "mouse_standard_flag", "mouse_button_flag", "mouse_all_flag", "mouse_sgr_flag", "mouse_utf8_flag", "keypad_cursor_flag", "keypad_flag", "cursor_flag"];
function modes(name: string): Record<string, string> {
  const values = tmux("display-message", "-p", "-t", name, MODES.map((f) => `#{${f}}`).join(" ")).trim().split(" ");
  return Object.fromEntries(MODES.map((f, i) => [f, values[i] as string]));
}
/** A terminal as it is without a full-screen program: main screen, no mouse, normal keys, cursor shown. */
const RESTORED_MODES = {
  alternate_on: "0",
  mouse_any_flag: "0",
  mouse_standard_flag: "0",
  mouse_button_flag: "0",
  mouse_all_flag: "0",
  mouse_sgr_flag: "0",
  mouse_utf8_flag: "0",
  keypad_cursor_flag: "0",
  keypad_flag: "0",
  cursor_flag: "1",
};
/** vim with the mouse on: the alternate screen, SGR mouse reporting, application cursor keys and keypad. */
const VIM = ["vim", "-u", "NONE", "-N", "-c", "set mouse=a", "-c", "set ttymouse=sgr"];
/** Until the pane shows vim's modes (vim has started and drawn). */
function waitForVimModes(name: string): Promise<unknown> {
  const inVim = { alternate_on: "1", mouse_any_flag: "1", mouse_sgr_flag: "1", keypad_cursor_flag: "1", keypad_flag: "1", cursor_flag: "1" };
  return until(() => Object.entries(inVim).every(([f, v]) => modes(name)[f] === v), 15_000, `vim's modes on in pane ${name}`).catch(
    (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(modes(name))}\n--- pane ---\n${screen(name)}`);
    },
  );
}

const cli = (args: string[]) =>
  promisify(execFile)("node", [CLI, ...args], {
    env: { ...process.env, PTYBROKER_URL: url, PTYBROKER_API_KEY: TENANTS.acme },
    encoding: "buffer",
    maxBuffer: 64 * 1024 * 1024,
  });

/** `stty -a` of a terminal in its normal (cooked) mode, as it must be after the CLI exits. */
const RESTORED = /\bicanon\b[\s\S]*\becho\b/;
const BASH = "-- /bin/bash --norc --noprofile";
/** What the CLI writes as it lets go of a terminal: mouse, focus, paste, keypad modes off, cursor shown, attributes reset. */
const RESET_MODES =
  "\x18\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2004l\x1b[?1l\x1b>\x1b[?25h\x1b[0m";

/** A file's text, or "" before it exists. */
function read(file: string, encoding: BufferEncoding = "utf8"): string {
  try {
    return readFileSync(file, encoding);
  } catch {
    return "";
  }
}

// The tmux server goes first; then the sessions, the proxies and the folder.
cleanup.first(() => {
  if (tmuxStarted) {
    try {
      tmux("kill-server");
    } catch {
      // already gone
    }
  }
});

describe("ptybroker CLI", () => {
  it("run, resize, detach, ls, logs and attach again, then the remote exit code", async () => {
    pane("run", `node ${CLI} run --label cli-test ${BASH}; echo CLI-EXIT=$?; stty -a; exec sleep 300`);
    const id = (await waitForScreen("run", /\[ptybroker: session ([\w-]+)\]/))[1];
    suite.purgeLater(id);

    keys("run", "echo $((6*7))-cli", "Enter");
    await waitForScreen("run", /^42-cli$/m);
    keys("run", "stty size", "Enter");
    await waitForScreen("run", /^30 100$/m);

    // SIGWINCH: the remote follows the window. Wait for the edge to have the new size before
    // asking the shell, since the resize and the keys travel separately to the CLI.
    tmux("resize-window", "-t", "run", "-x", "120", "-y", "40");
    await until(async () => (await api.get(id)).cols === 120, 10_000, "remote resized");
    keys("run", "stty size", "Enter");
    await waitForScreen("run", /^40 120$/m);

    keys("run", "C-]");
    await waitForScreen("run", new RegExp(`detached from ${id}`));
    await waitForScreen("run", /^CLI-EXIT=0$/m);
    const afterDetach = screen("run");
    expect(afterDetach.slice(afterDetach.indexOf("CLI-EXIT=0"))).toMatch(RESTORED);
    expect(afterDetach.slice(afterDetach.indexOf("CLI-EXIT=0"))).not.toMatch(/-icanon|-echo\b/);
    expect((await api.get(id)).status).toBe("running");

    const { stdout: listing } = await cli(["ls"]);
    expect(listing.toString()).toMatch(new RegExp(`^${id}\\s+running\\s+/bin/bash --norc --noprofile\\s.*cli-test$`, "m"));

    const { stdout: logged } = await cli(["logs", id]);
    expect(logged.equals((await fetchOutput(api, id, 0)).bytes)).toBe(true);

    pane("again", `node ${CLI} attach ${id}; echo CLI-EXIT=$?; stty -a; exec sleep 300`, url, { cols: 120, rows: 40 });
    await waitForScreen("again", /^42-cli$/m); // the earlier output, replayed
    keys("again", "exit 7", "Enter");
    await waitForScreen("again", /^CLI-EXIT=7$/m);
    const afterExit = screen("again");
    expect(afterExit.slice(afterExit.indexOf("CLI-EXIT=7"))).toMatch(RESTORED);
    expect((await api.get(id)).exitCode).toBe(7);
  });

  it("restores the terminal when the CLI itself is killed, and leaves the session running", async () => {
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    suite.purgeLater(s.id);
    pane("killed", `node ${CLI} attach ${s.id}; echo CLI-EXIT=$?; stty -a; exec sleep 300`);
    await waitForScreen("killed", /\$ $/m); // the remote bash's prompt: sessions do not run as root
    // The pane runs sh, and sh runs the CLI: the one process this test signals.
    const shell = tmux("display-message", "-p", "-t", "killed", "#{pane_pid}").trim();
    const cliPid = Number(readFileSync(`/proc/${shell}/task/${shell}/children`, "utf8").trim());
    expect(readFileSync(`/proc/${cliPid}/cmdline`, "utf8")).toContain("ptybroker.js");
    process.kill(cliPid, "SIGTERM");
    await waitForScreen("killed", /^CLI-EXIT=143$/m);
    const after = screen("killed");
    expect(after.slice(after.indexOf("CLI-EXIT=143"))).toMatch(RESTORED);
    expect(after.slice(after.indexOf("CLI-EXIT=143"))).not.toMatch(/-icanon|-echo\b/);
    expect((await api.get(s.id)).status).toBe("running");
  });

  it("detached from inside vim, the local terminal leaves the alternate screen and vim's modes; vim keeps running", async () => {
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    suite.purgeLater(s.id);
    pane("vim", `node ${CLI} attach ${s.id}; echo CLI-EXIT=$?; exec sleep 300`);
    await waitForScreen("vim", /\$ $/m);
    keys("vim", "echo before-$((2*3))-vim", "Enter");
    await waitForScreen("vim", /^before-6-vim$/m);
    // Real vim, with the mouse on: it enters the alternate screen and turns on mouse reporting,
    // application cursor keys and the application keypad in the local terminal (tmux's pane).
    keys("vim", VIM.map((word) => (word.includes(" ") ? `'${word}'` : word)).join(" "), "Enter");
    await waitForVimModes("vim");
    const session = await api.get(s.id);
    const vimRunning = () =>
      liveSessionProcesses(session.pid as number).some((pid) => /^vim/.test(readFileSync(`/proc/${pid}/comm`, "utf8")));
    expect(vimRunning()).toBe(true);

    keys("vim", "C-]");
    await waitForScreen("vim", /^CLI-EXIT=0 *$/m);
    expect(modes("vim")).toEqual(RESTORED_MODES);
    // Back on the main screen: what was there before vim, then the CLI's note.
    const after = screen("vim");
    expect(after).toMatch(new RegExp(`^before-6-vim\\n[^\\n]*vim -u NONE[^\\n]*\\n(?:\\s*\\n)*\\[ptybroker: detached from ${s.id};`, "m"));
    expect((await api.get(s.id)).status).toBe("running");
    expect(vimRunning()).toBe(true);
  });

  it("the session ending under vim (SIGKILL: vim restores nothing), or the CLI killed under vim: the terminal is restored either way", async () => {
    const [ends, killed] = await Promise.all([api.create({ command: VIM[0], args: VIM.slice(1) }), api.create({ command: VIM[0], args: VIM.slice(1) })]);
    suite.purgeLater(ends.id, killed.id);
    pane("vim-ends", `node ${CLI} attach ${ends.id}; echo CLI-EXIT=$?; exec sleep 300`);
    pane("vim-killed", `node ${CLI} attach ${killed.id}; echo CLI-EXIT=$?; exec sleep 300`);
    await Promise.all([waitForVimModes("vim-ends"), waitForVimModes("vim-killed")]);

    const res = await api.request("POST", `/v1/sessions/${ends.id}/signal`, { signal: "SIGKILL" });
    expect(res.status).toBe(202);
    await waitForScreen("vim-ends", /^CLI-EXIT=137 *$/m);
    expect(screen("vim-ends")).toMatch(/^\[ptybroker: session ended by SIGKILL\]/m);
    expect(modes("vim-ends")).toEqual(RESTORED_MODES);

    const shell = tmux("display-message", "-p", "-t", "vim-killed", "#{pane_pid}").trim();
    const cliPid = Number(readFileSync(`/proc/${shell}/task/${shell}/children`, "utf8").trim());
    expect(readFileSync(`/proc/${cliPid}/cmdline`, "utf8")).toContain("ptybroker.js");
    process.kill(cliPid, "SIGTERM");
    await waitForScreen("vim-killed", /^CLI-EXIT=143 *$/m);
    expect(modes("vim-killed")).toEqual(RESTORED_MODES);
    expect((await api.get(killed.id)).status).toBe("running");
  });

  it("rides out dropped and silent networks: every byte printed once, typed input kept", async () => {
    const proxy = await startProxy(Number(new URL(url).port));
    cleanup.proxy(proxy);
    const gate = join(dir, "gate");
    const printed = join(dir, "printed");
    const notes = join(dir, "notes");
    const code = join(dir, "code");
    execFileSync("mkfifo", [gate]);
    // stdout is the pane (piped to a file byte for byte); the CLI's notes go to a file.
    pane(
      "net",
      `read _ < ${gate}; node ${CLI} run ${BASH} 2> ${notes}; echo $? > ${code}; exec sleep 300`,
      proxy.url,
    );
    tmux("pipe-pane", "-t", "net", "-o", `cat > ${printed}`);
    execFileSync("sh", ["-c", `echo go > ${gate}`]);
    const id = (await until(() => read(notes).match(/session ([\w-]+)/), 15_000, "session id"))[1];
    suite.purgeLater(id);
    // What the session printed: the pane also got the CLI's DSR fence after each replay
    // (docs/protocol.md §5, "Replies to replayed queries"), which this session never prints.
    const text = () => read(printed, "latin1").replaceAll("\x1b[5n", "");
    const wait = (check: () => unknown, deadlineMs: number, what: string) =>
      until(check, deadlineMs, what).catch(async (error: Error) => {
        const s = await api.get(id).catch((e: Error) => e.message);
        throw new Error(
          `session: ${JSON.stringify(s)} proxy connections ${proxy.connections()}\n` +
          `${error.message}\nnotes: ${read(notes)}\nprinted ${text().length} bytes, tail ${JSON.stringify(text().slice(-300))}\n--- pane ---\n${screen("net")}`,
        );
      });

    // Keys typed before the CLI has the terminal in raw mode would be echoed by it locally.
    await wait(() => /\$ $|# $/.test(text()), 15_000, "the remote prompt");

    // Connections reset in the middle of output, three times.
    keys("net", "seq 1 200000; echo seq-$((1+1))-done", "Enter");
    for (let cut = 0; cut < 3; cut++) {
      const before = text().length;
      await wait(() => text().length > before + 100_000 || /seq-2-done/.test(text()), 20_000, "output");
      proxy.cutAll();
      await wait(() => (read(notes).match(/reconnected after/g) ?? []).length > cut, 20_000, "reconnect");
    }
    await wait(() => /\r\nseq-2-done\r\n/.test(text()), 30_000, "seq finished");

    // A network that goes silent: no reset, nothing delivered. The heartbeat notices.
    const silentAt = Date.now();
    proxy.blackhole(true);
    await wait(() => /connection lost/.test(read(notes).split("reconnected").at(-1) ?? ""), 30_000, "loss noticed");
    const noticedMs = Date.now() - silentAt;
    keys("net", "echo typed-$((2+3))-offline", "Enter");
    const restoredAt = Date.now();
    proxy.blackhole(false);
    await wait(() => /[\r\n]typed-5-offline\r\n/.test(text()), 30_000, "offline input delivered");
    const recoveredMs = Date.now() - restoredAt;
    console.log(`cli: silent network noticed after ${noticedMs} ms; input typed offline ran ${recoveredMs} ms after the network returned`);

    keys("net", "exit 0", "Enter");
    await wait(() => read(code).trim() === "0", 15_000, "CLI exit code 0");
    const session = await api.get(id);
    expect(session).toMatchObject({ status: "exited", exitCode: 0 });
    // Every byte the session produced reached the terminal exactly once, in order.
    await wait(() => text().length >= session.offset + RESET_MODES.length, 10_000, "pipe-pane caught up");
    // …and then, as the CLI let go of the terminal, the modes it resets (no alternate screen
    // was entered, so no CSI ? 1049 l, which would move the cursor to a saved position).
    const logged = Buffer.concat([(await fetchOutput(api, id, 0)).bytes, Buffer.from(RESET_MODES, "latin1")]);
    const shown = Buffer.from(text(), "latin1");
    let differAt = 0;
    while (differAt < logged.length && shown[differAt] === logged[differAt]) differAt++;
    expect({ differAt, shown: shown.length, head: JSON.stringify(shown.subarray(0, 60).toString("latin1")) }).toEqual({ differAt: logged.length, shown: logged.length, head: JSON.stringify(logged.subarray(0, 60).toString("latin1")) });
    expect(read(notes).match(/reconnected after/g)?.length).toBeGreaterThanOrEqual(4);
  }, 120_000);
});

/** The CLI run to its end with `stdin` piped in and PTYBROKER_URL set to `brokerUrl`: its exit code and streams. */
function run(args: string[], stdin: string, brokerUrl = url): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn("node", [CLI, ...args], {
    env: { ...process.env, PTYBROKER_URL: brokerUrl, PTYBROKER_API_KEY: TENANTS.acme },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const got = { out: "", err: "" };
  child.stdout.setEncoding("utf8").on("data", (text: string) => (got.out += text));
  child.stderr.setEncoding("utf8").on("data", (text: string) => (got.err += text));
  child.stdin.end(stdin);
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, ...got })));
}

describe("ptybroker errors", () => {
  it("name the URL it could not reach and why, and exit 1", async () => {
    const port = await freePort(); // nothing listens there
    expect(await run(["ls"], "", `http://127.0.0.1:${port}`)).toEqual({
      code: 1,
      out: "",
      err: `ptybroker: cannot reach http://127.0.0.1:${port}/v1/sessions: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    });
  });

  it("PTYBROKER_URL without a scheme: a usage error that suggests http://, exit 2; with /v1 or /v1/ at the end: it works", async () => {
    const bare = url.replace(/^http:\/\//, "");
    const refused = await run(["ls"], "", bare);
    expect({ code: refused.code, out: refused.out, first: refused.err.split("\n")[0] }).toEqual({
      code: 2,
      out: "",
      first: `ptybroker: PTYBROKER_URL=${bare} is not an http:// or https:// URL; did you mean ${url}?`,
    });
    const s = await suite.session({ command: "/bin/sh", args: ["-c", "exec sleep 300"], label: "v1-url" });
    for (const withV1 of [`${url}/v1`, `${url}/v1/`]) {
      const listed = await run(["ls"], "", withV1);
      expect({ code: listed.code, err: listed.err }, withV1).toEqual({ code: 0, err: "" });
      expect(listed.out.split("\n").filter((l) => l.startsWith(`${s.id} `)), withV1).toHaveLength(1);
    }
  });
});

describe("ptybroker events", () => {
  /** `ptybroker events …` as a child process, its output gathered as it comes. */
  function watch(args: string[]) {
    const child = spawn("node", [CLI, "events", ...args], {
      env: { ...process.env, PTYBROKER_URL: url, PTYBROKER_API_KEY: TENANTS.acme },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const got = { out: "", err: "" };
    child.stdout.setEncoding("utf8").on("data", (text: string) => (got.out += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (got.err += text));
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once("exit", (code, signal) => resolve([code, signal])),
    );
    return {
      child,
      got,
      exited,
      /** Complete lines printed so far. */
      lines: () => got.out.split("\n").slice(0, -1),
      stop: () => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      },
    };
  }

  it("--json prints the created event of a session created after it started; --after replays it; Ctrl+C exits 0", async () => {
    const json = watch(["--json"]);
    try {
      await until(() => json.got.err.includes("[ptybroker: watching events]"), 15_000, "the CLI watching").catch(
        (error: Error) => {
          throw new Error(`${error.message}\nstderr: ${json.got.err}`);
        },
      );
      const s = await api.create({ command: "/bin/true", label: "cli-events" });
      suite.purgeLater(s.id);
      const created = await until(
        () => json.lines().map((l) => JSON.parse(l)).find((e) => e.type === "session.created" && e.session.id === s.id),
        15_000,
        "the created event printed",
      );
      expect(Object.keys(created).sort()).toEqual(["at", "id", "session", "type"]);
      expect(Number.isSafeInteger(created.id)).toBe(true);
      expect(new Date(created.at).toISOString()).toBe(created.at);
      expect(created.session).toMatchObject({ id: s.id, command: "/bin/true", args: [], label: "cli-events" });
      // Every line is one event, ids one after another from the first.
      const ids = json.lines().map((l) => JSON.parse(l).id);
      expect(ids).toEqual(ids.map((_, i) => ids[0] + i));

      // The plain form, resumed from just before it: the same event, as `ID TYPE SESSION STATUS`.
      const plain = watch(["--after", String(created.id - 1)]);
      try {
        await until(() => plain.lines().length > 0, 15_000, "the replayed event printed");
        expect(plain.lines()[0]).toBe(`${created.id} session.created ${s.id} ${created.session.status}`);
        plain.child.kill("SIGINT");
        expect(await plain.exited).toEqual([0, null]);
        expect(plain.got.err).toBe(`[ptybroker: watching events after ${created.id - 1}]\n`);
      } finally {
        plain.stop();
      }

      json.child.kill("SIGINT"); // Ctrl+C
      expect(await json.exited).toEqual([0, null]);
      expect(json.got.err).toBe("[ptybroker: watching events]\n");
    } finally {
      json.stop();
    }
  });
});

describe("ptybroker exec and record", () => {
  it("exec: its stdin from ours, stdout and stderr apart, its exit code as ours; 124 on a timeout", async () => {
    expect(await run(["exec", "--", "/bin/sh", "-c", "tr a-z A-Z; echo oops >&2; exit 3"], "piped\n")).toEqual({
      code: 3,
      out: "PIPED\n",
      err: "oops\n",
    });
    const slow = await run(["exec", "--timeout", "1", "--", "/bin/sleep", "30"], "");
    expect(slow.code).toBe(124);
    const timedOut = slow.err.match(/^\[ptybroker: timed out after 1 s and killed \(session ([\w-]+)\)\]\n$/);
    expect(timedOut, slow.err).not.toBeNull();
    suite.purgeLater(timedOut?.[1] ?? "");
  });

  it("exec: 128 + n for a signal; --stdin-file; --json answers the whole result; a bad flag or a missing file is said so", async () => {
    expect(await run(["exec", "--stdin-file", "/dev/null", "--", "/bin/sh", "-c", "echo before; kill -TERM $$"], "ignored")).toEqual({
      code: 128 + 15,
      out: "before\n",
      err: "",
    });
    const file = join(dir, "exec-stdin.txt");
    writeFileSync(file, "from a file €\n");
    const json = await run(["exec", "--json", "--stdin-file", file, "--", "/bin/sh", "-c", "cat; echo e >&2; exit 4"], "ignored");
    expect(json.code).toBe(4);
    expect(json.err).toBe("");
    const result = JSON.parse(json.out) as { id: string };
    suite.purgeLater(result.id);
    expect(result).toMatchObject({ exitCode: 4, signal: null, stdout: "from a file €\n", stderr: "e\n", truncated: false, timedOut: false });
    expect((await api.get(result.id)).pty).toBe(false);

    const badFlag = await run(["exec", "--max-output", "lots", "--", "true"], "");
    expect(badFlag.code).toBe(2);
    expect(badFlag.err.split("\n")[0]).toBe('ptybroker: --max-output takes a byte count, got "lots"');
    const missing = await run(["exec", "--stdin-file", join(dir, "missing"), "--", "true"], "");
    expect(missing).toEqual({ code: 1, out: "", err: `ptybroker: ENOENT: no such file or directory, open '${join(dir, "missing")}'\n` });
  });

  it("record: the session's asciicast on stdout, o events equal to its output", async () => {
    const s = await api.create({ command: "/bin/sh", args: ["-c", "printf 'rec €\\n'"] });
    suite.purgeLater(s.id);
    const ended = await until(async () => ((await api.get(s.id)).status === "exited" ? api.get(s.id) : undefined), 15_000, "the exit");
    const { stdout } = await cli(["record", s.id]);
    const [header, ...events] = stdout.toString("utf8").trimEnd().split("\n").map((text) => JSON.parse(text) as unknown);
    expect(header).toMatchObject({ version: 2, width: 80, height: 24 });
    const shown = (events as [number, string, string][]).filter((e) => e[1] === "o").map((e) => e[2]).join("");
    expect(Buffer.from(shown)).toEqual((await fetchOutput(api, s.id, 0)).bytes);
    expect(shown).toBe("rec €\r\n");
    expect(ended.offset).toBe(Buffer.byteLength(shown));
  });

  it("record --from --to: that byte range; a pty: false session's stdout and stderr in output order; an unknown id is NOT_FOUND with nothing on stdout", async () => {
    const s = await api.create({ pty: false, command: "/bin/sh", args: ["-c", "echo one; echo two >&2; echo three"] });
    suite.purgeLater(s.id);
    await until(async () => (await api.get(s.id)).status === "exited", 15_000, "the exit");
    const output = (await fetchOutput(api, s.id, 0)).bytes;
    // Two pipes are read apart: their lines may come in either order, and the log keeps the one they came in.
    expect(output.toString().split("\n").sort()).toEqual(["", "one", "three", "two"]);
    const oEvents = (cast: Buffer) => {
      const [header, ...events] = cast.toString("utf8").trimEnd().split("\n").map((text) => JSON.parse(text) as unknown);
      expect(header).toMatchObject({ version: 2 });
      return (events as [number, string, string][]).filter((e) => e[1] === "o").map((e) => e[2]).join("");
    };
    expect(oEvents((await cli(["record", s.id])).stdout)).toBe(output.toString());
    expect(oEvents((await cli(["record", s.id, "--from", "4", "--to", "8"])).stdout)).toBe(output.subarray(4, 8).toString());

    const missing = await run(["record", "no-such-session"], "");
    expect(missing.code).toBe(1);
    expect(missing.out).toBe("");
    expect(missing.err).toMatch(/^ptybroker: NOT_FOUND: .+\n$/);
  });
});
