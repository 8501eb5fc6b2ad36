// Skipping text that scrolls away unseen (scrolled-off.ts, used by screen.ts) is exact: on random
// streams of plain floods, escape sequences (attributes, cursor moves, scroll regions, the
// alternate screen, titles and strings left open across a flood, charsets, modes, C1 controls,
// UTF-8 split across chunks) cut at random points, a screen that skips and one that parses every
// byte show the same screen, cursor, title and markers, and react the same to what comes after.
import { afterEach, describe, expect, it } from "vitest";
import { TerminalScreen, type ScreenPosition } from "./screen.js";
import { scrolledOffPrefix } from "./scrolled-off.js";

const screens: TerminalScreen[] = [];
afterEach(() => {
  for (const screen of screens.splice(0)) screen.dispose();
});

const text = (s: string) => Buffer.from(s, "latin1");

describe("scrolledOffPrefix", () => {
  it("skips up to a CR LF followed by 2 × rows line feeds and a printable byte, within the leading plain run", () => {
    const rows = 2; // 4 line feeds must follow
    const line = (c: string) => `${c}\r\n`;
    const stream = ["a", "b", "c", "d", "e", "f"].map(line).join(""); // 6 lines
    // After "a\r\nb\r\n" (6 bytes) come 4 line feeds and printable bytes.
    expect(scrolledOffPrefix(text(stream), rows, 0)).toBe(6);
    // Only 4 line feeds in all: nothing is followed by 4.
    expect(scrolledOffPrefix(text("a\r\nb\r\nc\r\nd\r\n"), rows, 0)).toBe(0);
    // A bare LF cannot end the prefix (the column would not be 0): the CR LF before it does.
    expect(scrolledOffPrefix(text("a\r\nb\nc\r\nd\r\ne\r\nf\r\n"), rows, 0)).toBe(3);
    // Line feeds only after it: no printable byte, nothing skipped.
    expect(scrolledOffPrefix(text("a\r\n\r\n\r\n\r\n\r\n"), rows, 0)).toBe(0);
    // An escape ends the plain run: line feeds after it do not count.
    expect(scrolledOffPrefix(text(`a\r\nb\r\n\x1b[1mc\r\nd\r\ne\r\nf\r\n`), rows, 0)).toBe(0);
    // UTF-8 (or any byte ≥ 0x80) ends it too.
    expect(scrolledOffPrefix(text(`a\r\nb\r\n\xc3\xa9\r\nd\r\ne\r\nf\r\n`), rows, 0)).toBe(0);
    expect(scrolledOffPrefix(new Uint8Array(0), rows, 0)).toBe(0);
    // A line kept above the screen needs one more line feed after the prefix.
    expect(scrolledOffPrefix(text(stream), rows, 1)).toBe(3);
  });
});

/** mulberry32: a seeded generator, so a failing stream can be made again from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Event = { bytes: Buffer } | { resize: [number, number] } | { mark: true };

function stream(seed: number): Event[] {
  const r = random(seed);
  const int = (n: number) => Math.floor(r() * n);
  const pick = <T>(items: T[]) => items[int(items.length)] as T;
  const printable = () => String.fromCharCode(0x20 + int(95));
  const plainLine = () => {
    let s = "";
    for (let n = int(r() < 0.2 ? 260 : 90); n > 0; n--) s += printable();
    return s + pick(["\r\n", "\r\n", "\r\n", "\r\n", "\n", "\r", ""]);
  };
  const flood = () => Array.from({ length: 20 + int(400) }, plainLine).join("");
  const escapes = [
    () => `\x1b[${pick(["0", "1", "4", "7", "31", "42", "1;33;44", "38;5;200", "48;2;1;2;3"])}m`,
    () => `\x1b[${1 + int(30)};${1 + int(100)}H`,
    () => `\x1b[${1 + int(5)};${10 + int(20)}r`,
    () => "\x1b[r",
    () => pick(["\x1b[?1049h", "\x1b[?1049l", "\x1b[?47h", "\x1b[?47l"]),
    () => `\x1b]0;title-${int(1000)}\x07`,
    () => `\x1b]2;open-title ${flood().slice(0, 3000)}\x07`, // a string left open across a flood
    () => `\x1bP1$r${flood().slice(0, 2000)}\x1b\\`, // a DCS string across a flood
    () => pick(["\x1b(0", "\x1b(B", "\x0e", "\x0f"]), // DEC graphics charset, shift out/in
    () => pick(["\x1b[2J", "\x1b[K", "\x1b[1J", "\x1b[3L", "\x1b[2M"]),
    () => `\x1b[${1 + int(9)}b`, // repeat the last printed character
    () => pick(["\x1b[4h", "\x1b[4l", "\x1b[20h", "\x1b[20l", "\x1b[?7l", "\x1b[?7h", "\x1b[?6h", "\x1b[?6l"]),
    () => pick(["\x1b7", "\x1b8", "\x1b[s", "\x1b[u"]), // save / restore the cursor
    () => pick(["é", "中文", "😀", "a\u0301"]), // UTF-8, wide, combining
    () => "\xc2\x9b1;32m", // a C1 CSI in UTF-8 (latin1 bytes here)
    () => "\x1b[3", // a sequence cut short by what follows
    () => "\x18", // CAN
    () => "\t\x08\x07",
  ];
  const events: Event[] = [];
  let pending = "";
  const flush = () => {
    const bytes = Buffer.from(pending, "utf8");
    pending = "";
    // Cut at random points, also inside escape sequences and UTF-8 characters.
    let at = 0;
    while (at < bytes.length) {
      const size = 1 + int(r() < 0.3 ? 64 : 70_000);
      events.push({ bytes: bytes.subarray(at, at + size) });
      at += size;
    }
  };
  for (let parts = 5 + int(25); parts > 0; parts--) {
    const what = r();
    if (what < 0.35) pending += flood();
    else if (what < 0.85) pending += pick(escapes)();
    else {
      flush();
      events.push(r() < 0.5 ? { mark: true } : { resize: [20 + int(120), 5 + int(40)] });
    }
  }
  flush();
  return events;
}

/** Feeds the same events to a screen that skips and one that does not; markers at each `mark`. */
async function both(events: Event[]): Promise<{ skipping: TerminalScreen; parsing: TerminalScreen; marks: [ScreenPosition | null, ScreenPosition | null][] }> {
  const make = (skipScrolledOff: boolean) => {
    const screen = new TerminalScreen({ cols: 80, rows: 24, skipScrolledOff });
    screens.push(screen);
    return screen;
  };
  const skipping = make(true);
  const parsing = make(false);
  const marks: [ScreenPosition | null, ScreenPosition | null][] = [];
  let offset = 0;
  for (const event of events) {
    if ("bytes" in event) {
      skipping.write(offset, event.bytes);
      parsing.write(offset, event.bytes);
      offset += event.bytes.byteLength;
    } else if ("resize" in event) {
      skipping.resize(...event.resize);
      parsing.resize(...event.resize);
    } else {
      const pair: [ScreenPosition | null, ScreenPosition | null] = [null, null];
      marks.push(pair);
      skipping.afterParsed(() => (pair[0] = skipping.cursorPosition()));
      parsing.afterParsed(() => (pair[1] = parsing.cursorPosition()));
    }
  }
  await Promise.all([skipping.parsed(), parsing.parsed()]);
  return { skipping, parsing, marks };
}

describe("a screen that skips text scrolled away unseen", () => {
  it("shows exactly what a screen that parses every byte shows, on 150 random streams", { timeout: 120_000 }, async () => {
    let skipped = 0;
    let streamsSkipping = 0;
    for (let seed = 1; seed <= 150; seed++) {
      const { skipping, parsing, marks } = await both(stream(seed));
      const context = `seed ${seed}`;
      expect({ context, snapshot: await skipping.snapshot() }).toEqual({ context, snapshot: await parsing.snapshot() });
      // The markers (a shell's prompt positions): gone in both, or at the same place with the same text.
      for (const [a, b] of marks) {
        expect({ context, text: a && skipping.textSince(a) }).toEqual({ context, text: b && parsing.textSince(b) });
      }
      // What comes after reads the state the skipped text could have touched: the last character
      // printed (repeat), the saved cursor, the pen, the charset, the column after a bare LF.
      const probe = text("\x1b[3bX\x1b8Y\x1b[KZ\n\nW\x1b[5b\r\n");
      skipping.write(skipping.offset, probe);
      parsing.write(parsing.offset, probe);
      expect({ context, snapshot: await skipping.snapshot() }).toEqual({ context, snapshot: await parsing.snapshot() });
      expect(parsing.skipped).toBe(0);
      skipped += skipping.skipped;
      if (skipping.skipped > 0) streamsSkipping++;
      skipping.dispose();
      parsing.dispose();
    }
    // The comparison means something only if skipping happened, in many streams.
    expect(streamsSkipping).toBeGreaterThan(50);
    expect(skipped).toBeGreaterThan(1 << 20);
  });

  it("is exact at the edge: a full screen of old text, the cursor at the top, then just enough line feeds or one fewer", async () => {
    // Old text on every row and the line above; the cursor homed: rows below it keep their old
    // text until scrolled away, so a skip one line feed too early would show some of it.
    const old = Array.from({ length: 30 }, (_, n) => `old line ${n} ${"o".repeat(60)}\r\n`).join("");
    let skippedAny = false;
    for (let feeds = 44; feeds <= 52; feeds++) {
      const chunk = `${"p".repeat(70)}\r\n${Array.from({ length: feeds }, (_, n) => `s${n}\r\n`).join("")}end`;
      // A marker on the bottom row, then the cursor homed (a step between, so the chunk starts a batch).
      const events: Event[] = [{ bytes: text(old) }, { mark: true }, { bytes: text("\x1b[H") }, { mark: true }, { bytes: text(chunk.padEnd(8000, " ")) }];
      const { skipping, parsing, marks } = await both(events);
      expect({ feeds, snapshot: await skipping.snapshot() }).toEqual({ feeds, snapshot: await parsing.snapshot() });
      // The markers on the bottom and the top row: scrolled through the line kept above the screen and gone, in both.
      for (const [a, b] of marks) expect({ feeds, text: a && skipping.textSince(a) }).toEqual({ feeds, text: b && parsing.textSince(b) });
      skippedAny ||= skipping.skipped > 0;
    }
    expect(skippedAny).toBe(true);
  });

  it("skips most of a flood of lines and ends on the same screen", async () => {
    const line = (n: number) => `${String(n).padStart(6, "0")} ${"x".repeat(190)}\r\n`;
    const flood = Buffer.from(Array.from({ length: 20_000 }, (_, n) => line(n)).join(""), "latin1");
    const events: Event[] = [];
    for (let at = 0; at < flood.length; at += 256 * 1024) events.push({ bytes: flood.subarray(at, at + 256 * 1024) });
    const { skipping, parsing } = await both(events);
    const snapshot = await skipping.snapshot();
    expect(snapshot).toEqual(await parsing.snapshot());
    expect(snapshot.lines.at(-2)).toBe(`019999 ${"x".repeat(190)}`.slice(160));
    expect(skipping.skipped).toBeGreaterThan(flood.length * 0.9);
  });
});
