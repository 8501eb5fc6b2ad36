// Plain text a terminal would scroll away unseen (docs/architecture.md, "Text that scrolls away
// unseen"). In a flood (`cat` of a log, `yes`, base64) most lines leave the screen right after
// they are drawn, and the screen's emulator has no scrollback: parsing them is work nobody can
// see. This finds the part of a chunk that cannot change what the screen shows afterwards, so the
// screen (screen.ts) can skip it.
//
// Why skipping is exact. Take a chunk of plain bytes only (printable ASCII, CR, LF), parsed from
// the parser's ground state with the scroll region the whole screen, and split it after a CR LF
// into a prefix P and the rest S, where S holds at least 2 × rows + scrollback line feeds and a
// printable byte. Then:
// - P contains no escape sequence, so it changes no mode, attribute, charset, title, tab stop or
//   scroll region: everything S is parsed with is the same either way.
// - After P the cursor is at column 0 (CR), with no wrap pending. Writing one CR instead of P
//   leaves the column the same; only the row differs.
// - From any row, 2 × rows + scrollback line feeds scroll the whole screen at least rows +
//   scrollback times: every row on the screen before S, whatever P wrote on it, leaves the screen
//   and the lines kept above it (and its markers with it). Every row left was scrolled in blank
//   (in the same background colour: P changes no attribute) and drawn by S alone, and the cursor
//   ends on the bottom row either way.
// - The last character printed (which `CSI b` repeats) is one of S's.
// So the screen, the cursor and every state after "CR + S" equal those after "P + S". A property
// test (scrolled-off.test.ts) holds the two side by side on random streams.

const CR = 0x0d;
const LF = 0x0a;

/** 1 for a byte that, in the parser's ground state, only prints one cell or moves the cursor (CR, LF). */
const PLAIN = new Uint8Array(256);
PLAIN.fill(1, 0x20, 0x7f);
PLAIN[CR] = 1;
PLAIN[LF] = 1;

/**
 * How many leading bytes of `bytes` the screen may skip (writing one CR instead), given that the
 * parser is in its ground state with no partial UTF-8 sequence and the scroll region is the whole
 * screen of `rows` rows with `scrollback` lines kept above it: the length of the longest prefix
 * that ends with CR LF and is followed, within the chunk's leading run of plain bytes, by at least
 * 2 × rows + scrollback line feeds and a printable byte. 0 when none is.
 */
export function scrolledOffPrefix(bytes: Uint8Array, rows: number, scrollback: number): number {
  let run = 0;
  const length = bytes.length;
  while (run < length && PLAIN[bytes[run] as number] === 1) run++;
  const need = 2 * rows + scrollback;
  let feeds = 0;
  let printable = false;
  for (let i = run - 1; i > 0; i--) {
    const byte = bytes[i] as number;
    if (byte !== LF) {
      if (byte !== CR) printable = true;
      continue;
    }
    // bytes[i] is a line feed with `feeds` line feeds after it in the run.
    if (feeds >= need && printable && bytes[i - 1] === CR) return i + 1;
    feeds++;
  }
  return 0;
}
