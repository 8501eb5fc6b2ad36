// The tenant's open `GET /v1/events` streams (DESIGN §9): each gets the events after the id
// it resumes from (with a `gap` first when some were already dropped), then every new event
// as it is recorded, and a keep-alive comment every SSE_KEEPALIVE_MS. A stream that falls
// too far behind is ended; its client resumes with Last-Event-ID and misses nothing kept.

/** Unread bytes one stream may hold before it is ended (the client resumes by id). */
const MAX_UNREAD_BYTES = 1 << 20;

const encoder = new TextEncoder();

/** One stored event, as the stream sends it. */
export interface StoredEvent {
  seq: number;
  type: string;
  data: string;
}

class EventStream {
  readonly body: ReadableStream<Uint8Array>;
  closed = false;
  private controller!: ReadableStreamDefaultController<Uint8Array>;

  constructor(onCancel: () => void) {
    this.body = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        cancel: () => {
          this.closed = true;
          onCancel();
        },
      },
      { highWaterMark: MAX_UNREAD_BYTES, size: (chunk) => chunk.byteLength },
    );
  }

  /** Writes `text`; false once the stream is closed or holds too much unread. */
  write(text: string): boolean {
    if (this.closed) return false;
    try {
      this.controller.enqueue(encoder.encode(text));
    } catch {
      this.closed = true;
      return false;
    }
    if ((this.controller.desiredSize ?? 0) < 0) {
      this.close();
      return false;
    }
    return true;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.controller.close();
    } catch {
      // cancelled meanwhile
    }
  }
}

export class TenantEvents {
  private readonly streams = new Set<EventStream>();
  private keepAliveTimer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly keepAliveMs: () => number) {}

  get size(): number {
    return this.streams.size;
  }

  /**
   * A new stream: `gap` (ids `from` ≤ id < `to` are no longer kept) if there is one, the
   * `backlog`, then live events.
   */
  open(gap: { from: number; to: number } | null, backlog: StoredEvent[]): Response {
    const stream: EventStream = new EventStream(() => this.drop(stream));
    this.streams.add(stream);
    this.keepAlive();
    // Sent at once, so a client knows the stream is open before any event comes.
    stream.write(": events\n\n");
    if (gap) stream.write(`event: gap\ndata: ${JSON.stringify(gap)}\n\n`);
    for (const event of backlog) stream.write(format(event));
    return new Response(stream.body, {
      headers: { "content-type": "text/event-stream", "cache-control": "no-store", "x-accel-buffering": "no" },
    });
  }

  publish(event: StoredEvent): void {
    const text = format(event);
    for (const stream of this.streams) if (!stream.write(text)) this.drop(stream);
  }

  private drop(stream: EventStream): void {
    stream.close();
    this.streams.delete(stream);
    this.keepAlive();
  }

  private keepAlive(): void {
    if (this.streams.size === 0) {
      if (this.keepAliveTimer) clearInterval(this.keepAliveTimer);
      this.keepAliveTimer = undefined;
      return;
    }
    this.keepAliveTimer ??= setInterval(() => {
      for (const stream of this.streams) if (!stream.write(": keep-alive\n\n")) this.drop(stream);
    }, this.keepAliveMs());
  }
}

function format(event: StoredEvent): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${event.data}\n\n`;
}
