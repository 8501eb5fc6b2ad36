// The tenant's open `GET /v1/events` streams (docs/protocol.md §3, "Events"): each gets the
// events after the id it resumes from, read from storage as the client takes them (with a `gap`
// first where some are no longer kept), then every new event as it is recorded, and a keep-alive
// comment every SSE_KEEPALIVE_MS. The streams are io/sse-body.ts's, as a session's are: a stream
// whose client lets more than MAX_UNREAD_BYTES wait is cut with `event: cut` naming the last id
// it took, and its client resumes from there and misses nothing kept.
import { KeepAlive, SseBody, type SseEvent, revokedEvent, textEvent } from "../io/sse-body.js";

/** Unread bytes one stream may hold before it is cut (the client resumes by id). */
const MAX_UNREAD_BYTES = 1 << 20;
/** A stream catching up reads its next stored event while it holds at most this much unread. */
const CATCH_UP_BELOW = MAX_UNREAD_BYTES / 2;

/** One stored event, as the stream sends it. */
export interface StoredEvent {
  seq: number;
  type: string;
  data: string;
}

/** The tenant's stored events (its object's SQL). */
export interface EventStore {
  /** The oldest kept event after `seq`, if any. */
  next(seq: number): StoredEvent | undefined;
  /** The newest event's seq; 0 before the first. */
  latest(): number;
}

/** An open stream and the id of the last event queued on it. */
interface Follower {
  body: SseBody;
  after: number;
  /** Still reading stored events: live ones reach it from storage, in order, when it gets there. */
  catchingUp: boolean;
  /** The API key it was opened with (closed when that key is revoked). */
  keyId: string | null;
}

export class TenantEvents {
  private readonly streams = new Set<Follower>();
  private readonly keepAlive: KeepAlive;

  constructor(
    keepAliveMs: () => number,
    private readonly store: EventStore,
  ) {
    this.keepAlive = new KeepAlive(keepAliveMs, () => {
      for (const follower of this.streams) follower.body.comment("keep-alive");
    });
  }

  get size(): number {
    return this.streams.size;
  }

  /** A new stream: every kept event after `after` then live ones, or live ones only (null). */
  open(after: number | null, keyId: string | null): Response {
    const follower: Follower = {
      after: after ?? this.store.latest(),
      catchingUp: after !== null,
      keyId,
      body: new SseBody(MAX_UNREAD_BYTES, {
        pulled: () => this.catchUp(follower),
        cut: () => this.drop(follower),
        cancelled: () => this.drop(follower),
      }),
    };
    // A cut before the client took any event names where it started.
    follower.body.startAt(String(follower.after));
    this.streams.add(follower);
    this.keepAlive.update(this.streams.size);
    // Sent at once, so a client knows the stream is open before any event comes.
    follower.body.comment("events");
    this.catchUp(follower);
    return follower.body.response();
  }

  /** To every stream that has caught up; one that holds too much unread is cut (its client resumes by id). */
  publish(event: StoredEvent): void {
    // One event for every stream: its bytes are made once.
    const sse = eventOf(event);
    for (const follower of this.streams) {
      if (follower.catchingUp) continue;
      if (follower.body.push(sse)) follower.after = event.seq;
    }
  }

  /**
   * Stored events after the follower's id, one at a time while its client keeps up, so a stream
   * that resumes from far back holds no more than a live one; a jump in the ids is a `gap` (ids
   * only grow, one per event: the missing ones were trimmed). Once none is left it is live.
   */
  private catchUp(follower: Follower): void {
    while (follower.catchingUp && follower.body.open && follower.body.lag() <= CATCH_UP_BELOW) {
      const next = this.store.next(follower.after);
      if (!next) {
        follower.catchingUp = false;
        return;
      }
      if (next.seq > follower.after + 1) {
        follower.body.push(textEvent(`event: gap\ndata: ${JSON.stringify({ from: follower.after + 1, to: next.seq })}\n\n`));
      }
      if (follower.body.push(eventOf(next))) follower.after = next.seq;
    }
  }

  /**
   * The key was revoked: each stream opened with it (every stream when `keyId` is null) gets
   * `event: revoked` with the close code and reason a socket would get, and ends. Answers how many.
   */
  closeKey(keyId: string | null, reason: string): number {
    let closed = 0;
    for (const follower of [...this.streams]) {
      if (keyId !== null && follower.keyId !== keyId) continue;
      follower.body.finish(revokedEvent(reason));
      this.drop(follower);
      closed++;
    }
    return closed;
  }

  private drop(follower: Follower): void {
    follower.body.end();
    this.streams.delete(follower);
    this.keepAlive.update(this.streams.size);
  }
}

/** A stored event as the streams send it; its lag is its text's length. */
function eventOf(event: StoredEvent): SseEvent {
  return textEvent(`id: ${event.seq}\nevent: ${event.type}\ndata: ${event.data}\n\n`, String(event.seq));
}
