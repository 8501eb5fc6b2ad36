// `GET .../output` for one session: logged bytes from `from` (or the oldest retained) up to `to`
// (or now), read through the runner-served log (LogReads), at most MAX_OUTPUT_RESPONSE_BYTES
// copied once into the answer. At most `maxInFlight` run at once (429 beyond), so concurrent
// reads cannot exhaust the session object's memory.
import { type Failure, fail } from "../shared/errors.js";
import type { LogReads, ReadHandler } from "./log-reads.js";

/** Most bytes one answer holds; `X-Offset-To` says where to go on from. */
export const MAX_OUTPUT_RESPONSE_BYTES = 8 << 20;
/** Output requested from the log per read. */
const READ_PIECE_BYTES = 4 << 20;

export interface OutputRange {
  from: number;
  to: number;
  bytes: Uint8Array<ArrayBuffer>;
}

export class OutputReads {
  private inFlight = 0;

  constructor(
    private readonly reads: LogReads,
    private readonly port: OutputPort,
  ) {}

  async read(from: number | undefined, to: number | undefined, maxInFlight: number): Promise<OutputRange | Failure> {
    if (this.inFlight >= maxInFlight) {
      return fail("QUOTA_EXCEEDED", `at most ${maxInFlight} output reads at once per session; try again`, 1);
    }
    this.inFlight++;
    try {
      return await this.collect(from, to);
    } finally {
      this.inFlight--;
    }
  }

  private async collect(from: number | undefined, to: number | undefined): Promise<OutputRange | Failure> {
    const offset = this.port.offset();
    const retainedFrom = this.port.retainedFrom();
    const end = Math.min(to ?? offset, offset);
    let start = Math.min(from ?? retainedFrom, end);
    if (start < retainedFrom && retainedFrom <= end) start = retainedFrom;
    const bytes = new Uint8Array(Math.min(end - start, MAX_OUTPUT_RESPONSE_BYTES));
    let size = 0;
    let cursor = start;
    while (cursor < end && size < bytes.byteLength) {
      const before = cursor;
      const pieceEnd = Math.min(end, cursor + Math.min(READ_PIECE_BYTES, bytes.byteLength - size));
      let stopped = false;
      const failed = await this.piece(cursor, pieceEnd, {
        onChunk: (chunkOffset, data) => {
          if (stopped || chunkOffset !== cursor) return;
          const take = data.subarray(0, bytes.byteLength - size);
          bytes.set(take, size);
          size += take.byteLength;
          cursor += take.byteLength;
        },
        onGap: (gapFrom, gapTo) => {
          if (stopped) return;
          // A gap before any byte moves the start on; a gap after bytes ends this answer.
          if (size > 0) {
            stopped = true;
            return;
          }
          this.port.noteLeadingGap(gapFrom, gapTo);
          start = cursor = gapTo;
        },
      });
      if (failed) return failed;
      if (stopped || cursor === before) break;
    }
    // A view would carry its whole buffer across RPC: copy when the answer came out short.
    return { from: start, to: start + size, bytes: size === bytes.byteLength ? bytes : bytes.slice(0, size) };
  }

  /** Reads [from, to) in one go; resolves with the failure, if it failed. */
  private piece(from: number, to: number, handler: Pick<ReadHandler, "onChunk" | "onGap">): Promise<Failure | undefined> {
    return new Promise((resolve) => {
      this.reads.read(from, to, {
        ...handler,
        onEnd: (_end, error) => resolve(error ? fail(error.code, error.message) : undefined),
      });
    });
  }
}

// ---- Shared types ----

/** What output reads need from their session. */
export interface OutputPort {
  offset(): number;
  retainedFrom(): number;
  /** A read found nothing in [from, to) before any byte. */
  noteLeadingGap(from: number, to: number): void;
}
