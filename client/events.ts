// `GET /v1/events` as an async iterator: the tenant's session lifecycle (docs/protocol.md §3,
// "Events"). It resumes by itself after a dropped connection from the last id it handed out
// (`Last-Event-ID`), hands out each id once and in order, and reads the stream only as fast as the
// caller iterates.
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { backoffDelay } from "../shared/backoff.js";
import { EVENT_TYPES, type TenantEvent, type TenantEventType } from "../shared/session.js";
import { PtyBrokerError } from "./errors.js";
import type { Http } from "./http.js";
import type { ConnectionState } from "./pty-types.js";

/** One lifecycle event; `id` is the tenant's sequence number (grows by one per event). */
export interface SessionEvent extends TenantEvent {
  id: number;
}

/**
 * Events with ids `from` ≤ id < `to` will never be seen: the server no longer kept them when
 * the stream resumed (it keeps at least the last 1,000), or it skipped them without saying so.
 */
export interface GapEvent {
  type: "gap";
  from: number;
  to: number;
}

/** What `broker.events()` yields: lifecycle events, and a gap notice where events were lost. */
export type BrokerEvent = SessionEvent | GapEvent;

export interface EventsOptions {
  /**
   * Start after this event id: every event after it, in order (a `gap` first when some are no
   * longer kept; `after: 0` replays everything kept). Default: only events from now on.
   */
  after?: number | undefined;
  /** Ends the iteration (it then finishes with `done`, no error) and closes the request. */
  signal?: AbortSignal | undefined;
  /** Reconnect backoff: exponential from `baseMs` (250) to `maxMs` (5000), with jitter. */
  reconnect?: { baseMs?: number | undefined; maxMs?: number | undefined } | undefined;
  /**
   * A stream silent this long while the caller waits is taken for dead and redialled. The server
   * sends a keep-alive at least every 15 s. Default 45 s.
   */
  staleMs?: number | undefined;
  /**
   * The connection's state: `connecting` (first attempt) → `open` ⇄ `reconnecting` → `closed`.
   * Called on every change, and again for every failed attempt, with the error that caused it
   * (`closed` carries an error only when the iteration ends with one).
   */
  onState?: ((state: ConnectionState, error?: PtyBrokerError) => void) | undefined;
}

/** Events buffered by the SSE parser between two lines are bounded: ours are small. */
const MAX_EVENT_CHARS = 1 << 20;

function isSessionEventType(name: string | undefined): name is TenantEventType {
  return (EVENT_TYPES as readonly (string | undefined)[]).includes(name);
}

/** A protocol violation by the server: fatal, since a redial would read the same thing again. */
function protocolError(message: string): PtyBrokerError {
  return new PtyBrokerError("INTERNAL", `GET /v1/events: ${message}`);
}

/**
 * The resume bookkeeping, pure: turns parsed SSE messages into what the iterator hands out, in
 * order. It remembers the last id handed out; a message at or below it is a repeat (dropped),
 * a jump past the next id is reported as a gap, a server `gap` moves the cursor to its end.
 */
export class EventCursor {
  constructor(
    /** The last id handed out (or the caller's `after`); undefined before the first event. */
    public last: number | undefined,
  ) {
    if (last !== undefined && !(Number.isSafeInteger(last) && last >= 0)) {
      throw new PtyBrokerError("INVALID_REQUEST", `after is an event id (an integer ≥ 0), got ${last}`);
    }
  }

  take(message: EventSourceMessage): BrokerEvent[] {
    if (message.event === "gap") return this.gap(message.data);
    const id = message.id === undefined ? undefined : Number(message.id);
    if (id === undefined || !Number.isSafeInteger(id) || id < 0) {
      throw protocolError(`event ${JSON.stringify(message.event)} without a valid id (${JSON.stringify(message.id)})`);
    }
    if (this.last !== undefined && id <= this.last) return [];
    const out: BrokerEvent[] = [];
    if (this.last !== undefined && id > this.last + 1) out.push({ type: "gap", from: this.last + 1, to: id });
    this.last = id;
    // An event type this SDK does not know yet still moves the cursor: resuming goes past it.
    if (!isSessionEventType(message.event)) return out;
    let data: TenantEvent;
    try {
      data = JSON.parse(message.data) as TenantEvent;
    } catch {
      throw protocolError(`event ${id}'s data is not JSON`);
    }
    out.push({ ...data, type: message.event, id });
    return out;
  }

  private gap(text: string): BrokerEvent[] {
    let from: unknown, to: unknown;
    try {
      ({ from, to } = JSON.parse(text) as { from?: unknown; to?: unknown });
    } catch {
      throw protocolError("a gap's data is not JSON");
    }
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || (to as number) < (from as number)) {
      throw protocolError(`a gap needs integer from ≤ to, got ${text}`);
    }
    const end = to as number;
    const start = this.last === undefined ? (from as number) : Math.max(from as number, this.last + 1);
    if (end <= start) return []; // nothing missing that was not already handed out
    this.last = end - 1;
    return [{ type: "gap", from: start, to: end }];
  }
}

/**
 * SSE text in, what the iterator hands out: the stream parsed by `eventsource-parser`, then
 * through the cursor. Pure; one per iterator, `reset()` for each new connection.
 */
export class EventDecoder {
  readonly cursor: EventCursor;
  private readonly parsed: EventSourceMessage[] = [];
  private failure: PtyBrokerError | undefined;
  private readonly parser = createParser({
    onEvent: (message) => this.parsed.push(message),
    onError: (error) => {
      if (error.type === "max-buffer-size-exceeded") this.failure = protocolError(error.message);
    },
    maxBufferSize: MAX_EVENT_CHARS,
  });

  constructor(after?: number) {
    this.cursor = new EventCursor(after);
  }

  /** A new stream (a new connection): a partial event left from the old one is dropped. */
  reset(): void {
    this.parser.reset();
    this.parsed.length = 0;
  }

  /** Feeds text as it arrives; throws a PtyBrokerError (`INTERNAL`) on a protocol violation. */
  feed(text: string): BrokerEvent[] {
    this.parser.feed(text);
    if (this.failure) throw this.failure;
    return this.parsed.splice(0).flatMap((message) => this.cursor.take(message));
  }
}

/** The iterator `broker.events()` returns. `return()` (a `break`) closes the request at once. */
export class EventStream implements AsyncIterableIterator<BrokerEvent> {
  private readonly events: EventDecoder;
  private readonly queue: BrokerEvent[] = [];
  private text = new TextDecoder();
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private connection: AbortController | undefined;
  private pulling: Promise<void> | undefined;
  /** Set after a failed attempt or a drop: wait this long before dialling again. */
  private retryInMs: number | undefined;
  private wake: (() => void) | undefined;
  private attempt = 0;
  private opened = false;
  private finished = false;
  /** Undefined until the first dial: then `connecting` is reported like every other state. */
  private state: ConnectionState | undefined;

  constructor(
    private readonly http: Http,
    private readonly options: EventsOptions = {},
  ) {
    this.events = new EventDecoder(options.after);
    const { signal } = options;
    if (signal?.aborted) this.close();
    else signal?.addEventListener("abort", () => this.close(), { once: true });
  }

  /** The last event id handed out: where a new `events({ after })` would continue. */
  get lastId(): number | undefined {
    return this.events.cursor.last;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<BrokerEvent, undefined>> {
    for (;;) {
      const item = this.queue.shift();
      if (item) return { value: item, done: false };
      if (this.finished) return { value: undefined, done: true };
      await (this.pulling ??= this.pull().finally(() => (this.pulling = undefined)));
    }
  }

  async return(): Promise<IteratorResult<BrokerEvent, undefined>> {
    this.close();
    return { value: undefined, done: true };
  }

  /** Stops: the request is aborted, a pending `next()` resolves with `done`. Idempotent. */
  close(): void {
    if (this.finished) return;
    this.finished = true;
    this.queue.length = 0;
    this.connection?.abort();
    this.connection = undefined;
    this.reader = undefined;
    this.wake?.();
    this.setState("closed");
  }

  /** One step: dial (after the backoff, if one is due) or read one chunk into the queue. */
  private async pull(): Promise<void> {
    if (this.finished) return;
    if (!this.reader) return this.open();
    const reader = this.reader;
    const staleMs = this.options.staleMs ?? 45_000;
    const connection = this.connection;
    let silent = false;
    const stale = setTimeout(() => {
      silent = true;
      connection?.abort();
    }, staleMs);
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch (error) {
      return this.drop(silent ? new PtyBrokerError("NETWORK", `GET /v1/events: silent for ${staleMs} ms`) : error);
    } finally {
      clearTimeout(stale);
    }
    if (this.finished) return;
    if (chunk.done) return this.drop(new PtyBrokerError("NETWORK", "GET /v1/events: the stream ended"));
    try {
      this.queue.push(...this.events.feed(this.text.decode(chunk.value, { stream: true })));
    } catch (error) {
      return this.fail(error as PtyBrokerError);
    }
  }

  private async open(): Promise<void> {
    if (this.retryInMs !== undefined) {
      await this.sleep(this.retryInMs);
      this.retryInMs = undefined;
      if (this.finished) return;
    }
    if (this.state === undefined) this.setState("connecting");
    const connection = (this.connection = new AbortController());
    const headers: Record<string, string> = { accept: "text/event-stream" };
    const last = this.events.cursor.last;
    if (last !== undefined) headers["last-event-id"] = String(last);
    let res: Response;
    try {
      res = await this.http.send("GET", "/v1/events", undefined, { signal: connection.signal, headers, holds: true });
    } catch (error) {
      connection.abort(); // whatever the failed attempt left (a 4xx body unread, say) is let go
      if (this.connection === connection) this.connection = undefined;
      if (this.finished) return;
      return this.retryOrFail(error);
    }
    if (this.finished) {
      connection.abort();
      return;
    }
    const type = res.headers.get("content-type") ?? "";
    if (!type.startsWith("text/event-stream")) {
      connection.abort();
      return this.fail(protocolError(`expected text/event-stream, got ${JSON.stringify(type)}`));
    }
    if (!res.body) {
      connection.abort();
      return this.fail(new PtyBrokerError("INTERNAL", "this fetch cannot stream a response body"));
    }
    this.reader = res.body.getReader();
    this.events.reset();
    this.text = new TextDecoder();
    this.attempt = 0;
    this.opened = true;
    this.setState("open");
  }

  /** The connection broke (reset, ended, or silent too long): redial after a backoff. */
  private drop(error: unknown): void {
    this.connection?.abort();
    this.connection = undefined;
    this.reader = undefined;
    if (this.finished) return;
    this.retryOrFail(error);
  }

  private retryOrFail(error: unknown): void {
    const problem =
      error instanceof PtyBrokerError
        ? error
        : new PtyBrokerError("NETWORK", `GET /v1/events: ${(error as Error)?.message ?? String(error)}`);
    if (isFatal(problem)) return this.fail(problem);
    const { baseMs = 250, maxMs = 5000 } = this.options.reconnect ?? {};
    this.retryInMs = Math.max(backoffDelay(this.attempt++, { baseMs, maxMs }), (problem.retryAfterSec ?? 0) * 1000);
    this.setState(this.opened ? "reconnecting" : "connecting", problem);
  }

  /** Ends the iteration with `error`: the pending `next()` rejects, later ones are `done`. */
  private fail(error: PtyBrokerError): never {
    this.connection?.abort();
    this.connection = undefined;
    this.reader = undefined;
    this.finished = true;
    this.setState("closed", error);
    throw error;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private setState(state: ConnectionState, error?: PtyBrokerError): void {
    if (state === this.state && !error) return;
    this.state = state;
    try {
      this.options.onState?.(state, error);
    } catch (thrown) {
      console.error("ptybroker: an onState callback threw", thrown);
    }
  }
}

/** Answers a redial would only repeat: bad request, credentials, a server without the route. */
function isFatal(error: PtyBrokerError): boolean {
  return error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429;
}
