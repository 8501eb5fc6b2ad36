// Server-Sent Events readers for the end-to-end tests: any event stream (`/v1/events`, a
// session's `/stream`), parsed by the SDK's parser, with waits driven by what arrives.
import { createParser } from "eventsource-parser";

export interface EventStreamOptions {
  lastEventId?: string;
  /** Reads nothing of the body until `resume()`. */
  paused?: boolean;
}

export interface SseMessage {
  event: string;
  id: string | undefined;
  data: string;
}

/**
 * A Server-Sent Events reader for any path (`/v1/events`, a session's `/stream`), parsed by
 * `eventsource-parser` (the SDK's parser). Comment lines (keep-alives) are kept apart, with the
 * time each arrived, and are not events.
 */
export class EventStreamClient {
  readonly events: SseMessage[] = [];
  readonly comments: { text: string; at: number }[] = [];
  /** The last `id:` seen. */
  lastEventId: string | undefined;
  status = 0;
  contentType: string | null = null;
  /** The body when the answer was not a stream (an error). */
  body = "";
  ended = false;
  /** Why the body stopped, when the connection broke rather than the stream ending or close(). */
  error: string | undefined;
  readonly done: Promise<void>;
  private readonly abort = new AbortController();
  private waiters = new Set<() => void>();
  /** Resolves when the body may be read (at once unless opened `paused`). */
  private readonly reading: Promise<void>;
  private startReading: () => void = () => undefined;

  /**
   * `paused`: the answer's headers are taken but not one byte of the body until `resume()`, so
   * TCP backpressure reaches the server (fetch reads no further than its small buffer).
   */
  constructor(url: string, path: string, key: string, options: EventStreamOptions = {}) {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: "text/event-stream" };
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
    this.reading = options.paused ? new Promise((resolve) => (this.startReading = resolve)) : Promise.resolve();
    this.done = this.run(`${url}${path}`, headers).finally(() => {
      this.ended = true;
      this.notify();
    });
  }

  /** The `data:` of every event of `type` (all but comments and `gap` when omitted), as JSON. */
  json<T = any>(type?: string): (T & { id: string | undefined; event: string })[] {
    return this.events
      .filter((e) => (type === undefined ? e.event !== "gap" : e.event === type))
      .map((e) => ({ ...(JSON.parse(e.data) as T), id: e.id, event: e.event }));
  }

  close(): void {
    this.abort.abort();
  }

  /** Starts reading the body of a stream opened `paused`. */
  resume(): void {
    this.startReading();
  }

  /**
   * Resolves once `check` holds, re-checked as the stream moves; rejects at the deadline, or as
   * soon as the stream has ended without it.
   */
  waitFor(check: () => boolean, what: string, deadlineMs = 15_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const failure = (why: string) =>
        new Error(
          `${why} waiting for ${what}; status ${this.status}, ` +
            `events ${JSON.stringify(this.events.map((e) => `${e.id}:${e.event}`))}, body ${this.body.slice(0, 300)}` +
            (this.error ? `, broken: ${this.error}` : ""),
        );
      const test = () => {
        if (check()) {
          this.waiters.delete(test);
          clearTimeout(timer);
          resolve();
        } else if (this.ended) {
          this.waiters.delete(test);
          clearTimeout(timer);
          reject(failure("the stream ended"));
        }
      };
      const timer = setTimeout(() => {
        this.waiters.delete(test);
        reject(failure(`timed out after ${deadlineMs} ms`));
      }, deadlineMs);
      this.waiters.add(test);
      test();
    });
  }

  /** Each event as it is parsed (subclasses keep more of it). */
  protected received(message: SseMessage): void {
    this.events.push(message);
    if (message.id !== undefined) this.lastEventId = message.id;
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private async run(target: string, headers: Record<string, string>): Promise<void> {
    let res: Response;
    try {
      res = await fetch(target, { headers, signal: this.abort.signal });
    } catch (error) {
      if (!this.abort.signal.aborted) this.error = describe(error);
      return;
    }
    this.status = res.status;
    this.contentType = res.headers.get("content-type");
    this.notify();
    if (!res.body) return;
    if (!this.contentType?.startsWith("text/event-stream")) {
      try {
        this.body = await res.text();
      } catch {
        // aborted
      }
      return;
    }
    const parser = createParser({
      onEvent: (m) => this.received({ event: m.event ?? "message", id: m.id, data: m.data }),
      onComment: (text) => this.comments.push({ text, at: Date.now() }),
    });
    const decoder = new TextDecoder();
    await this.reading;
    try {
      // Typed as Node's stream: a file that pulls in the DOM library (xterm's typings) must not change it.
      for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
        parser.feed(decoder.decode(piece, { stream: true }));
        this.notify();
      }
    } catch (error) {
      // Aborted by close(), or the connection broke: the latter is kept for the test to show.
      if (!this.abort.signal.aborted) this.error = describe(error);
    }
  }
}

/** An error and its causes on one line (undici's "terminated" says why only in its cause). */
function describe(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error; e !== undefined && parts.length < 4; e = (e as { cause?: unknown }).cause) {
    parts.push(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    if (!(e instanceof Error)) break;
  }
  return parts.join(" <- ");
}

/**
 * A session's output stream (`GET /v1/sessions/:id/stream`): its `data` events' bytes, in order.
 * Each `data`/`stderr` event must start where the one before ended (its `id` is the offset after
 * it), unless a `gap` or `screen` event said where output goes on: anything else is a hole,
 * recorded in `offsetErrors`, and `bytes` refuses to join over it.
 */
export class SseClient extends EventStreamClient {
  private chunks: Buffer[] = [];
  /** Events whose offset did not continue the output before them: must stay empty. */
  readonly offsetErrors: string[] = [];
  /** Offset the next output event must start at; unknown before the first. */
  private nextOffset: number | undefined;

  constructor(url: string, sessionId: string, key: string, options: EventStreamOptions & { query?: string } = {}) {
    super(url, `/v1/sessions/${sessionId}/stream${options.query ? `?${options.query}` : ""}`, key, options);
  }

  /** The bytes of the `data` events (a terminal's output, or stdout), in order; throws over a hole. */
  get bytes(): Buffer {
    if (this.offsetErrors.length > 0) throw new Error(`stream output has holes: ${this.offsetErrors.join("; ")}`);
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  /** The `data` and `stderr` events (`pty: false`), in order, each with its `id` and decoded bytes. */
  outputEvents(): { event: "data" | "stderr"; id: string | undefined; data: Buffer }[] {
    return this.events.flatMap((e) =>
      e.event === "data" || e.event === "stderr" ? [{ event: e.event, id: e.id, data: Buffer.from(e.data, "base64") }] : [],
    );
  }

  protected override received(message: SseMessage): void {
    super.received(message);
    if (message.event === "gap") {
      const gap = JSON.parse(message.data) as { from: number; to: number };
      if (this.nextOffset !== undefined && gap.from !== this.nextOffset) {
        this.offsetErrors.push(`gap from ${gap.from}, but output had reached ${this.nextOffset}`);
      }
      this.nextOffset = gap.to;
    } else if (message.event === "screen") {
      this.nextOffset = Number(message.id);
    } else if (message.event === "data" || message.event === "stderr") {
      const data = Buffer.from(message.data, "base64");
      const start = Number(message.id) - data.byteLength;
      if (this.nextOffset !== undefined && start !== this.nextOffset) {
        this.offsetErrors.push(`expected output at ${this.nextOffset}, got ${start}`);
      }
      this.nextOffset = Number(message.id);
      if (message.event === "data") this.chunks.push(data);
    }
  }
}

/** A tenant's lifecycle events (`GET /v1/events`), from the start or after `lastEventId`. */
export function tenantEvents(url: string, key: string, options: EventStreamOptions & { after?: string } = {}) {
  const query = options.after !== undefined ? `?after=${encodeURIComponent(options.after)}` : "";
  return new EventStreamClient(url, `/v1/events${query}`, key, { lastEventId: options.lastEventId, paused: options.paused });
}
