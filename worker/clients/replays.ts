// Replay cursors (docs/protocol.md §5, "Offsets, replay and the switch to live"): a subscriber
// that joins at an offset replays the log from there, a piece at a time as it takes them, then
// follows live output, with no gap and no overlap at the switch-over. Owns where each replay
// stands, the replay cache, and the log reads replays have in flight (MAX_REPLAY_READS per
// session; the rest wait their turn). The hub (client-hub.ts) wires it with a ReplayPort and
// keeps the subscribers themselves.
import { ApiError, type ErrorCode } from "../../shared/errors.js";
import type { OutputStream } from "../../shared/protocol.js";
import type { LogReads } from "../link/log-reads.js";
import { ReplayCache } from "./replay-cache.js";
import { SocketSubscriber, type Subscriber } from "./subscribers.js";

/** Output requested from the log per read: bounds what one read puts through the object. */
export const READ_PIECE_BYTES = 4 << 20;
/**
 * How far past the stored offset a client may resume: the output a restarted edge may not have
 * stored (it stores its offset with each ack to the runner), with room to spare.
 */
const RESUME_AHEAD_BYTES = 4 << 20;
/** Log reads for replays in flight at once per session. */
const MAX_REPLAY_READS = 4;

/** Where a replay starts: an offset, everything retained, or live output only. */
export type ReplayFrom = number | "retained" | "live";

export class Replays {
  /** Each replaying subscriber's current replay; one given up is no longer here. */
  private readonly replays = new WeakMap<Subscriber, Replay>();
  private readonly cache = new ReplayCache();
  /** The log read each replaying subscriber waits on. */
  private readonly replayReads = new Map<Subscriber, number>();
  /** Replays waiting for a read slot. */
  private replayQueue: (() => void)[] = [];

  constructor(
    private readonly reads: LogReads,
    private readonly port: ReplayPort,
  ) {}

  /** Starts the subscriber's replay from `from`; one already caught up goes live at once. */
  start(sub: Subscriber, from: ReplayFrom): void {
    const end = this.port.offset();
    const retainedFrom = this.port.retainedFrom();
    sub.cursor = replayStart(from, end, retainedFrom);
    const replay: Replay = { quiet: from === "retained", announced: false, gap: undefined };
    this.replays.set(sub, replay);
    // History known to be trimmed is skipped without reading it: one `gap` says so.
    if (sub.cursor < retainedFrom) {
      replay.gap = { from: sub.cursor, to: retainedFrom };
      sub.cursor = retainedFrom;
    }
    if (sub.cursor >= end) {
      this.flushGap(sub, replay);
      return this.goLive(sub);
    }
    this.continueReplay(sub, replay);
  }

  /** A client restored from hibernation mid-replay: it goes on from its cursor (announced already). */
  resume(sub: Subscriber): void {
    const replay: Replay = { quiet: false, announced: true, gap: undefined };
    this.replays.set(sub, replay);
    this.continueReplay(sub, replay);
  }

  /** The subscriber has gone: its replay's read stops, at the runner too. */
  cancel(sub: Subscriber): void {
    const id = this.replayReads.get(sub);
    if (id === undefined) return;
    this.replayReads.delete(sub);
    this.reads.cancel(id);
    this.startQueuedReplays();
  }

  /** The subscriber skips ahead (to the screen): its replay stops and goes no further. */
  giveUp(sub: Subscriber): void {
    this.cancel(sub);
    this.replays.delete(sub);
  }

  /** What the cache holds goes (the log may have lost it, or the session was purged). */
  clearCache(): void {
    this.cache.clear();
  }

  /**
   * Reads the next piece up to the current offset; once caught up, the subscriber goes live.
   * `replay` is announced before the first replayed byte, after any gap in front of it;
   * adjacent gaps (one per piece read) reach the client as one.
   */
  private continueReplay(sub: Subscriber, replay: Replay): void {
    // A replay given up (its client skipped ahead to the screen) goes no further.
    if (sub.closed || this.replays.get(sub) !== replay) return;
    const end = this.port.offset();
    if (sub.cursor >= end) {
      this.flushGap(sub, replay);
      return this.goLive(sub);
    }
    const deliver = (offset: number, data: Uint8Array, stream: OutputStream) => {
      if (this.replays.get(sub) !== replay || offset + data.byteLength <= sub.cursor) return;
      if (offset < sub.cursor) {
        data = data.subarray(sub.cursor - offset);
        offset = sub.cursor;
      }
      this.flushGap(sub, replay);
      if (!replay.announced) {
        replay.announced = true;
        sub.control({ type: "replay", from: offset, to: this.port.offset() });
      }
      sub.deliver(offset, data, stream);
      // Where a replay stands survives hibernation, so a restored client never gets bytes twice.
      if (sub instanceof SocketSubscriber) sub.persist();
      this.port.checkLag(sub);
    };
    // What was read lately is in the object already: no read for it.
    const cached = this.cache.take(sub.cursor, READ_PIECE_BYTES);
    if (cached.length > 0) {
      for (const chunk of cached) if (!sub.closed) deliver(chunk.offset, chunk.data, chunk.stream);
      if (!sub.closed) sub.whenLagAtMost(READ_PIECE_BYTES / 2, () => this.continueReplay(sub, replay));
      return;
    }
    // A few log reads at a time per session; the rest wait, and most then start from the cache.
    if (this.replayReads.size >= MAX_REPLAY_READS) {
      this.replayQueue.push(() => this.continueReplay(sub, replay));
      return;
    }
    const id = this.reads.read(sub.cursor, Math.min(end, sub.cursor + READ_PIECE_BYTES), {
      onChunk: (offset, data, meta) => {
        this.cache.note(offset, data, meta.stream);
        if (sub.closed) return this.cancel(sub);
        deliver(offset, data, meta.stream);
      },
      onGap: (gapFrom, gapTo) => {
        this.cache.forget(gapFrom, gapTo);
        if (sub.closed) return;
        if (!replay.announced) this.port.noteLeadingGap(gapFrom, gapTo);
        if (replay.gap && replay.gap.to === gapFrom) replay.gap.to = gapTo;
        else {
          this.flushGap(sub, replay);
          replay.gap = { from: gapFrom, to: gapTo };
        }
        sub.cursor = Math.max(sub.cursor, gapTo);
      },
      onEnd: (_to, error) => {
        this.replayReads.delete(sub);
        this.startQueuedReplays();
        if (sub.closed) return;
        if (error) return this.port.failed(sub, error);
        // The next piece waits until the client has taken most of this one.
        sub.whenLagAtMost(READ_PIECE_BYTES / 2, () => this.continueReplay(sub, replay));
      },
    });
    this.replayReads.set(sub, id);
  }

  private startQueuedReplays(): void {
    while (this.replayReads.size < MAX_REPLAY_READS) {
      const next = this.replayQueue.shift();
      if (!next) return;
      next();
    }
  }

  /** Tells the subscriber about the gap the replay has skipped so far, if any. */
  private flushGap(sub: Subscriber, replay: Replay): void {
    const gap = replay.gap;
    if (!gap) return;
    replay.gap = undefined;
    // With no `from` the client asked for whatever is retained: a leading gap is no news.
    if (replay.quiet && !replay.announced) return;
    sub.control({ type: "gap", from: gap.from, to: gap.to });
  }

  private goLive(sub: Subscriber): void {
    sub.live = true;
    sub.cursor = Math.max(sub.cursor, this.port.offset());
    if (sub instanceof SocketSubscriber) sub.persist();
    sub.control({ type: "live", offset: sub.cursor });
    this.port.wentLive(sub);
  }
}

/**
 * Whether a start `from` is refused (docs/protocol.md §5, "An offset past the end"): an offset
 * past `end`, the edge's offset, that no client can hold. While the edge cannot be sure its
 * offset is complete (`exact` false: it restarted and its host link has not resent what it lacks
 * yet), up to RESUME_AHEAD_BYTES past it may be such a client, which waits there (replayStart);
 * once it is sure (the session has ended, or its host link has resent what the edge lacked),
 * nothing past `end` is. The same rule for WebSocket clients, SSE streams and `GET .../output`.
 */
export function offsetRefusal(from: number | string | undefined, end: number, exact: boolean): ApiError | undefined {
  if (typeof from !== "number" || from <= end) return undefined;
  if (!exact && from - end <= RESUME_AHEAD_BYTES) return undefined;
  return new ApiError("INVALID_OFFSET", pastTheEnd(from, end));
}

/** The message of an INVALID_OFFSET: the offset asked for and the session's own. */
export function pastTheEnd(from: number, end: number): string {
  return `offset ${from} is past the session's output (its offset is ${end})`;
}

/**
 * Where a replay from `from` starts, `end` being the edge's offset: before any gap it skips (a
 * `from` older than what is retained starts there, and is told the gap).
 */
export function replayStart(from: ReplayFrom, end: number, retainedFrom: number): number {
  if (from === "live") return end;
  if (from === "retained") return retainedFrom;
  // A `from` a little past the edge's offset is a client that saw output the edge had not yet
  // stored when it restarted: it waits there, and the runner sends those bytes again. Further
  // past, clients and streams are refused (offsetRefusal); an `expect` starts at the offset.
  return from > end && from - end <= RESUME_AHEAD_BYTES ? from : Math.min(from, end);
}

// ---- Shared types ----

/** What replays need from the hub; callbacks, so they never hold the hub or the session. */
export interface ReplayPort {
  /** Offset of the next output byte (everything below it has been fanned out). */
  offset(): number;
  /** Oldest offset the log is known to hold. */
  retainedFrom(): number;
  /** A read found nothing in [from, to) before any byte of a replay. */
  noteLeadingGap(from: number, to: number): void;
  /** Replayed output went to the subscriber: it may now be too far behind. */
  checkLag(sub: Subscriber): void;
  /** The subscriber has caught up and been told it is live. */
  wentLive(sub: Subscriber): void;
  /** A read of its replay failed: the subscriber is told why and let go. */
  failed(sub: Subscriber, error: { code: ErrorCode; message: string }): void;
}

/** Where a subscriber's replay stands: announced yet, and a gap not yet told. */
interface Replay {
  /** The client asked for everything retained: a leading gap is not reported. */
  quiet: boolean;
  announced: boolean;
  gap: { from: number; to: number } | undefined;
}
