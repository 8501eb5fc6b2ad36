// Numbered input, written to the process exactly once (docs/protocol.md §7, "Input exactly once").
// Each writer (a client, one id across its reconnects) numbers its input by byte offset; the edge
// passes its frames on with the writer's key. Here, where the process is, each writer's count of
// bytes taken decides: a frame already taken (a resend) is dropped, the new part of one that
// overlaps is written, one past a hole (a frame before it was refused on the way) is dropped and
// the writer is asked to resend from its count. A writer's bytes are acknowledged once the
// terminal has taken them from the write queue (written to the PTY, or the pipe), never before.

export interface WriterAck {
  writer: string;
  offset: number;
  /** The writer should send again from `offset`: a frame past a hole was dropped. */
  resend?: true;
}

/** Writers remembered per session; the one heard from longest ago goes first. */
export const MAX_WRITERS = 1024;
/** How often the write queue is looked at while acknowledged bytes wait in it. */
const POLL_MS = 5;
/**
 * Acknowledgements go at most this often per session (the first after a quiet spell at once):
 * each is a message through the edge's one thread, and one per poll while a person types cost
 * every keystroke's echo ~0.2 ms there (docs/benchmarks.md, row 1). Asks to resend go at once.
 */
export const ACK_EVERY_MS = 25;

interface Writer {
  /** Bytes of its input written to the process (or queued for it). */
  taken: number;
  /** Bytes of its input the terminal has taken from the write queue, told to the edge. */
  acked: number;
  /** Where it was last asked to resend from: asked once per hole, not once per frame past it. */
  asked?: number;
  /**
   * Its writes still in the queue, oldest first: acknowledged up to `end` once the queue has
   * taken every byte below `at` (all input's count). At most two: a newer write extends the
   * second, so the oldest is acknowledged as soon as it is through, however fast the writer types.
   */
  queued: { at: number; end: number }[];
}

/** What of a writer's frame to write. */
export type Take =
  | { write: Uint8Array; end: number }
  | { write: null; why: "resend" | "hole" };

export class WriterInputs {
  private readonly writers = new Map<string, Writer>();
  /** Bytes handed to the process's write queue so far, by any path (clients, REST, `run`). */
  private written = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Acknowledgements held until ACK_EVERY_MS has passed since the last went, newest per writer. */
  private held = new Map<string, number>();
  private lastAckAt = 0;
  private ackTimer: NodeJS.Timeout | undefined;

  constructor(
    /** Bytes queued for the process that it has not taken yet (node-pty's write queue). */
    private readonly pending: () => number,
    /** Acknowledgements for the edge, several writers in one message. */
    private readonly send: (acks: WriterAck[]) => void,
  ) {}

  /**
   * What of `data` (the writer's bytes from `offset`) is new. Nothing changes until `wrote`.
   * `base`: what the writer had acknowledged when it connected; a writer not known here (its
   * first frame, or forgotten past MAX_WRITERS) starts its count there, so a first frame that
   * comes after earlier ones were refused on the way is a hole, not a new start.
   */
  take(writer: string, offset: number, base: number, data: Uint8Array): Take {
    let known = this.writers.get(writer);
    if (!known) {
      known = { taken: base, acked: base, queued: [] };
      this.writers.set(writer, known);
      this.forgetOldest();
    }
    const taken = known.taken;
    const end = offset + data.byteLength;
    if (end <= taken) {
      // A resend of what was taken: acknowledged again once it is (now, if it is already).
      if (known.acked === known.taken) this.acknowledge([{ writer, offset: known.acked }]);
      return { write: null, why: "resend" };
    }
    if (offset > taken) {
      if (known.asked !== known.taken) this.send([{ writer, offset: known.taken, resend: true }]);
      known.asked = known.taken;
      return { write: null, why: "hole" };
    }
    return { write: data.subarray(taken - offset), end };
  }

  /** `bytes` went to the process's write queue; for a writer's frame, its end (from `take`). */
  wrote(bytes: number, writer?: { key: string; end: number }): void {
    this.written += bytes;
    if (!writer) return;
    const known = this.writers.get(writer.key);
    const queued = known?.queued ?? [];
    const newest = { at: this.written, end: writer.end };
    if (queued.length < 2) queued.push(newest);
    else queued[1] = newest;
    this.writers.delete(writer.key); // re-inserted last: the most recently heard from
    // `asked` is dropped: the hole is filled, and the next one is asked about again.
    this.writers.set(writer.key, { taken: writer.end, acked: known?.acked ?? writer.end - bytes, queued });
    this.forgetOldest();
    this.check();
  }

  private forgetOldest(): void {
    while (this.writers.size > MAX_WRITERS) {
      const oldest = this.writers.keys().next().value;
      if (oldest === undefined) break;
      this.writers.delete(oldest);
    }
  }

  /** A writer's frame was not written (the process's input bound): it stays untaken, to be resent. */
  refused(writer: string, offset: number): void {
    const known = this.writers.get(writer);
    const from = known?.taken ?? offset;
    if (known?.asked === from) return;
    if (known) known.asked = from;
    this.send([{ writer, offset: from, resend: true }]);
  }

  /**
   * The process exited: what the terminal took before it is acknowledged now, ahead of the exit
   * report (a command that ends the shell was delivered; what it never took was not).
   */
  settle(): void {
    this.check();
    this.flushAcks();
  }

  /** A new link: each writer's count, so the edge knows it again (bounded by MAX_WRITERS). */
  all(): WriterAck[] {
    return [...this.writers].map(([writer, { acked }]) => ({ writer, offset: acked }));
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    this.held.clear();
    for (const writer of this.writers.values()) writer.queued = [];
  }

  /** Acknowledges what the terminal has taken; looks again shortly while some still waits. */
  private check(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const through = this.written - this.pending();
    const acks: WriterAck[] = [];
    let waiting = false;
    for (const [key, writer] of this.writers) {
      const before = writer.acked;
      while (writer.queued.length > 0 && writer.queued[0].at <= through) {
        writer.acked = Math.max(writer.acked, writer.queued[0].end);
        writer.queued.shift();
      }
      if (writer.acked > before) acks.push({ writer: key, offset: writer.acked });
      waiting ||= writer.queued.length > 0;
    }
    if (acks.length > 0) this.acknowledge(acks);
    if (waiting) this.timer = setTimeout(() => this.check(), POLL_MS);
  }

  /** Sends acknowledgements now, or holds them until ACK_EVERY_MS since the last went. */
  private acknowledge(acks: WriterAck[]): void {
    for (const { writer, offset } of acks) this.held.set(writer, offset);
    const wait = this.lastAckAt + ACK_EVERY_MS - Date.now();
    if (wait <= 0) return this.flushAcks();
    this.ackTimer ??= setTimeout(() => this.flushAcks(), wait);
  }

  private flushAcks(): void {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    if (this.held.size === 0) return;
    const acks = [...this.held].map(([writer, offset]) => ({ writer, offset }));
    this.held.clear();
    this.lastAckAt = Date.now();
    this.send(acks);
  }
}
