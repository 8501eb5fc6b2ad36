// `GET .../output` for one session: logged bytes from `from` (or the oldest retained) up to `to`
// (or now), read through the runner-served log (LogReads), at most MAX_OUTPUT_RESPONSE_BYTES
// copied once into the answer; or one stream's bytes of that range; or, for exec, the first
// bytes of the output with stdout and stderr apart. At most `maxInFlight` run at once (429 beyond), so concurrent
// reads cannot exhaust the session object's memory.
import { type Failure, fail } from "../../shared/errors.js";
import type { ChunkMeta, OutputStream } from "../../shared/protocol.js";
import type { LogReads, ReadHandler } from "./log-reads.js";
import type { OutputRange, StreamsRange } from "../rpc.js";

/** Most bytes one answer holds; `X-Offset-To` says where to go on from. */
export const MAX_OUTPUT_RESPONSE_BYTES = 8 << 20;
/** Output requested from the log per read. */
const READ_PIECE_BYTES = 4 << 20;

export class OutputReads {
  private inFlight = 0;

  constructor(
    private readonly reads: LogReads,
    private readonly port: OutputPort,
  ) {}

  /** `GET .../output`: the range's bytes, or only one stream's bytes of it (`stream`). */
  async read(
    from: number | undefined,
    to: number | undefined,
    maxInFlight: number,
    stream?: OutputStream,
  ): Promise<OutputRange | Failure> {
    return this.limited(maxInFlight, async () => {
      const { start, end } = this.clamp(from, to);
      const bytes = new Uint8Array(Math.min(end - start, MAX_OUTPUT_RESPONSE_BYTES));
      let size = 0;
      const walked = await this.walk(start, end, bytes.byteLength, (data, meta) => {
        if (stream && meta.stream !== stream) return;
        bytes.set(data, size);
        size += data.byteLength;
      });
      if ("failure" in walked) return walked;
      // A view would carry its whole buffer across RPC: copy when the answer came out short.
      return { from: walked.from, to: walked.to, bytes: size === bytes.byteLength ? bytes : bytes.slice(0, size) };
    });
  }

  /** exec's answer: the first `maxBytes` of the output, stdout and stderr apart. */
  async readStreams(maxBytes: number, maxInFlight: number): Promise<StreamsRange | Failure> {
    return this.limited(maxInFlight, async () => {
      const { start, end } = this.clamp(undefined, undefined);
      const parts: Record<OutputStream, Uint8Array[]> = { stdout: [], stderr: [] };
      const walked = await this.walk(start, end, Math.min(end - start, maxBytes), (data, meta) => {
        parts[meta.stream].push(data.slice());
      });
      if ("failure" in walked) return walked;
      return { from: walked.from, to: walked.to, stdout: concat(parts.stdout), stderr: concat(parts.stderr) };
    });
  }

  private async limited<T>(maxInFlight: number, work: () => Promise<T | Failure>): Promise<T | Failure> {
    if (this.inFlight >= maxInFlight) {
      return fail("QUOTA_EXCEEDED", `at most ${maxInFlight} output reads at once per session; try again`, 1);
    }
    this.inFlight++;
    try {
      return await work();
    } finally {
      this.inFlight--;
    }
  }

  /** The range a read covers: `from` (or the oldest retained) up to `to` (or now), never past now. */
  clamp(from: number | undefined, to: number | undefined): { start: number; end: number } {
    const offset = this.port.offset();
    const retainedFrom = this.port.retainedFrom();
    const end = Math.min(to ?? offset, offset);
    let start = Math.min(from ?? retainedFrom, end);
    if (start < retainedFrom && retainedFrom <= end) start = retainedFrom;
    return { start, end };
  }

  /**
   * Reads [start, end) in pieces and hands `take` each run of bytes in order, at most `maxBytes`
   * of them; resolves with the range covered. A gap before any byte moves the start on; a gap
   * after bytes ends the walk there.
   */
  private async walk(
    start: number,
    end: number,
    maxBytes: number,
    take: (data: Uint8Array, meta: ChunkMeta) => void,
  ): Promise<{ from: number; to: number } | Failure> {
    let size = 0;
    let cursor = start;
    while (cursor < end && size < maxBytes) {
      const before = cursor;
      const pieceEnd = Math.min(end, cursor + Math.min(READ_PIECE_BYTES, maxBytes - size));
      let stopped = false;
      const failed = await this.piece(cursor, pieceEnd, {
        onChunk: (chunkOffset, data, meta) => {
          if (stopped || chunkOffset !== cursor) return;
          const part = data.subarray(0, maxBytes - size);
          take(part, meta);
          size += part.byteLength;
          cursor += part.byteLength;
        },
        onGap: (gapFrom, gapTo) => {
          if (stopped) return;
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
    return { from: start, to: cursor };
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

/** The parts, one after another, in one new buffer. */
export function concat(parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

// ---- Shared types ----

/** What output reads need from their session. */
export interface OutputPort {
  offset(): number;
  retainedFrom(): number;
  /** A read found nothing in [from, to) before any byte. */
  noteLeadingGap(from: number, to: number): void;
}
