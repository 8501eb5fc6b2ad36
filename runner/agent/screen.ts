// The screen of a session as a person would see it (docs/protocol.md §3, "Agents": `screen`; §5,
// `from=screen`): a headless terminal emulator (xterm.js) fed every output byte in offset order.
// The only module that imports @xterm/headless and @xterm/addon-serialize.
//
// xterm's `write` is asynchronous: bytes are queued and parsed in slices between other work. So
// everything that must happen at a point of the stream (a resize, a snapshot, reading the
// command line at a shell mark) is queued behind the bytes written before it, as a write
// callback, and runs before later bytes are parsed. The queue is bounded: past BEHIND_BYTES not
// yet parsed the screen says it is behind (the session pauses its process) until it is back
// under CAUGHT_UP_BYTES.
import headless from "@xterm/headless";
import serializeAddon from "@xterm/addon-serialize";
import type { ScreenSnapshot } from "../../shared/agent.js";
import type { OutputLog } from "../log/output-log.js";
import { withLogSlot } from "../log/log-reads.js";
import { ScreenPosition, emulatorState, joinState, setJoinState } from "./screen-state.js";

export { ScreenPosition };
import { unwatchIdle, watchIdle } from "./screen-idle.js";

const { Terminal } = headless;
type Terminal = InstanceType<typeof Terminal>;
type Serializer = InstanceType<typeof serializeAddon.SerializeAddon>;

/** Bytes written and not yet parsed beyond which the screen is behind, and below which it has caught up. */
export const BEHIND_BYTES = 4 << 20;
export const CAUGHT_UP_BYTES = 1 << 20;
/** Log data fed to a rebuilt screen per round trip (and parsed before the next is read). */
const REBUILD_PIECE_BYTES = 1 << 20;

const EMPTY = new Uint8Array(0);

export interface ScreenOptions {
  cols: number;
  rows: number;
  /** Raw offset of the first byte that will be written. */
  offset?: number;
  /** The screen fell behind (true) or caught up (false). */
  onBehind?: (behind: boolean) => void;
  /** Drop the emulator after this long unused, when its state round-trips (0 or absent: never). */
  idleMs?: number;
  /** The emulator was dropped (idle) or made again from its checkpoint. */
  onIdle?: (outcome: "dropped" | "restored") => void;
}

/** A dropped emulator: what a fresh one is fed to be it again, and the screen it showed. */
interface Checkpoint {
  text: string;
  snapshot: ScreenSnapshot;
  bracketedPaste: boolean;
  /** screen-state.ts: what the text cannot carry. */
  joinState: number;
}

/** xterm's internals read here (pinned @xterm/headless 6.0.0): cursor visibility and the scroll region. */
interface TerminalCore {
  coreService?: { isCursorHidden?: unknown };
  buffer?: { scrollTop?: unknown; scrollBottom?: unknown };
}

export class TerminalScreen {
  /** The emulator; null while dropped (idle), then `checkpoint` holds it. */
  private term: Terminal | null;
  /** The emulator's serializer (it holds the emulator: null with it). */
  private serializer: Serializer | null;
  private checkpoint: Checkpoint | null = null;
  private readonly positions = new Set<ScreenPosition>();
  /** Counts every use of the emulator: a drop under way gives up if one came meanwhile. */
  private uses = 0;
  private usedAt = Date.now();
  private dropping = false;
  private fed: number;
  private pending = 0;
  /** afterParsed callbacks not run yet. */
  private waiting = 0;
  private isBehind = false;
  private title: string | null = null;
  private disposed = false;

  constructor(private readonly options: ScreenOptions) {
    this.fed = options.offset ?? 0;
    const made = newTerminal(options.cols, options.rows, (title) => (this.title = title));
    this.term = made.term;
    this.serializer = made.serializer;
    if (this.idleMs > 0) watchIdle(this);
  }

  get idleMs(): number {
    return this.options.idleMs ?? 0;
  }

  /** Milliseconds since the emulator was last used (0 while it is dropped: nothing to drop). */
  idleFor(now: number): number {
    return this.term ? now - this.usedAt : 0;
  }

  /** The emulator is dropped (idle). */
  get dropped(): boolean {
    return this.term === null;
  }

  /** Raw offset up to which bytes have been written (parsed or not). */
  get offset(): number {
    return this.fed;
  }

  /** Bytes written and not yet parsed. */
  get unparsed(): number {
    return this.pending;
  }

  get behind(): boolean {
    return this.isBehind;
  }

  /** The program asked for bracketed paste (as parsed so far). */
  get bracketedPaste(): boolean {
    return this.checkpoint ? this.checkpoint.bracketedPaste : this.live().modes.bracketedPasteMode;
  }

  /** The next output bytes; `offset` past the end of what was written skips a gap (nothing is drawn for it). */
  write(offset: number, bytes: Uint8Array): void {
    if (this.disposed) return;
    if (offset < this.fed) {
      if (offset + bytes.byteLength <= this.fed) return;
      bytes = bytes.subarray(this.fed - offset);
      offset = this.fed;
    }
    this.fed = offset + bytes.byteLength;
    if (bytes.byteLength === 0) return;
    const size = bytes.byteLength;
    this.pending += size;
    if (!this.isBehind && this.pending > BEHIND_BYTES) this.setBehind(true);
    this.live().write(bytes, () => {
      this.pending -= size;
      if (this.isBehind && this.pending < CAUGHT_UP_BYTES) this.setBehind(false);
    });
  }

  /** Resizes the screen after the bytes written so far, before later ones. */
  resize(cols: number, rows: number): void {
    this.afterParsed(() => this.live().resize(cols, rows));
  }

  /**
   * Runs `callback` once every byte written so far is parsed, before any byte written later is:
   * the screen is then exactly as it is at `this.offset` now. Callbacks run in the order given.
   * Never runs once the screen is disposed.
   */
  afterParsed(callback: () => void): void {
    if (this.disposed) return;
    const term = this.live();
    this.waiting++;
    term.write(EMPTY, () => {
      this.waiting--;
      if (!this.disposed) callback();
    });
  }

  /**
   * Nothing written is left to parse and no afterParsed callback waits: the screen is as it is
   * at `offset` now (xterm runs even an empty write's callback from a timer, ~1 ms later). Not
   * while the emulator is dropped: it is made again, and parses its checkpoint, before it is read.
   */
  get settled(): boolean {
    return this.term !== null && this.pending === 0 && this.waiting === 0;
  }

  /** Resolves once every byte written so far is parsed (or the screen is disposed). */
  parsed(): Promise<void> {
    return new Promise((resolve) => {
      if (this.disposed || !this.term) return resolve();
      this.live().write(EMPTY, resolve);
    });
  }

  /** The screen as it is at the offset written so far. Rejects if the screen is disposed first. */
  snapshot(): Promise<ScreenSnapshot> {
    const offset = this.fed;
    return new Promise((resolve, reject) => {
      if (this.disposed) return reject(new Error("the screen is gone"));
      // Dropped: the screen it showed is the screen now (nothing was written since).
      if (this.checkpoint) return resolve({ ...this.checkpoint.snapshot, offset });
      // Taken inside the callback: once it returns, xterm may parse later bytes.
      this.live().write(EMPTY, () => {
        if (this.disposed) reject(new Error("the screen is gone"));
        else resolve(this.capture(offset));
      });
    });
  }

  /** The cursor's position now (call from afterParsed); null on the alternate screen (no markers there). */
  cursorPosition(): ScreenPosition | null {
    const term = this.live();
    const marker = term.registerMarker(0);
    if (!marker) return null;
    const position = new ScreenPosition(marker, term.buffer.active.cursorX, this.positions);
    this.positions.add(position);
    return position;
  }

  /**
   * The text from `from` to the cursor now (call from afterParsed): rows that wrapped joined as
   * one line, trailing spaces removed. Null when that row has left the screen.
   */
  textSince(from: ScreenPosition): string | null {
    const term = this.live();
    const buffer = term.buffer.active;
    const row = from.row;
    if (row < 0 || buffer.type !== "normal") return null;
    const last = buffer.baseY + buffer.cursorY;
    if (last < row) return null;
    let text = "";
    for (let y = row; y <= last; y++) {
      const line = buffer.getLine(y);
      if (!line) break;
      const start = y === row ? from.x : 0;
      const end = y === last ? Math.max(start, buffer.cursorX) : term.cols;
      const next = y < last ? buffer.getLine(y + 1) : undefined;
      // A row that continues on the next one keeps its trailing spaces: they are part of the line.
      if (next?.isWrapped) text += line.translateToString(false, start, end);
      else text += line.translateToString(true, start, end) + (y < last ? "\n" : "");
    }
    // trimEnd, not /\s+$/: the expression is quadratic in a run of spaces that does not reach the
    // end, and the text is a command line a tenant types (shell-tracker.ts, clip).
    return text.trimEnd();
  }

  /**
   * Whether the line that starts at `from` shows nothing (all of its rows, whatever the cursor:
   * an erased line, or a cursor moved back over text, are told apart); null when the position is
   * gone or the alternate screen shows.
   */
  lineBlankSince(from: ScreenPosition): boolean | null {
    const buffer = this.live().buffer.active;
    const row = from.row;
    if (row < 0 || buffer.type !== "normal") return null;
    const cursorRow = buffer.baseY + buffer.cursorY;
    for (let y = row; ; y++) {
      const line = buffer.getLine(y);
      // The line's rows: up to the cursor's, and on while the next row continues it.
      if (!line || (y > cursorRow && !line.isWrapped)) return true;
      if (line.translateToString(true, y === row ? from.x : 0).trim() !== "") return false;
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    unwatchIdle(this);
    this.term?.dispose();
    this.term = null;
    this.serializer = null;
    this.checkpoint = null;
    this.positions.clear();
  }

  /**
   * Drops the emulator if it is idle and settled and a fresh one fed its checkpoint (the screen
   * serialized, as a snapshot's `ansi`) has exactly its state (screen-state.ts); otherwise keeps
   * it. Resolves whether it was dropped. Any use meanwhile (output, a call) cancels the drop.
   */
  async drop(): Promise<boolean> {
    const term = this.term;
    if (!term || this.disposed || this.dropping || !this.settled) return false;
    // Markers live on the normal buffer; with the alternate one showing they could not be made again.
    const positions = [...this.positions].some((p) => p.row >= 0);
    if (positions && term.buffer.active.type !== "normal") return false;
    const snapshot = this.capture(this.fed);
    const uses = this.uses; // after capture, itself a use
    let probeTitle: string | null = null;
    const probe = newTerminal(term.cols, term.rows, (title) => (probeTitle = title));
    this.dropping = true;
    try {
      await new Promise<void>((resolve) => probe.term.write(snapshot.ansi, resolve));
      setJoinState(probe.term, joinState(term));
      if (this.uses !== uses || this.disposed || this.term !== term) return false;
      if (emulatorState(probe.term, probeTitle) !== emulatorState(term, this.title)) return false;
    } finally {
      this.dropping = false;
      probe.term.dispose();
    }
    for (const position of this.positions) position.detach();
    this.checkpoint = { text: snapshot.ansi, snapshot, bracketedPaste: term.modes.bracketedPasteMode, joinState: joinState(term) };
    this.term = null;
    this.serializer = null;
    term.dispose();
    unwatchIdle(this);
    this.options.onIdle?.("dropped");
    return true;
  }

  /** The emulator, made again from its checkpoint if it was dropped; a use (resets the idle time). */
  private live(): Terminal {
    this.uses++;
    this.usedAt = Date.now();
    if (this.term) return this.term;
    const checkpoint = this.checkpoint as Checkpoint;
    this.checkpoint = null;
    const made = newTerminal(checkpoint.snapshot.cols, checkpoint.snapshot.rows, (title) => (this.title = title));
    const term = made.term;
    this.term = term;
    this.serializer = made.serializer;
    // Parsed before anything written after it; the positions' markers are made where their rows are.
    this.waiting++;
    term.write(checkpoint.text, () => {
      this.waiting--;
      if (this.term !== term) return;
      setJoinState(term, checkpoint.joinState);
      const buffer = term.buffer.active;
      for (const position of this.positions) {
        const row = position.row;
        if (row >= 0) position.attach(term.registerMarker(row - (buffer.baseY + buffer.cursorY)));
      }
    });
    if (this.idleMs > 0) watchIdle(this);
    this.options.onIdle?.("restored");
    return term;
  }

  private setBehind(behind: boolean): void {
    this.isBehind = behind;
    this.options.onBehind?.(behind);
  }

  private capture(offset: number): ScreenSnapshot {
    const term = this.live();
    const buffer = term.buffer.active;
    const lines: string[] = [];
    // xterm trims the cells never written; spaces written (a prompt's last one) go too.
    for (let y = 0; y < term.rows; y++) lines.push((buffer.getLine(buffer.baseY + y)?.translateToString(true) ?? "").replace(/ +$/, ""));
    const core = (term as unknown as { _core?: TerminalCore })._core;
    const hidden = core?.coreService?.isCursorHidden === true;
    const x = Math.min(buffer.cursorX, term.cols - 1);
    const y = buffer.cursorY;
    let ansi = this.title === null ? "" : `\x1b]2;${withoutControls(this.title)}\x07`;
    // The rows, the cursor's position and attributes, the alternate screen, the modes.
    ansi += (this.serializer as Serializer).serialize({ scrollback: 0 });
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
      title: this.title,
      lines,
      ansi,
    };
  }
}

/** A headless terminal of cols × rows with the serializer loaded, telling its title changes. */
function newTerminal(cols: number, rows: number, onTitle: (title: string) => void) {
  // No scrollback: the screen is what is on it (and a screen's memory stays small).
  const term = new Terminal({ cols, rows, scrollback: 0, allowProposedApi: true, logLevel: "off" });
  const serializer = new serializeAddon.SerializeAddon();
  // The addon's typings name @xterm/xterm's Terminal; the headless one has what it uses.
  term.loadAddon(serializer as unknown as Parameters<Terminal["loadAddon"]>[0]);
  term.onTitleChange(onTitle);
  return { term, serializer };
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

/**
 * The screen as the log's [from, to) draws it on a fresh terminal of cols × rows (a session with
 * no live emulator: ended, or its runner gone). Read a piece at a time, each parsed before the
 * next is read; gaps draw nothing. The snapshot's offset is where the log's data ended.
 */
export async function rebuildScreen(
  outputLog: OutputLog,
  key: string,
  range: { from: number; to: number; cols: number; rows: number },
): Promise<ScreenSnapshot> {
  const { from, to, cols, rows } = range;
  const screen = new TerminalScreen({ cols, rows, offset: from });
  try {
    let cursor = from;
    while (cursor < to) {
      const items = await withLogSlot(() => outputLog.read(key, cursor, to, REBUILD_PIECE_BYTES));
      if (items.length === 0) break;
      for (const item of items) {
        if (item.type === "chunk") {
          screen.write(item.offset, item.data);
          cursor = item.offset + item.data.byteLength;
        } else {
          screen.write(item.to, EMPTY);
          cursor = item.to;
        }
      }
      await screen.parsed();
    }
    return await screen.snapshot();
  } finally {
    screen.dispose();
  }
}
