// What was typed and has not reached the process yet (the Pty's `pendingInput`: kept by the SDK
// and sent again after a reconnect, docs/protocol.md §5, "Input exactly once"), drawn as mosh
// draws its predictions: dim and underlined, from the terminal's cursor on, wrapping at its right
// edge, with the cursor drawn after it. It goes once the process has every byte (the shell's
// echo then shows them for real).
//
// It appears only once input has waited SHOW_AFTER_MS without an acknowledgement, so ordinary
// typing, acknowledged within a round trip, never flickers; while it is up it follows every
// change of the count and every render of the terminal (output, cursor moves, scrolls, resizes).
// The element, `#pending`, sits inside xterm.js's screen, so the page's scaling applies to it too;
// its `data-bytes` is the count of bytes pending, shown or not (0 and hidden: nothing is).
import type { Terminal } from "@xterm/xterm";
import type { Pty } from "../client/index.js";

/** Input unacknowledged this long is shown. */
const SHOW_AFTER_MS = 100;
const decoder = new TextDecoder();

/** Control characters as Unicode's pictures of them (Enter as ⏎), so every typed key shows. */
function visible(text: string): string {
  // eslint-disable-next-line no-control-regex -- the control characters are what is replaced
  return text.replace(/[\x00-\x1f\x7f]/g, (c) => (c === "\r" ? "⏎" : c === "\x7f" ? "␡" : String.fromCharCode(0x2400 + c.charCodeAt(0))));
}

export class PendingInput {
  private readonly box = document.createElement("div");
  private pty: Pty | null = null;
  private shown = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly term: Terminal) {
    this.box.id = "pending";
    this.box.hidden = true;
    this.box.dataset.bytes = "0";
    this.box.title = "typed, not yet delivered";
    term.element?.querySelector(".xterm-screen")?.append(this.box);
    term.onRender(() => this.shown && this.draw());
  }

  /** Follows the attached terminal's pending input (null: nothing attached). */
  follow(pty: Pty | null): void {
    this.pty = pty;
    this.hide();
    pty?.on("pending", (bytes) => pty === this.pty && this.changed(bytes));
  }

  private changed(bytes: number): void {
    const before = Number(this.box.dataset.bytes);
    this.box.dataset.bytes = String(bytes);
    if (bytes === 0) return this.hide();
    if (this.shown) return this.draw();
    // An acknowledgement came: the wait starts over.
    if (bytes < before) clearTimeout(this.timer);
    if (bytes < before || this.timer === undefined) {
      this.timer = setTimeout(() => {
        this.shown = true;
        this.draw();
      }, SHOW_AFTER_MS);
    }
  }

  private hide(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.shown = false;
    this.box.hidden = true;
    this.box.dataset.bytes = String(this.pty?.pendingInput ?? 0);
    this.box.replaceChildren();
  }

  /** One line per terminal row, from the cursor's cell on; what falls below the screen is cut (…). */
  private draw(): void {
    const pty = this.pty;
    const screen = this.box.parentElement;
    const rowsBox = screen?.querySelector<HTMLElement>(".xterm-rows");
    if (!pty || !screen || !rowsBox || pty.pendingInput === 0) return this.hide();
    const { cols, rows } = this.term;
    // xterm.js sizes its screen to the cells, to the fraction of a pixel: cols × the cell's width.
    const cellWidth = (parseFloat(screen.style.width) || screen.clientWidth) / cols;
    const cellHeight = (parseFloat(screen.style.height) || screen.clientHeight) / rows;
    const buffer = this.term.buffer.active;
    let x = buffer.cursorX;
    let y = buffer.baseY + buffer.cursorY - buffer.viewportY;
    if (x >= cols) [x, y] = [0, y + 1];
    const chars = Array.from(visible(decoder.decode(pty.pendingInputBytes())));
    const lines: HTMLSpanElement[] = [];
    for (let at = 0; at < chars.length && y < rows; y++, x = 0) {
      const piece = chars.slice(at, at + cols - x);
      at += piece.length;
      if (y === rows - 1 && at < chars.length) piece[piece.length - 1] = "…";
      const line = document.createElement("span");
      line.textContent = piece.join("");
      Object.assign(line.style, { left: `${x * cellWidth}px`, top: `${y * cellHeight}px`, height: `${cellHeight}px`, lineHeight: `${cellHeight}px` });
      lines.push(line);
    }
    const font = getComputedStyle(rowsBox);
    Object.assign(this.box.style, { fontFamily: font.fontFamily, fontSize: font.fontSize, letterSpacing: font.letterSpacing });
    this.box.style.setProperty("--cell-width", `${cellWidth}px`);
    this.box.replaceChildren(...lines);
    this.box.hidden = false;
  }
}
