// An idle screen drops its emulator (screen.ts, `drop`; screen-idle.ts, the sweep) and makes it
// again from its checkpoint: the screen then is, and goes on being, byte for byte what an emulator
// never dropped shows, fed the same bytes. Where the checkpoint cannot carry the state (a charset,
// a saved cursor, a sequence cut in the middle) the emulator is kept. A real bash at its prompt:
// a command typed half before the drop and half after is reported as typed, and `run` is exact.
// Waits are on conditions with deadlines; no timing thresholds.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { TerminalScreen } from "./screen.js";
import { installShellIntegration } from "./shell-integration.js";
import { TestShell, until } from "./shell.test-kit.js";

const screens: TerminalScreen[] = [];
afterEach(() => {
  for (const screen of screens.splice(0)) screen.dispose();
});

function screen(options: { idleMs?: number; onIdle?: (outcome: "dropped" | "restored") => void } = {}): TerminalScreen {
  const s = new TerminalScreen({ cols: 80, rows: 24, ...options });
  screens.push(s);
  return s;
}

const PROMPT = "\x1b]0;user@host: ~\x07\x1b[01;32muser@host\x1b[00m:\x1b[01;34m~\x1b[00m$ ";

/** [name, bytes before the drop, bytes after it]: each exercises what the drop must keep. */
const KEPT: [string, string, string][] = [
  ["a prompt with colours and a title", PROMPT, "ls\r\n\x1b[01;34mdir\x1b[0m  file\r\n" + PROMPT],
  ["a wrapped line", "$ " + "x".repeat(100), "\x1b[D\x1b[Dyy\r\n$ "],
  ["a pending wrap at the last column", "y".repeat(80), "Z and on"],
  ["a scroll region (a status line kept out of it)", "\x1b[1;20r\x1b[24;1H\x1b[7mstatus\x1b[m\x1b[20;1Hbody", "\r\n1\r\n2\r\n3\x1b[21;1Houtside"],
  ["the alternate screen (vim-like)", "$ vim\r\n\x1b[?1049h\x1b[22;0;0t\x1b[?1h\x1b=\x1b[H\x1b[2J~\r\n~\r\n\x1b[24;1H\"f\" 0L\x1b[1;1H", "\x1b[1;1Hi\x1b[?1049l\x1b[23;0;0t\x1b[?1l\x1b>$ "],
  ["bracketed paste on", "\x1b[?2004h$ ", "\x1b[?2004l\r\n$ "],
  ["a title", "\x1b]2;my title\x07$ ", "x\x1b]2;next\x07"],
  ["a combining character after the drop", "caf\x65", "\u0301 and \u00e9"],
  ["mouse tracking and application keys", "\x1b[?1000h\x1b[?1h$ ", "a\x1b[?1000l"],
];

/** Kept by the emulator: the checkpoint cannot carry them. */
const DECLINED: [string, string, string][] = [
  ["a DEC graphics charset", "\x1b(0lqk", "qqj\x1b(Bx"],
  ["a saved cursor", "ab\x1b7cd", "\x1b8X"],
  ["an escape sequence cut at the end", "ab\x1b[3", "1mred"],
  ["a character cut at the end", "ab\xe2", "\x82\xac"],
  ["a tab stop cleared", "a\tb\x1b[3g", "\r\tc"],
  ["SGR mouse reports (not serialized)", "\x1b[?1000h\x1b[?1006h$ ", "a"],
];

const bytes = (text: string) => Buffer.from(text, text.includes("\xe2") || text.includes("\x82") ? "latin1" : "utf8");

async function fed(s: TerminalScreen, offset: number, text: string): Promise<number> {
  const data = bytes(text);
  s.write(offset, data);
  await s.parsed();
  return offset + data.byteLength;
}

describe("an idle screen's emulator", () => {
  it.each(KEPT)("dropped and made again, exactly: %s", async (_, before, after) => {
    const outcomes: string[] = [];
    const idle = screen({ onIdle: (outcome) => outcomes.push(outcome) });
    const kept = screen();
    let offset = await fed(idle, 0, before);
    await fed(kept, 0, before);
    expect(await idle.drop()).toBe(true);
    expect(idle.dropped).toBe(true);
    // While dropped: the screen it showed.
    expect(await idle.snapshot()).toEqual(await kept.snapshot());
    offset = await fed(idle, offset, after);
    await fed(kept, kept.offset, after);
    expect(idle.dropped).toBe(false);
    expect(outcomes).toEqual(["dropped", "restored"]);
    expect(await idle.snapshot()).toEqual(await kept.snapshot());
    expect(idle.offset).toBe(offset);
  });

  it.each(DECLINED)("kept when the checkpoint cannot carry it: %s", async (_, before, after) => {
    const idle = screen();
    const kept = screen();
    await fed(idle, 0, before);
    await fed(kept, 0, before);
    expect(await idle.drop()).toBe(false);
    expect(idle.dropped).toBe(false);
    await fed(idle, idle.offset, after);
    await fed(kept, kept.offset, after);
    expect(await idle.snapshot()).toEqual(await kept.snapshot());
  });

  it("carries the line kept above the screen: a top row that continues it, and a taller resize that shows it again", async () => {
    // The long line's first row is the one above the screen; its other two rows start the screen.
    const text = `${Array.from({ length: 30 }, (_, n) => `line ${n}\r\n`).join("")}${"L".repeat(150)}M${"N".repeat(19)}\r\n${Array.from({ length: 21 }, (_, n) => `r ${n}\r\n`).join("")}$ `;
    const idle = screen();
    const kept = screen();
    await fed(idle, 0, text);
    await fed(kept, 0, text);
    expect((await kept.snapshot()).lines[0]).toBe(`${"L".repeat(70)}M${"N".repeat(9)}`);
    expect(await idle.drop()).toBe(true);
    for (const s of [idle, kept]) s.resize(80, 30);
    await fed(idle, idle.offset, "x");
    await fed(kept, kept.offset, "x");
    const shown = await kept.snapshot();
    expect(shown.lines.slice(0, 2)).toEqual(["L".repeat(80), `${"L".repeat(70)}M${"N".repeat(9)}`]); // the line above came back
    expect(await idle.snapshot()).toEqual(shown);
  });

  it("is made again at its size after a resize, and a position on it survives", async () => {
    const idle = screen();
    const kept = screen();
    for (const s of [idle, kept]) {
      await fed(s, 0, "line\r\n$ ");
      s.resize(60, 10);
      await s.parsed();
    }
    const positions = await Promise.all(
      [idle, kept].map((s) => new Promise<ReturnType<TerminalScreen["cursorPosition"]>>((resolve) => s.afterParsed(() => resolve(s.cursorPosition())))),
    );
    expect(await idle.drop()).toBe(true);
    for (const s of [idle, kept]) await fed(s, s.offset, "echo hx\b \bi");
    const texts = await Promise.all(
      [idle, kept].map((s, i) => new Promise<string | null>((resolve) => s.afterParsed(() => resolve(s.textSince(positions[i] as NonNullable<(typeof positions)[0]>))))),
    );
    expect(texts).toEqual(["echo hi", "echo hi"]);
    expect(await idle.snapshot()).toEqual(await kept.snapshot());
  });

  it("is not dropped when it is used while the drop checks its checkpoint", async () => {
    const idle = screen();
    await fed(idle, 0, PROMPT);
    const dropping = idle.drop();
    idle.write(idle.offset, bytes("x"));
    expect(await dropping).toBe(false);
    expect(idle.dropped).toBe(false);
  });

  it("is dropped by the sweep once idle for its delay, and not while output comes", async () => {
    const outcomes: string[] = [];
    const idle = screen({ idleMs: 40, onIdle: (outcome) => outcomes.push(outcome) });
    const busy = screen({ idleMs: 60_000 });
    await fed(idle, 0, PROMPT);
    await fed(busy, 0, PROMPT);
    await until("the idle screen is dropped", () => idle.dropped);
    expect(busy.dropped).toBe(false);
    await fed(idle, idle.offset, "ls\r\n");
    expect(outcomes).toEqual(["dropped", "restored"]);
    await until("dropped again", () => idle.dropped);
    expect(outcomes).toEqual(["dropped", "restored", "dropped"]);
  });
});

describe("a shell whose screen was dropped at its prompt", () => {
  let dir: string;
  let initFile: string;
  const shells: TestShell[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "screen-idle-test-"));
    initFile = installShellIntegration(join(dir, "workspace"));
  });
  afterEach(async () => {
    await Promise.all(shells.splice(0).map((shell) => shell.close()));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function shell(): Promise<TestShell> {
    const s = new TestShell({ home: mkdtempSync(join(dir, "home-")), initFile });
    shells.push(s);
    await s.prompt(0);
    return s;
  }

  /** Drops the screen once the output so far is parsed (no output comes while the shell waits). */
  async function dropped(s: TestShell): Promise<void> {
    const { screen } = s.agent;
    await until("the screen is settled", () => screen.settled && screen.offset === s.offset);
    expect(await screen.drop()).toBe(true);
  }

  it("reports a command typed half before the drop and half after, as the screen shows it", async () => {
    const s = await shell();
    s.write("echo hal");
    await until("the echo", () => s.output().toString().endsWith("echo hal"));
    await dropped(s);
    s.write("fX\x7f and half\r");
    await until("the command is reported", () => s.commands().length === 1);
    expect(s.commands()[0]).toMatchObject({ command: "echo half and half", exitCode: 0 });
  });

  it("runs a command exactly, and its screen is what a screen never dropped shows", async () => {
    const s = await shell();
    await dropped(s);
    const result = await s.ran("printf 'a\\tb\\n'; echo done");
    expect(result).toMatchObject({ output: "a\tb\ndone\n", exitCode: 0 });
    const kept = screen();
    kept.write(0, s.output());
    await until("the screen is settled", () => s.agent.screen.settled && s.agent.screen.offset === s.offset);
    await kept.parsed();
    expect(await s.agent.screen.snapshot()).toEqual(await kept.snapshot());
  });
});
