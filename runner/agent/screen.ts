// The screen of a session as a person would see it (docs/protocol.md §3, "Agents": `screen`; §5,
// `from=screen`): a headless terminal emulator (xterm.js) fed every output byte in offset order.
// The only module that imports @xterm/headless and @xterm/addon-serialize.
//
// xterm's `write` is asynchronous: bytes are parsed in slices between other work. The screen
// keeps its own queue of bytes and of steps that must happen at a point of the stream (a resize,
// a snapshot, reading the command line at a shell mark), and hands xterm the bytes up to the next
// step once it has parsed everything before: so a step runs with the screen exactly at its point,
// and each batch of bytes starts with xterm's state known, which lets the screen skip plain text
// that would scroll away unseen (scrolled-off.ts). The queue is bounded: past BEHIND_BYTES not
// yet parsed the screen says it is behind (the session pauses its process) until it is back
// under CAUGHT_UP_BYTES.
import headless from "@xterm/headless";
import serializeAddon from "@xterm/addon-serialize";
import type { ScreenSnapshot } from "../../shared/agent.js";
import { scrolledOffPrefix } from "./scrolled-off.js";
import { ScreenPosition, emulatorState, joinState, setJoinState } from "./screen-state.js";
import { unwatchIdle, watchIdle } from "./screen-idle.js";
import { snapshotOf } from "./screen-snapshot.js";

export { ScreenPosition };

const { Terminal } = headless;
type Terminal = InstanceType<typeof Terminal>;
type Serializer = InstanceType<typeof serializeAddon.SerializeAddon>;

/** Bytes written and not yet parsed beyond which the screen is behind, and below which it has caught up. */
export const BEHIND_BYTES = 4 << 20;
export const CAUGHT_UP_BYTES = 1 << 20;
/** Queued bytes parsed as one batch, at most (a step ends a batch sooner). */
const BATCH_BYTES = 256 << 10;
/** Parsing goes on for this long, then yields to the thread's other work (other sessions' screens). */
const SLICE_MS = 12;
/**
 * Lines kept above the screen. One, not none: xterm 6.0.0 throws on a line feed after a resize
 * narrower then taller with no scrollback at all (scrolled-off.test.ts plays it), and a throw
 * inside its parser leaves that terminal unable to parse again.
 */
const SCROLLBACK = 1;

const CR = Uint8Array.of(0x0d);

export interface ScreenOptions {
  cols: number;
  rows: number;
  /** Raw offset of the first byte that will be written. */
  offset?: number;
  /** The screen fell behind (true) or caught up (false). */
  onBehind?: (behind: boolean) => void;
  /** The emulator threw while parsing: the screen is disposed, its steps run, nothing is parsed again. */
  onFailed?: (error: unknown) => void;
  /** Skip plain text that scrolls away unseen (scrolled-off.ts); default true. False parses every byte. */
  skipScrolledOff?: boolean;
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

/**
 * xterm's internals read here (pinned @xterm/headless 6.0.0): the scroll region, and whether the parser is between sequences (ground state, no async handler paused, no
 * partial UTF-8 character). Where one is missing, nothing is skipped.
 */
interface TerminalCore {
  buffer?: { scrollTop?: unknown; scrollBottom?: unknown };
  writeSync?: (data: Uint8Array) => void;
  _inputHandler?: {
    _parser?: { currentState?: unknown; _parseStack?: { state?: unknown } };
    _utf8Decoder?: { interim?: Uint8Array };
  };
}

/** A step queued at a point of the stream: runs once everything before it is parsed (or the screen is disposed). */
type Step = () => void;

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
  /** Bytes and steps not yet handed to xterm, in stream order. */
  private queue: (Uint8Array | Step)[] = [];
  /** A pump is scheduled (a microtask, or the next turn after a slice). */
  private scheduled = false;
  /** Bytes skipped as text that scrolled away unseen. */
  private skippedBytes = 0;

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

  /** Bytes written that were skipped, not parsed: plain text that scrolled away unseen. */
  get skipped(): number {
    return this.skippedBytes;
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
    this.touch();
    this.queue.push(bytes);
    this.kick();
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
    this.touch();
    this.waiting++;
    this.step(() => {
      this.waiting--;
      if (!this.disposed) callback();
    });
  }

  /**
   * Nothing written is left to parse and no afterParsed callback waits: the screen is as it is
   * at `offset` now. Not while the emulator is dropped: it is made again before it is read.
   */
  get settled(): boolean {
    return this.term !== null && this.pending === 0 && this.waiting === 0;
  }

  /** Resolves once every byte written so far is parsed (or the screen is disposed). */
  parsed(): Promise<void> {
    return new Promise((resolve) => {
      if (this.disposed) return resolve();
      this.step(resolve);
    });
  }

  /** The screen as it is at the offset written so far. Rejects if the screen is disposed first. */
  snapshot(): Promise<ScreenSnapshot> {
    const offset = this.fed;
    return new Promise((resolve, reject) => {
      if (this.disposed) return reject(new Error("the screen is gone"));
      // Dropped, with nothing written since: the screen it showed is the screen now.
      if (this.checkpoint && this.queue.length === 0) return resolve({ ...this.checkpoint.snapshot, offset });
      // Taken inside the step: once it returns, later bytes may be parsed.
      this.step(() => {
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
    // The steps still queued run now, each seeing the screen disposed (a snapshot rejects).
    const queue = this.queue;
    this.queue = [];
    for (const item of queue) if (typeof item === "function") item();
  }

  private step(step: Step): void {
    this.queue.push(step);
    this.kick();
  }

  /** Pumps from a microtask: a step never runs inside the call that queued it or the write before it. */
  private kick(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => this.pump());
  }

  /**
   * Runs the queue in order: each step once everything before it is parsed, and the bytes up to
   * the next step parsed as one batch, synchronously (each batch starts with xterm's state
   * known, and a throw is this screen's alone). After SLICE_MS it yields a turn to the thread's
   * other work and goes on.
   */
  private pump(): void {
    this.scheduled = false;
    const started = performance.now();
    while (!this.disposed && this.queue.length > 0) {
      const head = this.queue[0] as Uint8Array | Step;
      if (typeof head === "function") {
        this.queue.shift();
        head();
        continue;
      }
      let count = 0;
      let size = 0;
      while (count < this.queue.length && size < BATCH_BYTES) {
        const item = this.queue[count] as Uint8Array | Step;
        if (typeof item === "function") break;
        size += item.byteLength;
        count++;
      }
      const parts = this.queue.splice(0, count) as Uint8Array[];
      if (!this.parse(parts.length === 1 ? (parts[0] as Uint8Array) : Buffer.concat(parts, size))) return;
      this.pending -= size;
      if (this.isBehind && this.pending < CAUGHT_UP_BYTES) this.setBehind(false);
      if (performance.now() - started >= SLICE_MS && this.queue.length > 0) {
        this.scheduled = true;
        setImmediate(() => this.pump());
        return;
      }
    }
  }

  /** Parses a batch, skipping what scrolls away unseen; false if the emulator threw (the screen is then disposed). */
  private parse(batch: Uint8Array): boolean {
    try {
      const term = this.live();
      const core = (term as unknown as { _core: TerminalCore })._core;
      if (!core.writeSync) throw new Error("@xterm/headless has no writeSync (docs/architecture.md, \"Text that scrolls away unseen\")");
      const skip = this.skippable(term, batch);
      if (skip > 0) {
        this.skippedBytes += skip;
        core.writeSync(CR);
      }
      core.writeSync(skip > 0 ? batch.subarray(skip) : batch);
      return true;
    } catch (error) {
      this.dispose();
      this.options.onFailed?.(error);
      return false;
    }
  }

  /** How much of `batch` may be skipped as plain text that scrolls away unseen (scrolled-off.ts); everything before it is parsed. */
  private skippable(term: Terminal, batch: Uint8Array): number {
    if (this.options.skipScrolledOff === false || batch.byteLength < 4 * term.cols * term.rows) return 0;
    const core = (term as unknown as { _core?: TerminalCore })._core;
    const parser = core?._inputHandler?._parser;
    const interim = core?._inputHandler?._utf8Decoder?.interim;
    const buffer = core?.buffer;
    const between = parser?.currentState === 0 && parser._parseStack?.state === 0 && interim?.[0] === 0;
    const wholeScreen = buffer?.scrollTop === 0 && buffer.scrollBottom === term.rows - 1;
    return between && wholeScreen ? scrolledOffPrefix(batch, term.rows, SCROLLBACK) : 0;
  }

  /**
   * Drops the emulator if it is idle and settled and a fresh one fed its checkpoint (the screen
   * serialized, as a snapshot's `ansi`) has exactly its state on the screen (screen-state.ts);
   * otherwise keeps it. Resolves whether it was dropped. Any use meanwhile (output, a call)
   * cancels the drop.
   */
  async drop(): Promise<boolean> {
    const term = this.term;
    if (!term || this.disposed || this.dropping || !this.settled || this.queue.length > 0 || this.scheduled) return false;
    const buffer = term.buffer.active;
    // Markers live on the normal buffer; with the alternate one showing they could not be made
    // again. One on the line kept above the screen could not either (the checkpoint is the screen).
    const positions = [...this.positions].filter((p) => p.row >= 0);
    if (positions.length > 0 && (buffer.type !== "normal" || positions.some((p) => p.row < buffer.baseY))) return false;
    const snapshot = this.capture(this.fed);
    // The checkpoint carries the line kept above the screen too: a taller resize shows it again.
    const text = this.capture(this.fed, SCROLLBACK).ansi;
    const uses = this.uses; // after capture, itself a use
    let probeTitle: string | null = null;
    const probe = newTerminal(term.cols, term.rows, (title) => (probeTitle = title));
    this.dropping = true;
    try {
      await new Promise<void>((resolve) => probe.term.write(text, resolve));
      setJoinState(probe.term, joinState(term));
      if (this.uses !== uses || this.disposed || this.term !== term) return false;
      if (emulatorState(probe.term, probeTitle) !== emulatorState(term, this.title)) return false;
    } finally {
      this.dropping = false;
      probe.term.dispose();
    }
    // Rows from the screen's top (the line above it, in the checkpoint too, holds none).
    for (const position of this.positions) position.detach(buffer.baseY);
    this.checkpoint = { text, snapshot, bracketedPaste: term.modes.bracketedPasteMode, joinState: joinState(term) };
    this.term = null;
    this.serializer = null;
    term.dispose();
    unwatchIdle(this);
    this.options.onIdle?.("dropped");
    return true;
  }

  /** A use of the emulator: the idle time starts again, and a drop under way gives up. */
  private touch(): void {
    this.uses++;
    this.usedAt = Date.now();
  }

  /** The emulator, made again from its checkpoint if it was dropped; a use. */
  private live(): Terminal {
    this.touch();
    if (this.term) return this.term;
    const checkpoint = this.checkpoint as Checkpoint;
    this.checkpoint = null;
    const made = newTerminal(checkpoint.snapshot.cols, checkpoint.snapshot.rows, (title) => (this.title = title));
    const term = made.term;
    this.term = term;
    this.serializer = made.serializer;
    // Parsed at once (a few KiB), before anything written after it; each position gets a marker
    // at its row on the screen.
    (term as unknown as { _core: TerminalCore })._core.writeSync?.(new TextEncoder().encode(checkpoint.text));
    setJoinState(term, checkpoint.joinState);
    const buffer = term.buffer.active;
    for (const position of this.positions) {
      const row = position.row; // from the screen's top
      if (row >= 0) position.attach(term.registerMarker(row - buffer.cursorY));
    }
    if (this.idleMs > 0) watchIdle(this);
    this.options.onIdle?.("restored");
    return term;
  }

  private setBehind(behind: boolean): void {
    this.isBehind = behind;
    this.options.onBehind?.(behind);
  }

  /** The screen now; `ansi` draws it (with `scrollback` lines above it, for a checkpoint). */
  private capture(offset: number, scrollback = 0): ScreenSnapshot {
    return snapshotOf(this.live(), this.serializer as Serializer, this.title, offset, scrollback);
  }

}

/** A headless terminal of cols × rows with the serializer loaded, telling its title changes. */
function newTerminal(cols: number, rows: number, onTitle: (title: string) => void): { term: Terminal; serializer: Serializer } {
  // Almost no scrollback: the screen is what is on it (and a screen's memory stays small).
  const term = new Terminal({ cols, rows, scrollback: SCROLLBACK, allowProposedApi: true, logLevel: "off" });
  const serializer = new serializeAddon.SerializeAddon();
  // The addon's typings name @xterm/xterm's Terminal; the headless one has what it uses.
  term.loadAddon(serializer as unknown as Parameters<Terminal["loadAddon"]>[0]);
  term.onTitleChange(onTitle);
  return { term, serializer };
}

