// The terminal's size on the page (docs/protocol.md §5, "Who sets the size"): the terminal always
// shows the session's size, from `hello` and `resize` messages. A writer tells the server what
// fits its window, on every (re)connect and whenever that changes; the server applies it when this
// writer typed last (or before anyone typed). A viewer never sends a size. When the session's size
// does not fit the window, the terminal is drawn at the session's size and scaled down to fit:
// never reflowed for others. This part owns the size heard, the size sent and the zoom; it hears
// of the attached terminal through `Attached` (connection.ts supplies it, main.ts wires it).
import type { FitAddon } from "@xterm/addon-fit";
import type { Terminal } from "@xterm/xterm";
import type { Pty } from "../client/index.js";
import { showError, ui } from "./ui.js";

export interface Size {
  cols: number;
  rows: number;
}

/** What the size needs to know of the attachment. */
export interface Attached {
  /** The attached terminal, or null. */
  pty(): Pty | null;
  /** Whether its session has ended (nothing is sent to it then). */
  exited(): boolean;
}

/** Window resizes are passed on to the session at most this often. */
const RESIZE_DEBOUNCE_MS = 100;
/** xterm.js keeps this much room on the right for its scrollbar (the fit addon's figure). */
const SCROLLBAR_PX = 14;

export class TerminalSize {
  /** A session larger than the window: scaled to fit (the default) or at actual size, scrolled. */
  private zoom: "fit" | "actual" = "fit";
  /** The attached session's size as last heard: `hello`, then `resize` messages. */
  private sessionSize: Size | null = null;
  /** `resize` messages heard on this attachment, so an older REST answer never undoes a newer one. */
  private resizesHeard = 0;
  /** The size last sent on the current connection, so a size is sent once per connection and change. */
  private sentSize = "";
  private resizeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly term: Terminal,
    private readonly fit: FitAddon,
    private readonly attached: Attached,
  ) {}

  /** Listens for what changes the size: the zoom badge, the window, the phone's keyboard, the fonts. */
  listen(): void {
    ui.size.addEventListener("click", () => {
      this.zoom = this.zoom === "fit" ? "actual" : "fit";
      this.layout();
      this.term.focus();
    });
    new ResizeObserver(() => this.windowChanged()).observe(ui.terminal);
    // A phone's on-screen keyboard covers the bottom of the page where the browser does not resize
    // it (iOS): the page takes the visible height, so the extra keys stay above the keyboard.
    const visible = window.visualViewport;
    if (visible && window.matchMedia("(pointer: coarse)").matches) {
      visible.addEventListener("resize", () => {
        if (visible.scale <= 1.01) document.body.style.height = `${visible.height}px`;
      });
    }
    this.term.onResize(() => requestAnimationFrame(() => this.layout()));
    void document.fonts.ready.then(() => this.windowChanged());
  }

  /** What fits the terminal's area now at the page's font size, or null while it is not shown. */
  fitted(): Size | null {
    if (ui.pane.hidden || ui.terminal.clientWidth === 0 || ui.terminal.clientHeight === 0) return null;
    const proposed = this.fit.proposeDimensions();
    if (!proposed || !Number.isFinite(proposed.cols) || !Number.isFinite(proposed.rows)) return null;
    return { cols: Math.min(1000, proposed.cols), rows: Math.min(1000, proposed.rows) };
  }

  /** The size the terminal shows: the attached session's, else what fits. */
  private shownSize(): Size | null {
    if (this.attached.pty() && this.sessionSize) return this.sessionSize;
    return this.fitted();
  }

  /**
   * Gives the terminal the size it shows, then scales it down when that is larger than its area
   * (a session sized by a bigger window elsewhere): drawn at the session's size, never reflowed.
   */
  layout(): void {
    const term = this.term;
    const zoom = this.zoom;
    const pty = this.attached.pty();
    const size = this.shownSize();
    if (size && (size.cols !== term.cols || size.rows !== term.rows)) term.resize(size.cols, size.rows);
    const box = term.element;
    const screen = box?.querySelector<HTMLElement>(".xterm-screen");
    if (!box || !screen || ui.pane.hidden) return;
    const width = screen.offsetWidth + SCROLLBAR_PX;
    const height = screen.offsetHeight;
    box.style.width = `${width}px`;
    box.style.height = `${height}px`;
    const room = { width: ui.terminal.clientWidth, height: ui.terminal.clientHeight };
    const fitScale = width > 0 && height > 0 ? Math.min(1, room.width / width, room.height / height) : 1;
    const scale = zoom === "fit" ? fitScale : 1;
    ui.terminal.dataset.zoom = zoom;
    box.style.transform = scale < 1 ? `scale(${scale})` : "";
    // For whoever inspects the page (the tests do): the size drawn and the scale it is drawn at.
    ui.terminal.dataset.cols = String(term.cols);
    ui.terminal.dataset.rows = String(term.rows);
    ui.terminal.dataset.scale = scale.toFixed(3);
    const fits = this.fitted();
    ui.terminal.dataset.fits = fits ? `${fits.cols}x${fits.rows}` : "";
    const differs = pty !== null && size !== null && fits !== null && (size.cols !== fits.cols || size.rows !== fits.rows);
    ui.size.hidden = !differs;
    ui.terminal.dataset.differs = String(differs);
    if (differs && size) {
      const larger = fitScale < 1;
      const how = !larger ? "" : zoom === "actual" ? " 1:1" : " fit";
      ui.size.textContent = `${size.cols}×${size.rows}${how}`;
      ui.size.title =
        `the session is ${size.cols}×${size.rows}, this window fits ${fits?.cols}×${fits?.rows}` +
        (!larger ? "" : zoom === "fit" ? ": scaled to fit; tap for actual size" : ": actual size, scrolled; tap to scale to fit") +
        (pty?.readOnly ? "" : ". Typing here gives the session this window's size.");
      ui.size.setAttribute("aria-pressed", String(zoom === "actual"));
    }
  }

  /** A writer tells the server what fits its window; the server decides whether it applies. */
  sendSize(): void {
    const current = this.attached.pty();
    if (!current || current.readOnly || this.attached.exited() || current.state !== "open") return;
    const size = this.fitted();
    if (!size) return;
    const key = `${size.cols}x${size.rows}`;
    if (key === this.sentSize) return;
    this.sentSize = key;
    // Only over the open socket: REST resize always applies, which would override the policy.
    current.resize(size).catch(showError);
  }

  private windowChanged(): void {
    this.layout();
    clearTimeout(this.resizeTimer);
    this.resizeTimer = setTimeout(() => this.sendSize(), RESIZE_DEBOUNCE_MS);
  }

  /** The session's size as heard (`hello`, a repaint of its screen), not yet laid out. */
  heard(size: Size): void {
    this.sessionSize = { cols: size.cols, rows: size.rows };
  }

  /** A `resize` message: the session's new size, laid out. */
  resized(size: Size): void {
    this.resizesHeard++;
    this.sessionSize = { cols: size.cols, rows: size.rows };
    this.layout();
  }

  /** A new connection: the session's size came with its `hello`; the server hears ours again. */
  connected(size: Size | undefined): void {
    if (size) this.sessionSize = { cols: size.cols, rows: size.rows };
    this.sentSize = "";
    this.layout();
    this.sendSize();
  }

  /**
   * Replay has caught up: a size that changed while this connection was still replaying was not
   * sent to it (the edge sends `resize` to clients that are live), so the session is asked once.
   * `current` says whether the attachment asked for is still the one shown when the answer comes.
   */
  caughtUp(ask: () => Promise<Size>, current: () => boolean): void {
    const heard = this.resizesHeard;
    ask()
      .then((now) => {
        if (!current() || this.resizesHeard !== heard) return;
        if (this.sessionSize?.cols === now.cols && this.sessionSize.rows === now.rows) return;
        this.sessionSize = { cols: now.cols, rows: now.rows };
        this.layout();
      })
      .catch(() => undefined); // a best effort: the next resize message says it too
  }

  /** Detached: nothing heard, nothing sent. */
  reset(): void {
    this.sentSize = "";
    this.sessionSize = null;
    this.resizesHeard = 0;
  }
}
