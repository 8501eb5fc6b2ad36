// A Server-Sent Events response body made in a Durable Object, bounded (docs/protocol.md §5b,
// "Slow streams"): events wait in a queue of its own and are handed to workerd one at a time,
// made into bytes only when workerd pulls (the response stream has highWaterMark 0), so what
// workerd holds for a stream is about one event however little its client reads. What is queued
// and not yet taken is the client's lag; past the bound the queue is dropped and the stream ends
// with one `cut` event naming the id to resume from. Used by a session's output streams
// (clients/subscribers.ts) and a tenant's events (tenant/tenant-events.ts).

import { CloseCode } from "../../shared/errors.js";

const encoder = new TextEncoder();

/** The `code` of the `cut` event, named as the WebSocket close code 4008 (CloseCode.SlowConsumer). */
export const SLOW_CONSUMER = "SLOW_CONSUMER";
const CUT_MESSAGE = "slow consumer: reconnect with Last-Event-ID";

/** One event waiting to be sent: its bytes are made only when the client takes it. */
export interface SseEvent {
  /** What it counts towards the lag until taken (output: its raw bytes; text: its length). */
  readonly size: number;
  /** Its `id:`, where a client that has it resumes; absent for events without one (gap, exit). */
  readonly id?: string;
  /**
   * The event as sent (`event:`/`id:`/`data:` lines and the blank line), UTF-8. The same bytes
   * may go to several streams: workerd only reads what it is handed.
   */
  bytes(): Uint8Array;
}

/** An event whose text is at hand already (control events, a tenant's events). */
export function textEvent(text: string, id?: string, size = text.length): SseEvent {
  let bytes: Uint8Array | undefined;
  return { size, id, bytes: () => (bytes ??= encoder.encode(text)) };
}

/** The last event of a stream whose key was revoked: the close code and reason a socket gets (4011). */
export function revokedEvent(reason: string): SseEvent {
  return textEvent(`event: revoked\ndata: ${JSON.stringify({ code: CloseCode.KeyRevoked, reason })}\n\n`, undefined, 0);
}

export interface SseHooks {
  /** The client took an event: the lag shrank. */
  pulled?(): void;
  /** The stream passed its bound and was cut (it ends once the client takes the `cut` event). */
  cut(): void;
  /** The client went away. */
  cancelled(): void;
}

export class SseBody {
  readonly stream: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  /** Events not yet taken, from `head` on (taken ones are cleared, the array compacted now and then). */
  private queue: (SseEvent | undefined)[] = [];
  private head = 0;
  /** The sum of the sizes of the events not yet taken: the lag. */
  private queued = 0;
  /** workerd asked for the next event and none was queued: the next one goes out at once. */
  private wanted = false;
  /** "ending": takes no more events, closes once the queue is taken; "closed": done or cancelled. */
  private state: "open" | "ending" | "closed" = "open";
  /** The id of the last event taken that had one, or where the stream started (`startAt`). */
  private resumeId: string | undefined;

  /**
   * `maxQueued`: the bound on the lag. An event that would take a non-empty queue past it cuts
   * the stream instead (an empty queue always takes one event, however large).
   */
  constructor(
    private readonly maxQueued: number,
    private readonly hooks: SseHooks,
  ) {
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        pull: () => {
          this.wanted = true;
          this.send();
        },
        cancel: () => {
          this.state = "closed";
          this.drop();
          hooks.cancelled();
        },
      },
      // Nothing is encoded ahead of a read: what workerd holds is the event it is writing.
      { highWaterMark: 0 },
    );
  }

  /** The response that carries the stream. */
  response(): Response {
    return new Response(this.stream, {
      headers: { "content-type": "text/event-stream", "cache-control": "no-store", "x-accel-buffering": "no" },
    });
  }

  /** Takes events: not ending, cut or cancelled. */
  get open(): boolean {
    return this.state === "open";
  }

  /** Bytes queued that the client has not taken yet. */
  lag(): number {
    return this.queued;
  }

  /** Where the stream started, the resume id of a cut before any event with an id was taken. */
  startAt(id: string): void {
    this.resumeId ??= id;
  }

  /** Queues `event`; false when the stream takes no more (ending, cut, cancelled, or cut by this event). */
  push(event: SseEvent): boolean {
    if (this.state !== "open") return false;
    if (this.queued > 0 && this.queued + event.size > this.maxQueued) {
      this.cut();
      return false;
    }
    this.queue.push(event);
    this.queued += event.size;
    this.send();
    return true;
  }

  /** A comment line (a keep-alive) when nothing is queued: clients ignore it, proxies see traffic. */
  comment(text: string): void {
    if (this.head === this.queue.length) this.push(textEvent(`: ${text}\n\n`, undefined, 0));
  }

  /** Ends the stream once the client has taken what is queued. */
  end(): void {
    if (this.state !== "open") return;
    this.state = "ending";
    this.send();
  }

  /**
   * Ends the stream now (its key was revoked): what is queued is dropped, and `last` is the final
   * event the client gets.
   */
  finish(last: SseEvent): void {
    if (this.state !== "open") return;
    this.drop();
    this.queue.push(last);
    this.state = "ending";
    this.send();
  }

  /**
   * Past the bound (push, or an owner that measures it otherwise): what is queued is dropped,
   * and the stream ends with `event: cut` naming the id of the last event the client took (or
   * where it started), so it resumes with exactly that Last-Event-ID and misses nothing.
   */
  cut(): void {
    if (this.state !== "open") return;
    this.drop();
    const id = this.resumeId;
    const data = JSON.stringify({ code: SLOW_CONSUMER, message: CUT_MESSAGE, lastEventId: id ?? null });
    this.queue.push(textEvent(`event: cut\n${id === undefined ? "" : `id: ${id}\n`}data: ${data}\n\n`, undefined, 0));
    this.state = "ending";
    this.send();
    this.hooks.cut();
  }

  /** Hands workerd the next event if it asked for one; closes an ending stream once everything is handed. */
  private send(): void {
    if (this.state === "closed") return;
    if (this.head === this.queue.length) {
      if (this.state === "ending") this.close();
      return;
    }
    if (!this.wanted) return;
    this.wanted = false;
    const event = this.take();
    if (!event) return;
    if (event.id !== undefined) this.resumeId = event.id;
    try {
      this.controller.enqueue(event.bytes());
    } catch {
      // cancelled meanwhile
      this.state = "closed";
      return;
    }
    this.hooks.pulled?.();
    if (this.state === "ending" && this.head === this.queue.length) this.close();
  }

  /** The next queued event, out of the queue and the lag. */
  private take(): SseEvent | undefined {
    const event = this.queue[this.head];
    if (!event) return undefined;
    this.queue[this.head++] = undefined;
    this.queued -= event.size;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    return event;
  }

  private close(): void {
    this.state = "closed";
    try {
      this.controller.close();
    } catch {
      // cancelled meanwhile
    }
  }

  private drop(): void {
    this.queue = [];
    this.head = 0;
    this.queued = 0;
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
