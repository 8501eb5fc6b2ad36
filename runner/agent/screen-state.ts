// Everything a headless xterm (pinned @xterm/headless 6.0.0) holds that decides what later bytes
// draw, as one string: two terminals with the same string draw the same from here on. screen.ts
// drops an idle session's emulator only when a fresh one fed its checkpoint (the serialized
// screen) has the same state as it (docs/architecture.md, "Idle screens"): whatever the serializer
// does not carry (a pending wrap, a charset, a saved cursor, a tab stop, a link, a sequence cut in
// the middle, ...) shows here as a difference, and the emulator is kept.
//
// Also `ScreenPosition`, a position on the screen that outlives a dropped emulator.
//
// It reads xterm's internals (no public API has them); a name that is not there reads as
// `undefined` on both sides, so this file must list what the pinned version has (screen.test.ts
// checks that each case it names is told apart).
//
// The one thing a checkpoint cannot draw is carried by hand: the parser's join state (the last
// character printed, which a combining one that follows joins with): `joinState` reads it and
// `setJoinState` puts it on the emulator made again.

type Bag = Record<string, unknown>;

/** An xterm marker (screen.ts makes them): a row that moves as the screen scrolls. */
interface Marker {
  readonly line: number;
  readonly isDisposed: boolean;
  dispose(): void;
}


const get = (from: unknown, ...path: string[]): unknown => {
  let at = from;
  for (const key of path) at = at !== null && typeof at === "object" ? (at as Bag)[key] : undefined;
  return at;
};

/** Plain fields of an attribute object (fg, bg and the extended ones: underline style and colour, link). */
function attrs(data: unknown): unknown {
  const extended = get(data, "extended");
  return [get(data, "fg"), get(data, "bg"), get(extended, "_ext"), get(extended, "_urlId")];
}

/** One buffer's rows, cell data as stored (code point, width, colours, flags), and its cursor state. */
function bufferState(buffer: unknown, cols: number): unknown {
  const lines = get(buffer, "lines");
  const length = get(lines, "length");
  const rows: unknown[] = [];
  if (typeof length === "number") {
    for (let y = 0; y < length; y++) {
      const line = (lines as { get(i: number): unknown }).get(y);
      const data = get(line, "_data");
      const cells = data instanceof Uint32Array ? Array.from(data.subarray(0, cols * 3)) : null;
      const combined = get(line, "_combined");
      const extended = get(line, "_extendedAttrs") as Bag | undefined;
      const ext = extended ? Object.entries(extended).map(([i, a]) => [i, get(a, "_ext"), get(a, "_urlId")]) : null;
      rows.push([get(line, "isWrapped"), get(line, "length"), cells, combined, ext]);
    }
  }
  const tabs = tabStops(get(buffer, "tabs"), cols);
  return {
    ybase: get(buffer, "ybase"),
    ydisp: get(buffer, "ydisp"),
    x: get(buffer, "x"),
    y: get(buffer, "y"),
    scrollTop: get(buffer, "scrollTop"),
    scrollBottom: get(buffer, "scrollBottom"),
    savedX: get(buffer, "savedX"),
    savedY: get(buffer, "savedY"),
    savedAttr: attrs(get(buffer, "savedCurAttrData")),
    savedCharset: get(buffer, "savedCharset") ?? null,
    tabs,
    rows,
  };
}

/**
 * The tab stops that can matter: those on the screen, and whether the ones past its right edge
 * (left by a narrowing) are what widening it again would set anyway. Widening sets a stop every
 * 8 columns from the last stop on the screen (xterm's setupTabStops), so stops past the edge are
 * no difference when that stop and they are all on multiples of 8 (a fresh terminal has none).
 */
function tabStops(tabs: unknown, cols: number): unknown {
  if (!tabs || typeof tabs !== "object") return null;
  const stops = Object.keys(tabs)
    .filter((key) => (tabs as Bag)[key])
    .map(Number);
  const shown = stops.filter((x) => x < cols);
  const past = stops.filter((x) => x >= cols);
  const last = shown.length > 0 ? Math.max(...shown) : 0;
  return [shown.sort((a, b) => a - b), last % 8 === 0 && past.every((x) => x % 8 === 0)];
}

/** The state of `term` (an @xterm/headless Terminal) that later bytes are drawn from. */
export function emulatorState(term: unknown, title: string | null): string {
  const core = get(term, "_core");
  const cols = get(term, "cols") as number;
  const input = get(core, "_inputHandler");
  const parser = get(input, "_parser");
  const buffers = get(core, "_bufferService", "buffers");
  const active = get(core, "_bufferService", "buffer");
  const state = {
    cols,
    rows: get(term, "rows"),
    title,
    alternate: active !== undefined && active === get(buffers, "alt"),
    modes: get(term, "modes"),
    decPrivateModes: get(core, "coreService", "decPrivateModes"),
    coreModes: get(core, "coreService", "modes"),
    cursorHidden: get(core, "coreService", "isCursorHidden"),
    cursorStyle: get(term, "options", "cursorStyle"),
    cursorBlink: get(term, "options", "cursorBlink"),
    mouse: [get(core, "coreMouseService", "_activeProtocol"), get(core, "coreMouseService", "_activeEncoding")],
    charset: [get(core, "_charsetService", "glevel"), get(core, "_charsetService", "_charsets"), get(core, "_charsetService", "charset") ?? null],
    attr: attrs(get(input, "_curAttrData")),
    eraseAttr: attrs(get(input, "_eraseAttrDataInternal")),
    // Not the icon name (OSC 0 and 1): nothing reads it here (xterm reports it only with
    // windowOptions, which are off, and a headless terminal tells no event for it).
    titles: [get(input, "_windowTitle"), get(input, "_windowTitleStack")],
    // A sequence or a UTF-8 character cut by the end of the output so far.
    parser: [get(parser, "currentState"), get(parser, "precedingJoinState"), get(input, "_parseStack", "paused")],
    osc: get(parser, "_oscParser", "_state"),
    dcs: get(parser, "_dcsParser", "_ident"),
    utf8: Array.from((get(input, "_utf8Decoder", "interim") as Uint8Array | undefined) ?? []),
    utf16: get(input, "_stringDecoder", "_interim"),
    normal: bufferState(get(buffers, "normal"), cols),
    alt: bufferState(get(buffers, "alt"), cols),
  };
  return JSON.stringify(state);
}

/** The parser's join state (the properties of the last character printed; 0 after any sequence). */
export function joinState(term: unknown): number {
  const value = get(term, "_core", "_inputHandler", "_parser", "precedingJoinState");
  return typeof value === "number" ? value : 0;
}

/** Sets it on a terminal made again from its checkpoint (which ends with a sequence, or nothing). */
export function setJoinState(term: unknown, value: number): void {
  const parser = get(term, "_core", "_inputHandler", "_parser");
  if (parser && typeof parser === "object" && "precedingJoinState" in parser) (parser as Bag).precedingJoinState = value;
}

/**
 * Where the cursor was at a point of the stream (the start of a shell's command line): an xterm
 * marker, which moves with its row as the screen scrolls. An emulator dropped while idle takes
 * its rows with it; the position keeps the row and gets a new marker on the emulator restored.
 */
export class ScreenPosition {
  /** The row while the emulator is dropped (-1: it had left the screen). */
  private line = -1;
  private disposed = false;

  constructor(
    private marker: Marker | null,
    readonly x: number,
    private readonly owner: Set<ScreenPosition>,
  ) {}

  /** Its row in the buffer; -1 once it has left the screen, or is disposed. */
  get row(): number {
    if (this.disposed) return -1;
    if (this.marker) return this.marker.isDisposed ? -1 : this.marker.line;
    return this.line;
  }

  /** The emulator is dropped: the row on the screen (`row` − `base`) is kept, not the marker (it holds the old emulator's buffer). */
  detach(base: number): void {
    const row = this.row;
    this.line = row < 0 ? -1 : row - base;
    this.marker = null;
  }

  /** On the emulator made again: a new marker at its row. */
  attach(marker: Marker | undefined): void {
    this.marker = marker ?? null;
    this.line = -1;
  }

  /** No longer needed: its marker goes, and a restored emulator gets none for it. */
  dispose(): void {
    this.disposed = true;
    this.marker?.dispose();
    this.marker = null;
    this.owner.delete(this);
  }
}
