// The screen an emulator shows, as a snapshot (docs/protocol.md §3, `screen`; §5, `from=screen`):
// its rows as text, the cursor, the title, and `ansi`, the bytes that draw it all again on a
// fresh terminal. screen.ts takes it from its live emulator (a type import of @xterm/headless
// here; screen.ts is the one file that loads it).
import type headless from "@xterm/headless";
import type serializeAddon from "@xterm/addon-serialize";
import type { ScreenSnapshot } from "../../shared/agent.js";

type Terminal = InstanceType<typeof headless.Terminal>;
type Serializer = InstanceType<typeof serializeAddon.SerializeAddon>;

/** xterm's internals read here (pinned @xterm/headless 6.0.0): cursor visibility and the scroll region. */
interface SnapshotCore {
  coreService?: { isCursorHidden?: unknown };
  buffer?: { scrollTop?: unknown; scrollBottom?: unknown };
}

/** The screen of `term` at `offset`; `ansi` draws it with `scrollback` lines above it (0 for clients). */
export function snapshotOf(term: Terminal, serializer: Serializer, title: string | null, offset: number, scrollback: number): ScreenSnapshot {
  const buffer = term.buffer.active;
  const lines: string[] = [];
  // xterm trims the cells never written; spaces written (a prompt's last one) go too.
  for (let y = 0; y < term.rows; y++) lines.push((buffer.getLine(buffer.baseY + y)?.translateToString(true) ?? "").replace(/ +$/, ""));
  const core = (term as unknown as { _core?: SnapshotCore })._core;
  const hidden = core?.coreService?.isCursorHidden === true;
  const x = Math.min(buffer.cursorX, term.cols - 1);
  const y = buffer.cursorY;
  let ansi = title === null ? "" : `\x1b]2;${withoutControls(title)}\x07`;
  // The rows, the cursor's position and attributes, the alternate screen, the modes.
  ansi += serializer.serialize({ scrollback });
  // A scroll region (a status line kept out of scrolling): setting it homes the cursor.
  const top = core?.buffer?.scrollTop;
  const bottom = core?.buffer?.scrollBottom;
  if (typeof top === "number" && typeof bottom === "number" && (top > 0 || bottom < term.rows - 1)) {
    const row = term.modes.originMode ? y - top : y;
    ansi += `\x1b[${top + 1};${bottom + 1}r\x1b[${row + 1};${x + 1}H`;
  }
  if (hidden) ansi += "\x1b[?25l";
  return {
    offset,
    cols: term.cols,
    rows: term.rows,
    cursor: { x, y, visible: !hidden },
    alternate: buffer.type === "alternate",
    title,
    lines,
    ansi,
  };
}

/** `text` without C0/C1 controls (a title set again inside an OSC must not end it early). */
function withoutControls(text: string): string {
  let clean = "";
  for (const c of text) {
    const code = c.codePointAt(0) as number;
    if (code >= 0x20 && (code < 0x7f || code > 0x9f)) clean += c;
  }
  return clean;
}
