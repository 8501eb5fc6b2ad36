// The output most recently read from the log, kept in the session object: one contiguous run
// of chunks, at most MAX_BYTES. Replays start from it when they can, so clients that connect
// with the same `from` one after another (a page reloaded, a phone on a flaky link, or clients
// that connect and drop in a loop) cost the runner and the log one read, not one each.

/** Bytes kept: a replay's first piece or two. */
const MAX_BYTES = 4 << 20;

import type { OutputStream } from "../../shared/protocol.js";

interface Chunk {
  offset: number;
  data: Uint8Array;
  stream: OutputStream;
}

export class ReplayCache {
  private chunks: Chunk[] = [];
  private bytes = 0;

  /** Where the kept run starts and ends ([from, to)); from === to when empty. */
  get from(): number {
    return this.chunks[0]?.offset ?? 0;
  }

  get to(): number {
    const last = this.chunks.at(-1);
    return last ? last.offset + last.data.byteLength : 0;
  }

  /**
   * A chunk just read from the log. It extends the run when it starts where the run ends; a
   * chunk before the run starts a new one (replays mostly start at the log's beginning, so the
   * earliest run is the one the next clients want); any other chunk is not kept.
   */
  note(offset: number, data: Uint8Array, stream: OutputStream = "stdout"): void {
    if (data.byteLength === 0) return;
    const empty = this.chunks.length === 0;
    if (!empty && offset < this.from && offset + data.byteLength <= this.from) this.clear();
    else if (!empty && offset !== this.to) return;
    if (this.bytes + data.byteLength > MAX_BYTES) return;
    this.chunks.push({ offset, data, stream });
    this.bytes += data.byteLength;
  }

  /** Kept chunks covering [from, from + maxBytes) as far as the run reaches; empty if it does not hold `from`. */
  take(from: number, maxBytes: number): Chunk[] {
    if (from < this.from || from >= this.to) return [];
    const taken: Chunk[] = [];
    let size = 0;
    for (const chunk of this.chunks) {
      const end = chunk.offset + chunk.data.byteLength;
      if (end <= from) continue;
      const data = chunk.offset < from ? chunk.data.subarray(from - chunk.offset) : chunk.data;
      taken.push({ offset: Math.max(chunk.offset, from), data, stream: chunk.stream });
      size += data.byteLength;
      if (size >= maxBytes) break;
    }
    return taken;
  }

  /** The log does not hold [from, to): whatever the run holds of it is no longer the log's. */
  forget(from: number, to: number): void {
    if (this.chunks.length > 0 && from < this.to && to > this.from) this.clear();
  }

  clear(): void {
    this.chunks = [];
    this.bytes = 0;
  }
}
