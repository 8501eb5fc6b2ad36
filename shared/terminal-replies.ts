// What a terminal sends back on its own when a program queries it (docs/protocol.md §5, "Replies
// to replayed queries"): recognised in a piece of input and cut out of it, everything else kept
// byte for byte. A client replaying a session's history drops these while its terminal parses the
// replayed bytes, since those queries were answered long ago, and typing the answers again would
// put `1;2c` at the prompt.
//
// Replies (7-bit forms; xterm.js, tmux and xterm send no 8-bit C1 unless asked):
// - CSI with a private marker `?`, `>` or `=`: DA1 `ESC[?1;2c`, DA2 `ESC[>0;276;0c`, DECRPM of a
//   private mode `ESC[?2;1$y`, DSR answers `ESC[?10n`, the kitty keyboard flags `ESC[?0u`,
//   XTSMGRAPHICS, XTQMODKEYS `ESC[>4;2m`... No key or mouse report uses these markers (SGR mouse
//   reports use `<`).
// - CSI without a marker, of the shapes only replies have: CPR `ESC[24;80R`, DSR `ESC[0n`,
//   DECRPM of an ANSI mode `ESC[4;2$y`, window reports (XTWINOPS) `ESC[8;24;80t`, DECREQTPARM
//   `ESC[2;1;1;112;112;1;0x`. CPR has the shape of a modified F3 in xterm (`ESC[1;5R`, Ctrl+F3):
//   such a key typed while a replay is being parsed is dropped with the replies.
// - Focus reports `ESC[I` / `ESC[O`: a terminal sends one at once when output turns focus
//   reporting on (DECSET 1004; xterm.js does, tmux with `focus-events` on), so a replayed `vim`
//   start gets one too.
//   A person's own focus change while a replay is being parsed is lost with it; the next is sent.
// - Every OSC (`ESC]10;rgb:ffff/ffff/ffff` + BEL or ST, colours 4/10/11/12, clipboard 52, titles
//   `ESC]l…`) and every DCS (`ESCP1$r…ST` DECRQSS, `ESCP>|…ST` XTVERSION, `ESCP1+r…ST` XTGETTCAP,
//   `ESCP!|…ST` DA3): a keyboard never sends either.
// Not replies, and kept: keys (`ESC[A`, `ESC[1;5A`, `ESCOP`, `ESC[15~`), mouse reports and
// bracketed pastes: what the person did.

/* eslint-disable no-control-regex -- ESC, BEL and ST are what these sequences are made of */

/** A complete reply starting at `lastIndex` (sticky). */
const REPLY =
  /\x1b(?:\[(?:[IO]|[?>=][\d;:]*[\x20-\x2f]*[\x40-\x7e]|\d+;\d+R|\d+(?:;\d+)*n|\d+;\d+\$y|\d+(?:;\d+)*t|[0-3](?:;\d+)+x)|[\]P][^\x07\x1b]*(?:\x07|\x1b\\))/y;

/**
 * The start of what could still become a reply when more input comes: from an ESC to the end of
 * the input. A lone ESC (the Escape key) and `ESC[` (Alt+[) look like this too.
 */
const UNFINISHED = /\x1b(?:\[[?>=]?[\d;:]*[\x20-\x2f]*|[\]P][^\x07\x1b]*\x1b?)?$/y;

/** Past this, an unfinished OSC or DCS is not held back any longer: it is kept as typed. */
export const MAX_HELD_CHARS = 4096;

export interface Stripped {
  /** The input without its replies, every other character as it was. */
  kept: string;
  /** The replies cut out, in order. */
  replies: string[];
}

function scan(input: string, holdUnfinished: boolean): Stripped & { held: string } {
  const replies: string[] = [];
  let kept = "";
  let from = 0;
  let at = input.indexOf("\x1b");
  while (at >= 0) {
    REPLY.lastIndex = at;
    const reply = REPLY.exec(input);
    if (reply) {
      kept += input.slice(from, at);
      replies.push(reply[0]);
      from = at + reply[0].length;
      at = input.indexOf("\x1b", from);
      continue;
    }
    UNFINISHED.lastIndex = at;
    if (holdUnfinished && input.length - at <= MAX_HELD_CHARS && UNFINISHED.test(input)) {
      return { kept: kept + input.slice(from, at), replies, held: input.slice(at) };
    }
    at = input.indexOf("\x1b", at + 1);
  }
  return { kept: kept + input.slice(from), replies, held: "" };
}

/** `input` without the terminal replies in it; a reply cut short at its end is kept as it is. */
export function stripReplies(input: string): Stripped {
  const { kept, replies } = scan(input, false);
  return { kept, replies };
}

/**
 * The same over a stream of input pieces (a terminal's stdin, read in chunks): a reply split
 * across two pieces is recognised whole. The end of a piece that could still become a reply is
 * held back until the next piece says what it is, or until `flush()`.
 */
export class ReplyStripper {
  private held = "";

  push(piece: string): Stripped {
    const { kept, replies, held } = scan(this.held + piece, true);
    this.held = held;
    return { kept, replies };
  }

  /** What is held back (an unfinished sequence, or an Escape key), given up as typed. */
  flush(): string {
    const held = this.held;
    this.held = "";
    return held;
  }
}
