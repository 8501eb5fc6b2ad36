// The shell integration against a real bash on a real PTY: the prompt looks exactly as `bash -l`
// draws it (the system's and the user's dotfiles, a PS1 set later), the marks come around each
// command with its exit status, the user's own PROMPT_COMMAND still sees the real `$?`. And the
// file every session sources cannot be changed from a session: attacked as another user.
import { copyFileSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { dropStep, requireTool, rootStep } from "../isolation/launch.js";
import { spawnPty } from "../process/pty.js";
import { BASH_INIT, installShellIntegration, integratedBashArgs, isLoginBash } from "./shell-integration.js";
import { lookUpUser, prepareWorkspaceRoot } from "../isolation/session-user.js";
import { TestShell, until } from "./shell.test-kit.js";

let dir: string;
let initFile: string;
const shells: TestShell[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "shell-integration-test-"));
  initFile = installShellIntegration(join(dir, "workspace"));
});
afterEach(async () => {
  await Promise.all(shells.splice(0).map((shell) => shell.close()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A home with Debian's default dotfiles (/etc/skel) and `files`. */
function home(files: Record<string, string> = {}): string {
  const folder = mkdtempSync(join(dir, "home-"));
  for (const name of [".profile", ".bashrc", ".bash_logout"]) {
    try {
      copyFileSync(join("/etc/skel", name), join(folder, name));
    } catch {
      // not on this system
    }
  }
  for (const [name, text] of Object.entries(files)) writeFileSync(join(folder, name), text);
  return folder;
}

/** The same session twice: with the integration, and as `bash -l` without it, each in its own copy of the home. */
function pair(files: Record<string, string> = {}): { integrated: TestShell; plain: TestShell } {
  const integrated = new TestShell({ home: home(files), initFile });
  const plain = new TestShell({ home: home(files) });
  shells.push(integrated, plain);
  return { integrated, plain };
}

/** The visible screen as text, once it shows `rows` non-empty rows ending in `last`. */
async function screenWhen(shell: TestShell, test: (lines: string[]) => boolean): Promise<string[]> {
  let lines: string[] = [];
  const deadline = Date.now() + 10_000;
  for (;;) {
    lines = (await shell.screen()).lines;
    if (test(lines)) return lines;
    if (Date.now() > deadline) throw new Error(`the screen never showed what was expected:\n${lines.join("\n")}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const shown = (lines: string[]) => lines.filter((line) => line.length > 0);
const promptLike = /[#$>]$/;

/** Types each line at the prompt, one at a time: the next once the screen shows `rows` more lines and a prompt last. */
async function type(shell: TestShell, lines: string[], rowsEach = 1): Promise<string[]> {
  let screen = await screenWhen(shell, (l) => shown(l).length > 0 && promptLike.test(shown(l).at(-1) as string));
  for (const line of lines) {
    const before = shown(screen).length;
    shell.write(`${line}\r`);
    screen = await screenWhen(shell, (l) => shown(l).length >= before + rowsEach && promptLike.test(shown(l).at(-1) as string));
  }
  return screen;
}

describe("isLoginBash", () => {
  it("takes bash with no arguments, -l or --login, and nothing else", () => {
    expect(isLoginBash("/bin/bash", ["-l"])).toBe(true);
    expect(isLoginBash("/usr/local/bin/bash", ["--login"])).toBe(true);
    expect(isLoginBash("/bin/bash", [])).toBe(true);
    expect(isLoginBash("/bin/bash", ["--norc", "--noprofile"])).toBe(false);
    expect(isLoginBash("/bin/bash", ["-c", "echo"])).toBe(false);
    expect(isLoginBash("/bin/sh", ["-l"])).toBe(false);
    expect(isLoginBash("/usr/bin/rbash", [])).toBe(false);
  });
});

describe("bash with the integration", () => {
  it("draws the same prompt and screen as bash -l, with marks around each command and its status", async () => {
    const { integrated, plain } = pair();
    const both = [integrated, plain];
    const first = await Promise.all(both.map((s) => type(s, [])));
    expect(shown(first[0])).toHaveLength(1);
    expect(first[0]).toEqual(first[1]);
    const after = await Promise.all(both.map((s) => type(s, ["true", "false", "(exit 2)", "echo hi"])));
    expect(after[0]).toEqual(after[1]);
    expect(shown(after[0])).toHaveLength(6);
    expect(shown(after[0])).toContain("hi");

    // D (first prompt, no C: nothing ran), then A B C D around each command, in order, with its
    // status (twice: from PROMPT_COMMAND, and from PS1 should PROMPT_COMMAND be replaced).
    const kinds = integrated.marks.map((m) => (m.kind === "D" ? `D${m.exitCode}` : m.kind)).join(" ");
    expect(kinds).toBe("D0 D0 A B C D0 D0 A B C D1 D1 A B C D2 D2 A B C D0 D0 A B");
    expect(integrated.commands().map((c) => [c.command, c.exitCode])).toEqual([
      ["true", 0],
      ["false", 1],
      ["(exit 2)", 2],
      ["echo hi", 0],
    ]);
    // The marks are all the integration adds: without them the bytes are the same.
    // eslint-disable-next-line no-control-regex -- the marks are ESC ] … BEL
    const withoutMarks = integrated.output().toString("latin1").replace(/\x1b\]133;[ABCD](;\d+)?\x07/g, "");
    expect(withoutMarks).toBe(plain.output().toString("latin1"));
  });

  it("keeps a PS1 and PROMPT_COMMAND of the user's (string or array): the same look, the real $?", async () => {
    const profile = [
      "PS1='[$?]> '",
      `PROMPT_COMMAND='echo "pc=$?" >> ~/pc.log'`,
      "",
    ].join("\n");
    const { integrated, plain } = pair({ ".bash_profile": profile });
    const lines = ["false", "(exit 7)", "PROMPT_COMMAND+=('echo \"arr=$?\" >> ~/pc.log')", "(exit 5)"];
    const screens = await Promise.all([integrated, plain].map((s) => type(s, lines)));
    expect(screens[0]).toEqual(screens[1]);
    expect(shown(screens[0])).toEqual(["[0]> false", "[1]> (exit 7)", "[7]> PROMPT_COMMAND+=('echo \"arr=$?\" >> ~/pc.log')", "[0]> (exit 5)", "[5]>"]);
    const log = (s: TestShell) => readFileSync(join(s.options.home, "pc.log"), "utf8");
    expect(log(integrated)).toBe(log(plain));
    expect(log(integrated)).toBe("pc=0\npc=1\npc=7\npc=0\narr=0\npc=5\narr=5\n");
    expect(integrated.commands().map((c) => c.exitCode)).toEqual([1, 7, 0, 5]);
  });

  it("puts the marks back when the user sets PS1 or PROMPT_COMMAND afterwards", async () => {
    const s = new TestShell({ home: home(), initFile });
    shells.push(s);
    const screen = await type(s, ["PS1='new> '", "PROMPT_COMMAND='history -a'", "false"]);
    expect(shown(screen).slice(1)).toEqual(["new> PROMPT_COMMAND='history -a'", "new> false", "new>"]);
    await until("three commands", () => s.commands().length === 3);
    expect(s.commands().map((c) => [c.command, c.exitCode])).toEqual([
      ["PS1='new> '", 0],
      ["PROMPT_COMMAND='history -a'", 0],
      ["false", 1],
    ]);
  });
});

describe("the integration file", () => {
  it("is put back whole by the runner: a link or a loose folder at its place is replaced", () => {
    const workspace = mkdtempSync(join(dir, "ws-"));
    const folder = join(workspace, ".ptybroker-shell");
    mkdirSync(folder);
    chmodSync(folder, 0o777);
    symlinkSync("/etc/passwd", join(folder, "bash-init"));
    const file = installShellIntegration(workspace);
    expect(lstatSync(file).isFile()).toBe(true);
    expect(lstatSync(file).mode & 0o7777).toBe(0o644);
    expect(lstatSync(folder).mode & 0o7777).toBe(0o755);
    expect(readFileSync(file, "utf8")).toBe(BASH_INIT);
    expect(readFileSync("/etc/passwd", "utf8")).not.toBe(BASH_INIT);
  });

  // Must run as root (it switches to `nobody`, as a root runner does); CI runs as root.
  it("is read by a session user's bash, and that user can neither change nor replace it", async () => {
    if (process.getuid?.() !== 0) throw new Error("this test must run as root: it starts a shell as the user nobody");
    const nobody = lookUpUser("nobody");
    if (!nobody) throw new Error("no user nobody");
    // As a root runner lays out its workspace: root's, 0711.
    const workspace = mkdtempSync(join(tmpdir(), "shell-integration-ws-"));
    try {
      prepareWorkspaceRoot(workspace);
      const file = installShellIntegration(workspace);
      const folder = join(workspace, ".ptybroker-shell");
      const attack = [
        'F=$0; D=${F%/*}',
        'try() { if sh -c "$1" 2>/dev/null; then echo "ALLOWED: $1"; else echo "refused: $1"; fi; }',
        'try "echo evil >> $F"',
        'try "echo evil > $F"',
        'try "rm -f $F && test ! -e $F"',
        'try "mv $F $D/moved"',
        'try "ln -sf /tmp/evil $F"',
        'try "touch $D/other"',
        'try "chmod 666 $F"',
        'try "mv $D $D.x"',
        'try "rmdir $D"',
        'try "cat $F > /dev/null"',
        "echo over",
      ].join("\n");
      const setpriv = requireTool("setpriv", "the test");
      const launch = rootStep(dropStep(setpriv, nobody, ["/bin/sh", "-c", attack, file]), []);
      const attacker = spawnPty({ ...launch, cwd: "/", env: { PATH: "/usr/bin:/bin", HOME: "/nonexistent" }, cols: 200, rows: 24, terminalOwner: nobody });
      let text = "";
      attacker.onData((bytes) => (text += bytes.toString("utf8")));
      await until("the attack is over", () => text.includes("over"));
      const lines = text.split(/\r?\n/).filter((line) => line.startsWith("ALLOWED") || line.startsWith("refused"));
      expect(lines).toHaveLength(10);
      // Reading is the one thing allowed; everything else is refused.
      expect(lines.filter((line) => line.startsWith("ALLOWED"))).toEqual([`ALLOWED: cat ${file} > /dev/null`]);
      expect(readFileSync(file, "utf8")).toBe(BASH_INIT);
      expect(lstatSync(file)).toMatchObject({ uid: 0, gid: 0 });
      expect(lstatSync(file).mode & 0o7777).toBe(0o644);
      expect(lstatSync(folder)).toMatchObject({ uid: 0, gid: 0 });
      expect(lstatSync(folder).mode & 0o7777).toBe(0o755);

      // And that user's bash sources it: marks around its commands.
      const shellLaunch = rootStep(dropStep(setpriv, nobody, ["/bin/bash", ...integratedBashArgs(file)]), []);
      const bash = spawnPty({ ...shellLaunch, cwd: "/", env: { PATH: "/usr/bin:/bin", HOME: "/nonexistent", TERM: "xterm-256color" }, cols: 80, rows: 24, terminalOwner: nobody });
      let out = "";
      bash.onData((bytes) => (out += bytes.toString("latin1")));
      let exited = false;
      bash.onExit(() => (exited = true));
      await until("a marked prompt", () => out.includes("\x1b]133;B\x07"));
      bash.write(Buffer.from("id -un; exit\r"));
      await until("the shell's exit", () => exited);
      expect(out).toContain("\x1b]133;C\x07nobody\r\n");
    } finally {
      rmSync(workspace, { recursive: true, force: true });
    }
  });
});
