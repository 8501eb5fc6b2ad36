// The in-process output log, used when no Redis is configured: per session, its chunks in
// offset order, trimmed on append to the chunks that hold the newest `retainBytes` bytes, and
// dropped after `idleTtlSec` without appends, when `expire`'s TTL is up, or at once by `remove`.
// Each tenant's retained bytes are counted as chunks come and go, and past its bound the
// tenant's oldest chunks go first (tenant-bound.ts; in append order across its sessions).
// Lives and dies with the runner.
import { type ChunkMeta, UNKNOWN_META } from "../../shared/protocol.js";
import type { LogItem, OutputLog, OutputLogOptions } from "./output-log.js";
import { type FrontTrim, TenantBounds, type TenantCandidate, type TenantPick, type TenantStore, TenantTrims, tenantOf } from "./tenant-bound.js";

interface Chunk {
  offset: number;
  data: Buffer;
  meta: ChunkMeta;
  /** Its place in the order of every chunk appended to this log: the tenant bound trims the lowest first. */
  seq: number;
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
  tenant: string;
  /** Bytes of the live chunks, counted in the tenant's total. */
  bytes: number;
  /** The first offset the session's edge has not acknowledged (OutputLog.hold); null: none. */
  floor: number | null;
}

export const DEFAULT_READ_BYTES = 1024 * 1024;

export class MemoryLog implements OutputLog {
  private readonly sessions = new Map<string, Session>();
  /** Per tenant: its retained bytes and the sessions holding them. */
  private readonly tenants = new Map<string, { total: number; keys: Set<string> }>();
  /** Floors given before a session's first append (its resume comes before its output). */
  private readonly floors = new Map<string, number>();
  private seq = 0;
  private readonly trims: TenantTrims;
  private readonly bounds: TenantBounds;

  constructor(private readonly options: OutputLogOptions) {
    this.bounds = new TenantBounds(options.tenantBytes);
    this.trims = new TenantTrims(this.tenantStore(), this.bounds);
  }

  boundTenant(tenant: string, bytes: number | undefined): void {
    this.bounds.set(tenant, bytes);
  }

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
      for (const chunk of session.chunks.splice(cut)) this.count(session, -chunk.data.byteLength);
      session.end = offset;
    }
    const deadline = Date.now() + this.options.idleTtlSec * 1000;
    if (!session) {
      session = this.open(key, deadline);
    } else if (!session.ended) {
      // The timer is not touched here: when it fires it re-arms itself for the rest.
      session.deadline = deadline;
    }
    // A copy: the caller may reuse its buffer.
    session.chunks.push({ offset, data: Buffer.from(data), meta, seq: ++this.seq });
    session.end = offset + data.byteLength;
    this.count(session, data.byteLength);
    this.trim(session);
    this.trimIfOver(session.tenant);
  }

  hold(key: string, floor: number | null): void {
    const session = this.sessions.get(key);
    if (floor === null || session) this.floors.delete(key);
    else this.floors.set(key, floor);
    if (!session) return;
    session.floor = floor;
    // A tenant held over its bound by this floor is trimmed now, not at its next append.
    this.trimIfOver(session.tenant);
  }

  private trimIfOver(tenant: string): void {
    const counted = this.tenants.get(tenant);
    if (counted && counted.total > this.bounds.of(tenant)) this.trims.request(tenant);
  }

  onTrimmed(listener: (key: string, retainedFrom: number) => void): void {
    this.trims.onTrimmed(listener);
  }

  async tenantBytes(tenant: string): Promise<number> {
    return this.tenants.get(tenant)?.total ?? 0;
  }

  settled(): Promise<void> {
    return this.trims.idle();
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
    this.floors.delete(key);
    const session = this.sessions.get(key);
    if (!session) return;
    clearTimeout(session.timer);
    this.drop(key, session);
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
    this.tenants.clear();
    this.floors.clear();
  }

  private open(key: string, deadline: number): Session {
    const tenant = tenantOf(key);
    const floor = this.floors.get(key) ?? null;
    this.floors.delete(key);
    const session: Session = { chunks: [], first: 0, end: 0, deadline, ended: false, timer: this.arm(key, deadline), tenant, bytes: 0, floor };
    this.sessions.set(key, session);
    let counted = this.tenants.get(tenant);
    if (!counted) {
      counted = { total: 0, keys: new Set() };
      this.tenants.set(tenant, counted);
    }
    counted.keys.add(key);
    return session;
  }

  /** The session's log goes, and its bytes leave its tenant's count. */
  private drop(key: string, session: Session): void {
    this.sessions.delete(key);
    this.count(session, -session.bytes);
    const counted = this.tenants.get(session.tenant);
    counted?.keys.delete(key);
    if (counted?.keys.size === 0) this.tenants.delete(session.tenant);
  }

  private count(session: Session, bytes: number): void {
    session.bytes += bytes;
    const counted = this.tenants.get(session.tenant);
    if (counted) counted.total += bytes;
  }

  /**
   * Drops whole chunks from the front while every byte of them is older than the newest
   * `retainBytes`: the chunk that holds byte `end - retainBytes` stays, so at least
   * `retainBytes` (or everything, if less was written) remain readable.
   */
  private trim(session: Session): void {
    const minOffset = session.end - this.options.retainBytes;
    this.dropFront(session, (chunk) => chunkEnd(chunk) <= minOffset);
  }

  /** Drops whole chunks from the front of the session's log while `goes` says so; returns the bytes dropped. */
  private dropFront(session: Session, goes: (chunk: Chunk, dropped: number) => boolean): number {
    const { chunks } = session;
    let dropped = 0;
    while (session.first < chunks.length && goes(chunks[session.first], dropped)) {
      dropped += chunks[session.first].data.byteLength;
      // Let the trimmed chunk's bytes go now, not when the dead prefix is sliced off (with
      // 256 KiB chunks that prefix could otherwise pin up to 1024 of them).
      chunks[session.first] = TRIMMED;
      session.first++;
    }
    this.count(session, -dropped);
    // Slice the dead prefix off once it is large, so trimming stays O(1) amortized.
    if (session.first > 1024 && session.first * 2 > chunks.length) {
      session.chunks = chunks.slice(session.first);
      session.first = 0;
    }
    return dropped;
  }

  /** The tenant bound's view of this log (tenant-bound.ts): counts, oldest chunks, floors, front trims. */
  private tenantStore(): TenantStore {
    const candidate = (key: string): TenantCandidate | undefined => {
      const session = this.sessions.get(key);
      const oldest = session?.chunks[session.first];
      return session && oldest ? { key, oldest: oldest.seq, floor: session.floor } : undefined;
    };
    return {
      pick: async (tenant: string, bound: number, count: number): Promise<TenantPick> => {
        const counted = this.tenants.get(tenant);
        if (!counted || counted.total <= bound) return { total: counted?.total ?? 0, oldest: [] };
        const all = [...counted.keys].flatMap((key) => candidate(key) ?? []);
        return { total: counted.total, oldest: all.sort((a, b) => a.oldest - b.oldest).slice(0, count) };
      },
      trimFront: async ({ key }: TenantCandidate, excess: number, notAfter: number): Promise<FrontTrim> => {
        const session = this.sessions.get(key);
        if (!session) return { gone: true };
        const floor = session.floor ?? Number.POSITIVE_INFINITY;
        const removed = this.dropFront(
          session,
          (chunk, dropped) => dropped < excess && chunkEnd(chunk) <= floor && chunk.seq <= notAfter,
        );
        const first = session.chunks[session.first];
        return { gone: false, removed, oldest: first?.seq ?? null, retainedFrom: first?.offset ?? session.end };
      },
      // Counted as the chunks went (dropFront, drop): nothing is left to settle.
      settle: async () => {},
    };
  }

  /** A timer for the session's deadline; appends move the deadline, so it re-arms until it is due. */
  private arm(key: string, deadline: number): NodeJS.Timeout {
    return setTimeout(
      () => {
        const session = this.sessions.get(key);
        if (!session) return;
        const left = session.deadline - Date.now();
        if (left > 0) session.timer = this.arm(key, session.deadline);
        else this.drop(key, session);
      },
      // setTimeout takes at most 2^31-1 ms; a longer deadline just re-arms when that fires.
      Math.min(Math.max(0, deadline - Date.now()), 2 ** 31 - 1),
    ).unref();
  }
}

/** Stands in for a trimmed chunk below `first`: nothing reads there, and its buffer is free. */
const TRIMMED: Chunk = { offset: -1, data: Buffer.alloc(0), meta: UNKNOWN_META, seq: -1 };

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
