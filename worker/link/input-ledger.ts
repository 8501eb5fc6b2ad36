// Input on its way to the runner, kept so that a link that dies with some of it is made whole
// (docs/protocol.md §7, "Input across a new link"). The edge counts the input bytes it sends on
// host links and keeps the last RESEND_KEEP_BYTES of them; the runner counts the bytes it has
// taken from any link and says so in the `input_state` that follows each `resume`. Input sent on
// a new link before that count arrives waits here, so the bytes sent again come first and none
// arrives twice. Pure bookkeeping: the links send what it returns.

/** The input the edge keeps for sending again: a link dies with far less than this in flight. */
export const RESEND_KEEP_BYTES = 256 << 10;
/**
 * Input held on a new link until the runner's count arrives (a round trip): past this, more input
 * is refused as when the process does not read (links' inputRefused), so what is held stays under
 * this plus one write (a REST body or a raw paste, each bounded).
 */
export const HELD_MAX_BYTES = 256 << 10;

/**
 * One frame's input: plain bytes (REST, raw clients, unnumbered frames) or a writer's numbered
 * bytes from `offset` in its own input, which the runner writes once (docs/protocol.md §7).
 */
export interface InputPiece {
  bytes: Uint8Array;
  /** `base`: what the writer had acknowledged when its socket connected (`inputFrom`). */
  writer?: { key: string; offset: number; base: number };
}

/**
 * What a runner's count means: `resend` (in order) is what it lacks; or, when more is missing
 * than is kept, `lost` bytes are gone and nothing is sent again (that would skip them).
 */
export interface Taken {
  resend: InputPiece[];
  lost: number;
}

export class InputLedger {
  /** Input bytes sent on host links since the count was last known; null: not known (woken, or never linked). */
  private sent: number | null = null;
  /** The last bytes sent, in order, ending at `sent`. */
  private kept: InputPiece[] = [];
  private keptBytes = 0;
  /** A new link is open and the runner has not said yet what it took: input waits in `held`. */
  private awaiting = false;
  private held: InputPiece[] = [];
  private heldBytes = 0;

  /** A new host link opened: input waits for the runner's count, which follows its `resume`. */
  linkOpened(): void {
    this.awaiting = true;
  }

  /** Input for the process, a frame-sized piece: returned when it goes now, "held" while it waits for the runner's count. */
  input(piece: InputPiece): InputPiece | "held" {
    if (this.awaiting) {
      this.held.push(piece);
      this.heldBytes += piece.bytes.byteLength;
      return "held";
    }
    this.keep(piece);
    return piece;
  }

  /**
   * The runner has taken `taken` input bytes of this session (undefined: a runner that does not
   * count). Returns what to send again, then what was held, in that order; from here input goes
   * straight out.
   */
  runnerTook(taken: number | undefined): Taken & { held: InputPiece[] } {
    const answer = taken === undefined ? { resend: [], lost: 0 } : this.reconcile(taken);
    const held = this.held;
    this.awaiting = false;
    this.held = [];
    this.heldBytes = 0;
    for (const piece of held) this.keep(piece);
    return { ...answer, held };
  }

  /** A new link waits for the runner's count. */
  get waiting(): boolean {
    return this.awaiting;
  }

  /** Enough is held: refuse more input until the runner's count arrives. */
  get full(): boolean {
    return this.heldBytes >= HELD_MAX_BYTES;
  }

  private reconcile(taken: number): Taken {
    const sent = this.sent;
    const missing = sent === null ? 0 : sent - taken;
    if (missing <= 0 || missing > this.keptBytes) {
      // Unknown (this object woke, or the link is the first), nothing missing, or past saving:
      // count from the runner's count from here on.
      const lost = Math.max(0, missing - this.keptBytes);
      this.sent = taken;
      this.kept = [];
      this.keptBytes = 0;
      return { resend: [], lost };
    }
    // The last `missing` bytes of what is kept, in order; they stay kept (this link may die too).
    const resend: InputPiece[] = [];
    let skip = this.keptBytes - missing;
    for (const piece of this.kept) {
      if (skip >= piece.bytes.byteLength) {
        skip -= piece.bytes.byteLength;
        continue;
      }
      resend.push(skip > 0 ? tail(piece, skip) : piece);
      skip = 0;
    }
    return { resend, lost: 0 };
  }

  private keep(piece: InputPiece): void {
    if (this.sent === null) return; // not counting: a runner count will set it
    this.sent += piece.bytes.byteLength;
    this.kept.push(piece);
    this.keptBytes += piece.bytes.byteLength;
    while (this.keptBytes - (this.kept[0]?.bytes.byteLength ?? 0) >= RESEND_KEEP_BYTES) {
      const dropped = this.kept.shift();
      if (dropped) this.keptBytes -= dropped.bytes.byteLength;
    }
  }
}

/** A piece without its first `skip` bytes (a writer's piece then starts `skip` further on). */
function tail(piece: InputPiece, skip: number): InputPiece {
  const bytes = piece.bytes.subarray(skip);
  return piece.writer ? { bytes, writer: { ...piece.writer, offset: piece.writer.offset + skip } } : { bytes };
}
