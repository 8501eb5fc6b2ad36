// The shell tracker and `run` against a real bash on a real PTY, started with the shell
// integration as a hosted session's default shell is: exit codes, state carried between runs,
// clean output without the prompt or the echoed line, timeouts, BUSY, commands typed by hand,
// truncation. Waits are on conditions with deadlines; no timing thresholds.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MAX_RUN_OUTPUT_BYTES } from "../../shared/agent.js";
import type { ShellMark } from "../../shared/shell-marks.js";
import { installShellIntegration } from "./shell-integration.js";
import { clip } from "./shell-tracker.js";
import { TestShell, until } from "./shell.test-kit.js";

let dir: string;
let initFile: string;
const shells: TestShell[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "shell-tracker-test-"));
  initFile = installShellIntegration(join(dir, "workspace"));
});
afterEach(async () => {
  await Promise.all(shells.splice(0).map((shell) => shell.close()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The first D mark after `offset` (PROMPT_COMMAND's: PS1's own D follows it). */
function firstD(s: TestShell, offset: number): ShellMark | undefined {
  return s.marks.find((m) => m.kind === "D" && m.start >= offset);
}

async function shell(): Promise<TestShell> {
  const home = mkdtempSync(join(dir, "home-"));
  const s = new TestShell({ home, initFile });
  shells.push(s);
  await s.prompt(0);
  return s;
}

describe("run", () => {
  it("answers each command's exit code and its own output, state carrying over", async () => {
    const s = await shell();
    expect((await s.ran("true")).exitCode).toBe(0);
    expect((await s.ran("false")).exitCode).toBe(1);
    expect((await s.ran("(exit 2)")).exitCode).toBe(2);
    await s.ran("cd /tmp");
    const pwd = await s.ran("pwd");
    expect(pwd).toMatchObject({ command: "pwd", output: "/tmp\n", exitCode: 0, timedOut: false, truncated: false });
    await s.ran("X=42");
    expect((await s.ran('echo "x is $X"')).output).toBe("x is 42\n");
  });

  it("types a run asked for before the first prompt once the prompt is there", async () => {
    const s = new TestShell({ home: mkdtempSync(join(dir, "home-")), initFile });
    shells.push(s);
    expect(s.count("B")).toBe(0);
    expect(await s.ran("echo first")).toMatchObject({ output: "first\n", exitCode: 0 });
  });

  it("gives the output as text: escapes removed, no prompt, no echoed command line", async () => {
    const s = await shell();
    const red = await s.ran("printf '\\033[31mred\\033[0m\\n'");
    expect(red.output).toBe("red\n");
    const two = await s.ran("echo one; echo two >&2");
    expect(two.output).toBe("one\ntwo\n");
    // Its range is exactly the bytes between the C and D marks of that command.
    const c = s.marks.filter((m) => m.kind === "C").at(-1);
    expect([two.from, two.to]).toEqual([c?.end, firstD(s, two.from)?.start]);
    expect(s.output().subarray(two.from, two.to).toString("utf8")).toBe("one\r\ntwo\r\n");
    // A tab is typed as text (a paste), not as completion.
    expect((await s.ran("printf 'a\\tb\\n'")).output).toBe("a\tb\n");
  });

  it("times out with exitCode null, the command goes on, and its D reports it; BUSY meanwhile", async () => {
    const s = await shell();
    const slow = await s.ran("sleep 5", 300);
    expect(slow).toMatchObject({ command: "sleep 5", exitCode: null, timedOut: true, output: "" });
    expect(slow.to).toBeGreaterThanOrEqual(slow.from);
    const busy = await s.run("true");
    expect(busy).toMatchObject({ ok: false, code: "BUSY" });
    await until("sleep's command report", () => s.commands().some((c) => c.command === "sleep 5"), 15_000);
    const report = s.commands().find((c) => c.command === "sleep 5");
    expect(report).toMatchObject({ exitCode: 0, from: slow.from });
    expect(report?.to).toBeGreaterThanOrEqual(slow.to);
    // At the prompt again: runs go through.
    await s.prompt(s.count("B") - 1);
    expect((await s.ran("echo after")).output).toBe("after\n");
  }, 20_000);

  it("reports a command typed by hand with its text and exit code", async () => {
    const s = await shell();
    s.write("echo hi\r");
    await until("a command report", () => s.commands().length > 0);
    expect(s.commands()[0]).toMatchObject({ command: "echo hi", exitCode: 0 });
    // Edited before Enter: the line as the screen shows it.
    s.write("echo abx\x7fc; false\r");
    await until("a second report", () => s.commands().length > 1);
    expect(s.commands()[1]).toMatchObject({ command: "echo abc; false", exitCode: 1 });
    // Longer than the screen is wide: the rows it wraps over are one line again.
    const long = `echo ${"0123456789".repeat(17)}`;
    s.write(`${long}\r`);
    await until("a third report", () => s.commands().length > 2);
    expect(s.commands()[2]).toMatchObject({ command: long, exitCode: 0 });
    // A run's report carries the command it typed, and comes before its answer.
    const run = await s.ran("echo ran");
    const reported = s.commands().at(-1);
    expect(reported).toMatchObject({ command: "echo ran", exitCode: 0, from: run.from, to: run.to });
    const reportAt = s.messages.indexOf(reported as (typeof s.messages)[number]);
    expect(reportAt).toBeLessThan(s.messages.findIndex((m) => m.type === "run_result" && m.result.command === "echo ran"));
  });

  it("reports no command for an empty line or Ctrl+C at the prompt", async () => {
    const s = await shell();
    let b = s.count("B");
    s.write("\r");
    await s.prompt(b);
    b = s.count("B");
    s.write("\x03");
    await s.prompt(b);
    b = s.count("B");
    s.write("true\r");
    await until("true's report", () => s.commands().length > 0);
    expect(s.commands().map((c) => c.command)).toEqual(["true"]);
  });

  it("cuts the output at 1 MiB of text and still ends the range at the D mark", async () => {
    const s = await shell();
    const big = await s.ran("head -c 5000000 /dev/zero | tr '\\0' a", 60_000);
    expect(big.truncated).toBe(true);
    expect(big.exitCode).toBe(0);
    expect(big.output.length).toBe(MAX_RUN_OUTPUT_BYTES);
    expect(/^a+$/.test(big.output)).toBe(true);
    expect(big.to).toBe(firstD(s, big.from)?.start);
    expect(big.to - big.from).toBeGreaterThanOrEqual(5_000_000);
  }, 60_000);

  it("refuses without integration, on a line being typed, and once the shell has exited", async () => {
    const home = mkdtempSync(join(dir, "home-"));
    const plain = new TestShell({ home });
    shells.push(plain);
    await until("a prompt", () => plain.output().includes("#") || plain.output().includes("$"));
    expect(await plain.run("true")).toMatchObject({ ok: false, code: "NO_SHELL_INTEGRATION" });

    const s = await shell();
    s.write("echo half");
    await until("the echo", () => s.output().toString().includes("echo half"));
    expect(await s.run("true")).toMatchObject({ ok: false, code: "BUSY" });
    s.write("\x15"); // Ctrl+U: the line is empty again, but the shell's output does not say so
    s.write("\r");
    await s.prompt(s.count("B"));
    expect((await s.ran("echo ok")).output).toBe("ok\n");
    const exit = await s.ran("exit 3");
    expect(exit.exitCode).toBe(3);
    await until("the exit", () => s.exit !== null);
    expect(await s.run("true")).toMatchObject({ ok: false, code: "SESSION_EXITED" });
  });

  it("answers a line that does not parse with the shell's message and status", async () => {
    const s = await shell();
    const bad = await s.ran("echo (");
    expect(bad.exitCode).toBe(2);
    expect(bad.output).toMatch(/syntax error/);
    expect(bad.output).not.toMatch(/echo \(/);
  });

  it("is not ended by the prompt drawn again (a resize) while it is being typed", async () => {
    const s = await shell();
    for (const [cols, rows] of [
      [60, 20],
      [80, 24],
      [100, 30],
    ]) {
      s.pty.resize(cols, rows);
      s.agent.resize(cols, rows);
      expect(await s.ran("echo x")).toMatchObject({ output: "x\n", exitCode: 0 });
    }
  });

  it("sends the newest commands again after a resume", async () => {
    const s = await shell();
    await s.ran("echo 1");
    await s.ran("echo 2");
    const before = s.commands().length;
    s.agent.resumed();
    expect(s.commands().slice(before).map((c) => c.command)).toEqual(["echo 1", "echo 2"]);
  });
});

describe("clip (a command's reported text)", () => {
  it("removes trailing white space and line terminators as /\\s+$/ did, and bounds the length", () => {
    for (const text of ["ls -l  ", "ls\t\r\n", "a b\u00a0\u2003\u2028\ufeff", "  keep leading", "x", "", " \n "]) {
      expect(clip(text)).toBe(text.replace(/\s+$/, ""));
    }
    expect(clip("y".repeat(20_000))).toHaveLength(16384);
  });

  it("takes a command line of a million spaces and an x at once (the regular expression was quadratic: it never finished)", () => {
    const line = `${" ".repeat(1_000_000)}x`;
    expect(clip(line)).toBe(" ".repeat(16384));
    expect(clip(`x${line}${" ".repeat(1_000_000)}`)).toBe(`x${" ".repeat(16383)}`);
  });
});
