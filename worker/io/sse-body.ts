// A Server-Sent Events response body made in a Durable Object: text written to it is queued
// until the client reads it, and what is queued unread is the client's lag (the edge cannot
// see a socket's buffer, but it can see a stream's queue). Used by a session's output stream
// (clients/subscribers.ts) and a tenant's events (tenant/tenant-events.ts).

const encoder = new TextEncoder();

export class SseBody {
  readonly stream: ReadableStream<Uint8Array>;
  closed = false;
  private controller!: ReadableStreamDefaultController<Uint8Array>;

  /** `pulled` runs when the client has read some of the queue; `cancelled` when it went away. */
  constructor(
    private readonly maxUnread: number,
    hooks: { pulled?(): void; cancelled(): void },
  ) {
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        pull: () => hooks.pulled?.(),
        cancel: () => {
          this.closed = true;
          hooks.cancelled();
        },
      },
      { highWaterMark: maxUnread, size: (chunk) => chunk.byteLength },
    );
  }

  /** The response that carries the stream. */
  response(): Response {
    return new Response(this.stream, {
      headers: { "content-type": "text/event-stream", "cache-control": "no-store", "x-accel-buffering": "no" },
    });
  }

  /** Bytes written that the client has not read yet. */
  unread(): number {
    return this.maxUnread - (this.controller.desiredSize ?? 0);
  }

  /** Queues `text`; false once the stream is closed (nothing is queued then). */
  write(text: string): boolean {
    if (this.closed) return false;
    try {
      this.controller.enqueue(encoder.encode(text));
      return true;
    } catch {
      this.closed = true;
      return false;
    }
  }

  /** A comment line (a keep-alive): clients ignore it, proxies see traffic. */
  comment(text: string): boolean {
    return this.write(`: ${text}\n\n`);
  }

  /** Ends the stream; what is queued still reaches the client. */
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

/**
 * A keep-alive for a set of SSE streams: `tick` every `ms` while the set is not empty, so proxies
 * never cut an idle stream (docs/protocol.md §5b: at least every 15 s). The timer runs only
 * while a stream is open (open streams keep their object awake anyway).
 */
export class KeepAlive {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly ms: () => number,
    private readonly tick: () => void,
  ) {}

  /** The set now holds `open` streams. */
  update(open: number): void {
    if (open === 0) {
      if (this.timer) clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    this.timer ??= setInterval(this.tick, this.ms());
  }
}
