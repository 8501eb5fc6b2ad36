// The tenant's open `GET /v1/events` streams (docs/protocol.md §3, "Events"): each gets the
// events after the id it resumes from (with a `gap` first when some were already dropped), then
// every new event as it is recorded, and a keep-alive comment every SSE_KEEPALIVE_MS. A stream
// that falls too far behind is ended; its client resumes with Last-Event-ID and misses nothing
// kept.
import { KeepAlive, SseBody } from "../io/sse-body.js";

/** Unread bytes one stream may hold before it is ended (the client resumes by id). */
const MAX_UNREAD_BYTES = 1 << 20;

/** One stored event, as the stream sends it. */
export interface StoredEvent {
  seq: number;
  type: string;
  data: string;
}

export class TenantEvents {
  private readonly streams = new Set<SseBody>();
  private readonly keepAlive: KeepAlive;

  constructor(keepAliveMs: () => number) {
    this.keepAlive = new KeepAlive(keepAliveMs, () => {
      for (const stream of this.streams) this.send(stream, ": keep-alive\n\n");
    });
  }

  get size(): number {
    return this.streams.size;
  }

  /**
   * A new stream: `gap` (ids `from` ≤ id < `to` are no longer kept) if there is one, the
   * `backlog`, then live events.
   */
  open(gap: { from: number; to: number } | null, backlog: StoredEvent[]): Response {
    const stream: SseBody = new SseBody(MAX_UNREAD_BYTES, { cancelled: () => this.drop(stream) });
    this.streams.add(stream);
    this.keepAlive.update(this.streams.size);
    // Sent at once, so a client knows the stream is open before any event comes.
    stream.comment("events");
    if (gap) stream.write(`event: gap\ndata: ${JSON.stringify(gap)}\n\n`);
    for (const event of backlog) stream.write(format(event));
    return stream.response();
  }

  /** To every open stream; one that holds too much unread is ended (its client resumes by id). */
  publish(event: StoredEvent): void {
    const text = format(event);
    for (const stream of this.streams) this.send(stream, text);
  }

  private send(stream: SseBody, text: string): void {
    if (!stream.write(text) || stream.unread() > MAX_UNREAD_BYTES) this.drop(stream);
  }

  private drop(stream: SseBody): void {
    stream.close();
    this.streams.delete(stream);
    this.keepAlive.update(this.streams.size);
  }

}

function format(event: StoredEvent): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${event.data}\n\n`;
}
