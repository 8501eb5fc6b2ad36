// The session's screen (runner/agent/screen.ts): a real bash and real full-screen programs drawn by
// a headless xterm; resizes in stream order; the repaint bytes give the same screen on a fresh
// terminal; a screen rebuilt from the output log equals the live one; the emulator's queue is
// bounded. Waits are on conditions with deadlines.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import headless from "@xterm/headless";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ScreenSnapshot } from "../../shared/agent.js";
import { MemoryLog } from "../log/memory-log.js";
import { BEHIND_BYTES, CAUGHT_UP_BYTES, TerminalScreen } from "./screen.js";
import { rebuildScreen } from "./screen-rebuild.js";
import { installShellIntegration } from "./shell-integration.js";
import { TestShell, until } from "./shell.test-kit.js";

let dir: string;
let initFile: string;
const shells: TestShell[] = [];
const screens: TerminalScreen[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "screen-test-"));
  initFile = installShellIntegration(join(dir, "workspace"));
});
afterEach(async () => {
  await Promise.all(shells.splice(0).map((shell) => shell.close()));
  for (const screen of screens.splice(0)) screen.dispose();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function shell(options: { log?: MemoryLog; cols?: number; rows?: number } = {}): TestShell {
  const s = new TestShell({ home: mkdtempSync(join(dir, "home-")), initFile, key: "k", ...options });
  shells.push(s);
  return s;
}

function screen(cols = 80, rows = 24): TerminalScreen {
  const s = new TerminalScreen({ cols, rows });
  screens.push(s);
  return s;
}

const bytes = (text: string) => Buffer.from(text, "utf8");

/** The screen once `test` holds (polled). */
async function screenWhen(s: TestShell, what: string, test: (screen: ScreenSnapshot) => boolean): Promise<ScreenSnapshot> {
  let last: ScreenSnapshot | undefined;
  const deadline = Date.now() + 10_000;
  for (;;) {
    last = await s.screen();
    if (test(last)) return last;
    if (Date.now() > deadline) throw new Error(`the screen never showed ${what}:\n${last.lines.join("\n")}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** What a fresh terminal of the snapshot's size shows after the snapshot's repaint bytes. */
async function replayed(snapshot: ScreenSnapshot): Promise<Omit<ScreenSnapshot, "ansi" | "offset">> {
  const term = new headless.Terminal({ cols: snapshot.cols, rows: snapshot.rows, scrollback: 0, allowProposedApi: true });
  let title: string | null = null;
  term.onTitleChange((t) => (title = t));
  await new Promise<void>((resolve) => term.write(snapshot.ansi, resolve));
  const buffer = term.buffer.active;
  const lines = Array.from({ length: term.rows }, (_, y) => (buffer.getLine(buffer.baseY + y)?.translateToString(true) ?? "").replace(/ +$/, ""));
  const hidden = (term as unknown as { _core: { coreService: { isCursorHidden: boolean } } })._core.coreService.isCursorHidden;
  const result = {
    cols: term.cols,
    rows: term.rows,
    cursor: { x: buffer.cursorX, y: buffer.cursorY, visible: !hidden },
    alternate: buffer.type === "alternate",
    title,
    lines,
  };
  term.dispose();
  return result;
}

function withoutRepaint(snapshot: ScreenSnapshot): Omit<ScreenSnapshot, "ansi" | "offset"> {
  const { ansi: _ansi, offset: _offset, ...rest } = snapshot;
  return rest;
}

describe("TerminalScreen", () => {
  it("draws what it is fed: lines without trailing spaces, cursor, title, cursor visibility", async () => {
    const s = screen(20, 5);
    const fed = bytes("one  \r\n\x1b]2;the title\x07two\x1b[?25l");
    s.write(0, fed);
    const snap = await s.snapshot();
    expect(snap).toMatchObject({
      offset: fed.length,
      cols: 20,
      rows: 5,
      cursor: { x: 3, y: 1, visible: false },
      alternate: false,
      title: "the title",
      lines: ["one", "two", "", "", ""],
    });
    expect(await replayed(snap)).toEqual(withoutRepaint(snap));
    expect(snap.ansi.endsWith("\x1b[?25l")).toBe(true);
  });

  it("applies a resize after the bytes written before it and before those after it", async () => {
    const s = screen(80, 24);
    s.write(0, bytes("A\x1b[20;1HB"));
    const before = s.snapshot();
    s.resize(80, 10);
    s.write(s.offset, bytes("C"));
    // Shrunk with the cursor on row 20: the top rows went, so "A" is gone (resized before the
    // bytes, "A" would have stayed on the first row).
    expect(await before).toMatchObject({ rows: 24, lines: expect.arrayContaining(["A", "B"]) });
    const after = await s.snapshot();
    expect(after).toMatchObject({ rows: 10, cursor: { x: 2, y: 9 } });
    expect(after.lines).toEqual(["", "", "", "", "", "", "", "", "", "BC"]);
  });

  it("repaints any screen on a fresh terminal: scrolled, wrapped, wide, styled, a scroll region, the alternate screen", async () => {
    const cases = [
      "hello\r\nworld\x1b[31m red\x1b[0m\r\n$ ",
      `${"a\r\n".repeat(30)}end\x1b[3;5H`,
      "normal text\r\n\x1b[?1049h\x1b[H\x1b[2Jalt screen\x1b[5;10Hxx\x1b[?25l",
      `\x1b]0;title\x07${"x".repeat(85)}\r\nwrapped`,
      "\x1b[1;20r\x1b[20;1Hstatus in region\x1b[22;1Hbottom\x1b[10;3H",
      "日本語テキスト\r\n\x1b[4mund\x1b[0m done\x1b[?2004h",
    ];
    for (const text of cases) {
      const s = screen();
      s.write(0, bytes(text));
      const snap = await s.snapshot();
      expect(await replayed(snap), JSON.stringify(text)).toEqual(withoutRepaint(snap));
    }
  });

  it("says it is behind past 4 MiB not yet parsed, and caught up under 1 MiB", async () => {
    const changes: boolean[] = [];
    const s = new TerminalScreen({ cols: 80, rows: 24, onBehind: (behind) => changes.push(behind) });
    screens.push(s);
    const line = bytes(`${"x".repeat(79)}\r\n`);
    const chunk = Buffer.concat(Array.from({ length: (256 * 1024) / line.length }, () => line));
    let offset = 0;
    while (offset <= BEHIND_BYTES + chunk.length) {
      s.write(offset, chunk);
      offset += chunk.length;
    }
    expect(s.behind).toBe(true);
    expect(changes).toEqual([true]);
    await until("caught up", () => !s.behind, 30_000);
    expect(changes).toEqual([true, false]);
    expect(s.unparsed).toBeLessThan(CAUGHT_UP_BYTES);
    const snap = await s.snapshot();
    expect(snap.offset).toBe(offset);
    expect(s.unparsed).toBe(0);
  }, 40_000);
});

describe("an emulator that cannot break", () => {
  it("goes on after a resize narrower then taller (xterm throws on this with no line kept above the screen)", async () => {
    const s = screen(80, 24);
    const long = (n: number) => `${"x".repeat(n)}\r\n`;
    s.write(0, bytes(long(250).repeat(6)));
    s.resize(26, 29);
    s.resize(69, 30);
    const tail = Array.from({ length: 40 }, (_, n) => `after ${n}\r\n`).join("");
    s.write(s.offset, bytes(tail));
    const snap = await s.snapshot();
    expect(snap).toMatchObject({ cols: 69, rows: 30, offset: 1512 + tail.length });
    expect(snap.lines.slice(-3)).toEqual(["after 38", "after 39", ""]);
  });

  it("a parser that throws fails its own screen only: onFailed, its snapshot rejects, another screen goes on", async () => {
    const failures: unknown[] = [];
    const broken = new TerminalScreen({ cols: 80, rows: 24, onFailed: (error) => failures.push(error) });
    screens.push(broken);
    const other = screen(80, 24);
    // The emulator's own parser, made to throw as xterm 6.0.0 did on the resize above.
    const core = (broken as unknown as { term: { _core: { _inputHandler: { parse: () => void } } } }).term._core;
    core._inputHandler.parse = () => {
      throw new TypeError("Cannot set properties of undefined (setting 'isWrapped')");
    };
    const pending = broken.snapshot();
    broken.write(0, bytes("boom\r\n"));
    other.write(0, bytes("fine\r\n"));
    await expect(broken.snapshot()).rejects.toThrow("the screen is gone");
    await expect(pending).resolves.toMatchObject({ offset: 0 }); // queued before the bytes: taken before them
    expect(failures.map(String)).toEqual(["TypeError: Cannot set properties of undefined (setting 'isWrapped')"]);
    expect((await other.snapshot()).lines[0]).toBe("fine");
  });
});

describe("memory", () => {
  it("is small per idle screen (no scrollback), and given back once disposed and dropped", async () => {
    // A collection on demand, as `node --expose-gc` would give.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const used = () => {
      gc();
      gc();
      const { heapUsed, arrayBuffers } = process.memoryUsage();
      return heapUsed + arrayBuffers;
    };
    const count = 100;
    const before = used();
    let idle = Array.from({ length: count }, () => new TerminalScreen({ cols: 80, rows: 24 }));
    for (const s of idle) s.write(0, bytes("\x1b[?2004hroot@host:~# ls\r\nfile1  file2\r\nroot@host:~# "));
    await Promise.all(idle.map((s) => s.snapshot()));
    const each = (used() - before) / count;
    console.info(`screen: an idle 80x24 screen holds ${Math.round(each / 1024)} KiB (heap and buffers)`);
    // A scrollback of 1000 rows alone would be about 1 MiB each.
    expect(each).toBeLessThan(512 * 1024);
    for (const s of idle) s.dispose();
    idle = [];
    expect((used() - before) / count).toBeLessThan(each / 10);
  });
});

describe("a session's screen", () => {
  it("shows a full-screen program (less) on the alternate screen, and the shell again after it", async () => {
    const file = join(dir, "lines.txt");
    writeFileSync(file, Array.from({ length: 100 }, (_, i) => `line ${i + 1}`).join("\n") + "\n");
    const s = shell();
    await s.prompt(0);
    s.write(`less ${file}\r`);
    const inLess = await screenWhen(s, "less", (snap) => snap.alternate && snap.lines[0] === "line 1");
    expect(inLess.lines.slice(0, 23)).toEqual(Array.from({ length: 23 }, (_, i) => `line ${i + 1}`));
    expect(await replayed(inLess)).toEqual(withoutRepaint(inLess));
    s.write("q");
    const back = await screenWhen(s, "the shell", (snap) => !snap.alternate && snap.lines.some((l) => l.endsWith(`less ${file}`)));
    expect(back.cursor.visible).toBe(true);
    expect(await replayed(back)).toEqual(withoutRepaint(back));
  });

  it("takes the title a program sets, and follows resizes", async () => {
    const s = shell();
    await s.prompt(0);
    await s.ran("printf '\\033]0;hello\\007'");
    expect((await s.screen()).title).toBe("hello");
    s.agent.resize(40, 10);
    s.pty.resize(40, 10);
    await s.ran("tput cols; tput lines");
    const snap = await s.screen();
    expect(snap).toMatchObject({ cols: 40, rows: 10 });
    expect(snap.lines).toContain("40");
    expect(snap.lines).toContain("10");
  });

  it("rebuilt from the output log, equals the live screen at the same offset", { timeout: 30_000 }, async () => {
    const log = new MemoryLog({ retainBytes: 64 << 20, idleTtlSec: 3600 });
    const s = shell({ log, cols: 100, rows: 30 });
    await s.prompt(0);
    await s.ran("printf '\\033]2;rebuilt\\007\\033[1;33myellow\\033[0m\\n'; seq 1 20000");
    s.write("vim -u NONE -N\r");
    const live = await screenWhen(s, "vim", (snap) => snap.alternate && snap.lines[1] === "~");
    await s.logged();
    expect(live.offset).toBeGreaterThan(100_000);
    const rebuilt = await rebuildScreen(log, "k", { from: 0, to: live.offset, cols: 100, rows: 30 });
    expect(rebuilt).toEqual(live);
    s.write("\x1b:qa!\r");
    await screenWhen(s, "the shell", (snap) => !snap.alternate);
    await log.close();
  });

  it("is rebuilt from a log read in pieces, with the bytes in pieces of any size", async () => {
    const log = new MemoryLog({ retainBytes: 64 << 20, idleTtlSec: 3600 });
    const all: Buffer[] = [];
    let offset = 0;
    for (let i = 0; i < 6000; i++) {
      // Cut anywhere: inside escapes, characters and lines.
      const chunk = bytes(`\x1b[3${i % 8}m${String(i).repeat(i % 400)}\x1b[0m ü€😀\r\n`).subarray(0, 700 + (i % 1000));
      await log.append("p", offset, chunk);
      all.push(chunk);
      offset += chunk.length;
    }
    expect(offset).toBeGreaterThan(3 << 20);
    const direct = screen(120, 40);
    direct.write(0, Buffer.concat(all));
    const rebuilt = await rebuildScreen(log, "p", { from: 0, to: offset, cols: 120, rows: 40 });
    expect(rebuilt).toEqual(await direct.snapshot());
    await log.close();
  }, 30_000);
});
