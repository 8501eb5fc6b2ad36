// Terminal output as the end-to-end tests read it: escape sequences removed, a screen drawn by
// @xterm/headless, a whole line as a pattern, a digest for comparing large outputs, and what
// `seq` prints.
import { createHash } from "node:crypto";
import headless from "@xterm/headless";

/**
 * Terminal text as the contract defines it for `expect` and `run` (docs/protocol.md §3,
 * "Agents"), written here on its own (not the implementation's): escape sequences removed (CSI,
 * OSC up to BEL or ST, DCS/SOS/PM/APC up to ST, and two-byte escapes), `\r\n` read as `\n`.
 * Enough for the tests' own output; not a terminal.
 */
export function stripEscapes(text: string): string {
  /* eslint-disable no-control-regex -- escape sequences are what is removed */
  return text
    .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, "")
    .replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, "")
    .replace(/\x1b[PX^_][^\x1b]*\x1b\\/g, "")
    .replace(/\x1b[()*+][0-9A-Za-z]/g, "")
    .replace(/\x1b[ -/]*[0-~]/g, "")
    .replaceAll("\r\n", "\n");
  /* eslint-enable no-control-regex */
}

/** What a terminal of `cols`×`rows` shows after reading `bytes` from empty (@xterm/headless). */
export async function renderScreen(
  bytes: Uint8Array,
  cols: number,
  rows: number,
): Promise<{ lines: string[]; alternate: boolean; cursor: { x: number; y: number }; title: string | null }> {
  const term = new headless.Terminal({ cols, rows, allowProposedApi: true, scrollback: 0 });
  let title: string | null = null;
  term.onTitleChange((t) => {
    title = t;
  });
  try {
    await new Promise<void>((resolve) => term.write(bytes, resolve));
    const buffer = term.buffer.active;
    const lines: string[] = [];
    // translateToString(true) keeps spaces that were written: trailing spaces go, as in `lines`.
    for (let y = 0; y < rows; y++) {
      lines.push((buffer.getLine(buffer.viewportY + y)?.translateToString(true) ?? "").replace(/ +$/, ""));
    }
    return { lines, alternate: buffer.type === "alternate", cursor: { x: buffer.cursorX, y: buffer.cursorY }, title };
  } finally {
    term.dispose();
  }
}

/**
 * `text` as a whole line of terminal output. A line starts after \n or \r: bash's
 * bracketed-paste mode ends the echoed command with `\e[?2004l\r` before the output.
 */
export function line(text: string): RegExp {
  // A line starts after a line break, or after the shell's OSC 133 C mark (a command's output starts there).
  return new RegExp(`(?:[\r\n]|\x1b\\]133;C\x07)${text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\r\n`);
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** What `seq <start> … | head -c <size>` prints. */
export function seqBytes(start: number, size: number): Buffer {
  const lines: string[] = [];
  let length = 0;
  for (let i = start; length < size; i++) {
    const line = `${i}\n`;
    lines.push(line);
    length += line.length;
  }
  return Buffer.from(lines.join("")).subarray(0, size);
}
