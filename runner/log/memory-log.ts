// The in-process output log, used when no Redis is configured: per session, its chunks in
// offset order, trimmed on append to the chunks that hold the newest `retainBytes` bytes, and
// dropped after `idleTtlSec` without appends, when `expire`'s TTL is up, or at once by `remove`.
// Lives and dies with the runner.
import { type ChunkMeta, UNKNOWN_META } from "../../shared/protocol.js";
import type { LogItem, OutputLog, OutputLogOptions } from "./output-log.js";

interface Chunk {
  offset: number;
  data: Buffer;
  meta: ChunkMeta;
}

interface Session {
  /** Live chunks are chunks[first..]; trimmed ones are sliced off once they pile up. */
  chunks: Chunk[];
  first: number;
  /** Where the last appended chunk ended. */
  end: number;
  /** When to drop the log (ms since epoch): pushed forward by appends until `expire`. */
  deadline: number;
  ended: boolean;
  timer: NodeJS.Timeout;
}

export const DEFAULT_READ_BYTES = 1024 * 1024;

export class MemoryLog implements OutputLog {
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly options: OutputLogOptions) {}

  async append(key: string, offset: number, data: Buffer, meta: ChunkMeta = UNKNOWN_META): Promise<void> {
    if (data.byteLength === 0) return;
    let session = this.sessions.get(key);
    if (session && offset < session.end) {
      // A retry (output-log.ts): the same chunk again, or a chunk the log skipped.
      const at = session.chunks.findIndex((chunk, i) => i >= (session as Session).first && chunk.offset === offset);
      if (at >= 0 && session.chunks[at].data.byteLength === data.byteLength) return;
      const cut = session.chunks.findIndex((chunk, i) => i >= (session as Session).first && chunk.offset >= offset);
      if (cut < 0 || offset < session.chunks[session.first]?.offset) {
        throw new Error(`append at ${offset} is before the end of the log (${session.end})`);
      }
      session.chunks.length = cut;
      session.end = offset;
    }
    const deadline = Date.now() + this.options.idleTtlSec * 1000;
    if (!session) {
      session = { chunks: [], first: 0, end: 0, deadline, ended: false, timer: this.arm(key, deadline) };
      this.sessions.set(key, session);
    } else if (!session.ended) {
      // The timer is not touched here: when it fires it re-arms itself for the rest.
      session.deadline = deadline;
    }
    // A copy: the caller may reuse its buffer.
    session.chunks.push({ offset, data: Buffer.from(data), meta });
    session.end = offset + data.byteLength;
    this.trim(session);
  }

  async read(key: string, from: number, to: number, maxBytes = DEFAULT_READ_BYTES): Promise<LogItem[]> {
    const collector = new ReadCollector(from, to, maxBytes);
    const session = this.sessions.get(key);
    if (session) {
      const { chunks } = session;
      // The chunk holding `from` is the last one starting at or before it (if it reaches that far).
      let i = Math.max(session.first, lastAtOrBefore(chunks, session.first, from));
      while (i < chunks.length && collector.add(chunks[i].offset, chunks[i].data, chunks[i].meta)) i++;
    }
    return collector.finish();
  }

  async retainedFrom(key: string): Promise<number | null> {
    const session = this.sessions.get(key);
    return session && session.first < session.chunks.length ? session.chunks[session.first].offset : null;
  }

  async expire(key: string, ttlSec: number): Promise<void> {
    const session = this.sessions.get(key);
    if (!session) return;
    clearTimeout(session.timer);
    session.ended = true;
    session.deadline = Date.now() + ttlSec * 1000;
    session.timer = this.arm(key, session.deadline);
  }

  /** Drops the session's chunks at once: nothing else holds them (reads hold slices only while they run). */
  async remove(key: string): Promise<void> {
    const session = this.sessions.get(key);
    if (!session) return;
    clearTimeout(session.timer);
    this.sessions.delete(key);
  }

  /**
   * What the log keeps reachable now: sessions, chunks and their bytes, trimmed ones included
   * (there should be none). For the runner's memory report and tests.
   */
  held(): { sessions: number; chunks: number; bytes: number } {
    let chunks = 0;
    let bytes = 0;
    for (const session of this.sessions.values()) {
      for (const chunk of session.chunks) {
        if (chunk.data.byteLength === 0) continue;
        chunks++;
        bytes += chunk.data.byteLength;
      }
    }
    return { sessions: this.sessions.size, chunks, bytes };
  }

  async close(): Promise<void> {
    for (const session of this.sessions.values()) clearTimeout(session.timer);
    this.sessions.clear();
  }

  /**
   * Drops whole chunks from the front while every byte of them is older than the newest
   * `retainBytes`: the chunk that holds byte `end - retainBytes` stays, so at least
   * `retainBytes` (or everything, if less was written) remain readable.
   */
  private trim(session: Session): void {
    const { chunks } = session;
    const minOffset = session.end - this.options.retainBytes;
    while (session.first < chunks.length && chunkEnd(chunks[session.first]) <= minOffset) {
      // Let the trimmed chunk's bytes go now, not when the dead prefix is sliced off (with
      // 256 KiB chunks that prefix could otherwise pin up to 1024 of them).
      chunks[session.first] = TRIMMED;
      session.first++;
    }
    // Slice the dead prefix off once it is large, so trimming stays O(1) amortized.
    if (session.first > 1024 && session.first * 2 > chunks.length) {
      session.chunks = chunks.slice(session.first);
      session.first = 0;
    }
  }

  /** A timer for the session's deadline; appends move the deadline, so it re-arms until it is due. */
  private arm(key: string, deadline: number): NodeJS.Timeout {
    return setTimeout(
      () => {
        const session = this.sessions.get(key);
        if (!session) return;
        const left = session.deadline - Date.now();
        if (left > 0) session.timer = this.arm(key, session.deadline);
        else this.sessions.delete(key);
      },
      // setTimeout takes at most 2^31-1 ms; a longer deadline just re-arms when that fires.
      Math.min(Math.max(0, deadline - Date.now()), 2 ** 31 - 1),
    ).unref();
  }
}

/** Stands in for a trimmed chunk below `first`: nothing reads there, and its buffer is free. */
const TRIMMED: Chunk = { offset: -1, data: Buffer.alloc(0), meta: UNKNOWN_META };

function chunkEnd(chunk: Chunk): number {
  return chunk.offset + chunk.data.byteLength;
}

/** Index of the last chunk in chunks[lo..] starting at or before `offset`, or lo - 1 if none. */
function lastAtOrBefore(chunks: readonly Chunk[], lo: number, offset: number): number {
  let hi = chunks.length - 1;
  let found = lo - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (chunks[mid].offset <= offset) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}

/**
 * Turns stored chunks, fed in offset order, into what `read` returns: chunks sliced to
 * [from, to), gaps for holes, and a stop before the chunk that would take the data past
 * `maxBytes` (at least one chunk is always taken, so callers reading on make progress).
 * Shared by both implementations.
 */
export class ReadCollector {
  private readonly items: LogItem[] = [];
  /** Everything before `pos` is covered by items. */
  private pos: number;
  private bytes = 0;
  private full = false;

  constructor(
    from: number,
    private readonly to: number,
    private readonly maxBytes: number,
  ) {
    this.pos = from;
  }

  /** Takes the next stored chunk; false once no more are wanted. */
  add(offset: number, data: Buffer, meta: ChunkMeta = UNKNOWN_META): boolean {
    if (!this.wantsMore()) return false;
    const start = Math.max(offset, this.pos);
    const end = Math.min(offset + data.byteLength, this.to);
    if (end <= start) return start < this.to; // ends before the range: skip it
    if (this.bytes > 0 && this.bytes + (end - start) > this.maxBytes) {
      this.full = true;
      return false;
    }
    if (start > this.pos) this.items.push({ type: "gap", from: this.pos, to: start });
    this.items.push({ type: "chunk", offset: start, data: data.subarray(start - offset, end - offset), meta });
    this.pos = end;
    this.bytes += end - start;
    if (this.bytes >= this.maxBytes) this.full = true;
    return this.wantsMore();
  }

  wantsMore(): boolean {
    return !this.full && this.pos < this.to;
  }

  /** Bytes still wanted, for sizing fetches. */
  remaining(): number {
    return Math.min(this.to - this.pos, this.maxBytes - this.bytes);
  }

  /** The items; a trailing gap covers the rest of the range unless maxBytes cut it short. */
  finish(): LogItem[] {
    if (!this.full && this.pos < this.to) this.items.push({ type: "gap", from: this.pos, to: this.to });
    return this.items;
  }
}
