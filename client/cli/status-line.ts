// The CLI's own lines on the local terminal, `[ptybroker: …]` on a line of their own: notes, and
// one status line that is said again in place (while nothing else was written after it) as what
// it reports changes: the link down and the input held meanwhile, then the reconnect.

/** A status said again sooner than this after the last is put off until then (the last word kept). */
export const STATUS_THROTTLE_MS = 500;

export interface StatusOutput {
  write(text: string): unknown;
  /** The terminal's width, to know how many rows a long line took. */
  columns?: number | undefined;
}

export class StatusLine {
  /** Rows the status line took, while it is the last thing on the terminal; 0: the next goes on a new line. */
  private rows = 0;
  private shown = "";
  private shownAt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly out: StatusOutput,
    /** Whether `out` is a terminal nothing else writes to unseen (no local echo): then a status is redrawn in place. */
    private readonly inPlace: boolean,
    private readonly throttleMs = STATUS_THROTTLE_MS,
  ) {}

  /** A line of its own, never redrawn. */
  note(text: string): void {
    this.moved();
    this.out.write(`\r\n[ptybroker: ${text}]\r\n`);
  }

  /** The status, now: over the last one if it is still the last thing written, else on a new line. */
  say(text: string): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (text === this.shown) return;
    const line = `[ptybroker: ${text}]`;
    // Up to the status line's first row, erased to the end of the screen.
    this.out.write(`${this.rows > 0 ? `\x1b[${this.rows}A\r\x1b[J` : "\r\n"}${line}\r\n`);
    this.rows = this.inPlace ? Math.max(1, Math.ceil(line.length / (this.out.columns || 80))) : 0;
    this.shown = text;
    this.shownAt = Date.now();
  }

  /**
   * The status amended: in place while it is the last thing on the terminal, on a new line where
   * statuses are not drawn in place; otherwise not at all, since what was written after it (the
   * remote's output) shows more, and a line put into it would move its cursor.
   */
  amend(text: string): void {
    if (this.inPlace && this.rows === 0) return;
    this.say(text);
  }

  /** The status `text()` gives, at most once per throttle interval: said now or when it ends. */
  sayLater(text: () => string): void {
    if (this.timer !== undefined) return;
    const wait = this.shownAt + this.throttleMs - Date.now();
    if (wait <= 0) this.say(text());
    else this.timer = setTimeout(() => this.say(text()), wait);
  }

  /** Something else was written to the terminal: the next status goes on a new line. */
  moved(): void {
    this.rows = 0;
    this.shown = "";
  }

  /** No status is said after this. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
