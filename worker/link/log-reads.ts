// Reads of a session's output log, served by a runner over a link: the session's host link
// while it has one, otherwise a reader link that the pool asks some runner to open. Each read
// has an id; its ReadChunk frames, gaps and end come back on the link it was sent on.
import type { ErrorCode } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { ChunkMeta, EdgeLinkMessage } from "../../shared/protocol.js";
import { sendQuietly } from "../io/sockets.js";

export interface ReadHandler {
  /** Log bytes at `offset`, with the stream, read time and terminal size the log keeps for them. */
  onChunk(offset: number, data: Uint8Array, meta: ChunkMeta): void;
  onGap(from: number, to: number): void;
  /** The read is over: complete up to `to`, or failed with `error`. */
  onEnd(to: number, error?: { code: ErrorCode; message: string }): void;
}

interface InFlight {
  from: number;
  to: number;
  /** How far the answers have come: a read moved to another link goes on from here. */
  reached: number;
  handler: ReadHandler;
  link: WebSocket | undefined;
  timer: ReturnType<typeof setTimeout>;
}

/** A read that gets no answer within this time fails (and its timer keeps the object awake). */
const READ_TIMEOUT_MS = 30_000;
const SUMMON_RETRY_MS = 1000;

export class LogReads {
  private nextId = 1;
  private readonly inFlight = new Map<number, InFlight>();

  private summoning = false;

  constructor(
    /** An open link that can serve reads, if any. */
    private readonly pickLink: () => WebSocket | undefined,
    /** Whether the session's host link is expected back (running, within its grace): then wait for it. */
    private readonly expectHost: () => boolean,
    /** Asks the pool for a reader link; resolves false when no runner can be asked. */
    private readonly summonReader: () => Promise<boolean>,
  ) {}

  /** Starts a read; returns its id (for `cancel`). */
  read(from: number, to: number, handler: ReadHandler): number {
    const id = this.nextId++;
    const timer = setTimeout(() => {
      const waiting = !this.inFlight.get(id)?.link;
      this.finish(id, undefined, {
        code: waiting ? "NO_RUNNER" : "INTERNAL",
        message: waiting ? "no runner came to read the output log" : "the output log did not answer in time",
      });
    }, READ_TIMEOUT_MS);
    const entry: InFlight = { from, to, reached: from, handler, link: undefined, timer };
    this.inFlight.set(id, entry);
    const link = this.pickLink();
    if (link) this.send(id, entry, link);
    else if (!this.expectHost()) this.summon();
    return id;
  }

  /**
   * The read's client has gone: the runner stops reading (it would otherwise read the log and
   * send on for nobody), and the handler hears nothing more.
   */
  cancel(id: number): void {
    const entry = this.inFlight.get(id);
    if (!entry) return;
    this.inFlight.delete(id);
    clearTimeout(entry.timer);
    if (entry.link) sendQuietly(entry.link, JSON.stringify({ type: "read_cancel", id } satisfies EdgeLinkMessage));
  }

  /**
   * Reads waiting for a link ask the pool for a reader, again every second while no runner is
   * connected (after an edge restart runners redial within seconds); each read's own timeout
   * ends the wait.
   */
  summon(): void {
    if (this.summoning || ![...this.inFlight.values()].some((entry) => !entry.link)) return;
    this.summoning = true;
    void this.summonReader().then((asked) => {
      this.summoning = false;
      if (!asked) setTimeout(() => this.summon(), SUMMON_RETRY_MS);
    });
  }

  /** A link that serves reads has opened: reads waiting for one go out on it. */
  linkOpened(link: WebSocket): void {
    for (const [id, entry] of this.inFlight) if (!entry.link) this.send(id, entry, link);
  }

  /**
   * A link closed (the host's when the session ends, a reader's, or one that dropped): the reads
   * it was serving go on from where their answers had come, on another open link, or on the
   * host's when it is expected back, or on a reader summoned for them. A read's own timeout
   * still bounds the wait.
   */
  linkClosed(link: WebSocket): void {
    let waiting = false;
    for (const [id, entry] of this.inFlight) {
      if (entry.link !== link) continue;
      entry.link = undefined;
      const next = this.pickLink();
      if (next && next !== link) this.send(id, entry, next);
      else waiting = true;
    }
    if (waiting && !this.expectHost()) this.summon();
  }

  // Answers count only from the link the read was sent on.

  chunk(link: WebSocket, id: number, offset: number, data: Uint8Array, meta: ChunkMeta): void {
    const entry = this.inFlight.get(id);
    if (entry?.link !== link) return;
    entry.reached = Math.max(entry.reached, offset + data.byteLength);
    entry.handler.onChunk(offset, data, meta);
  }

  gap(link: WebSocket, id: number, from: number, to: number): void {
    const entry = this.inFlight.get(id);
    if (entry?.link !== link) return;
    entry.reached = Math.max(entry.reached, to);
    entry.handler.onGap(from, to);
  }

  end(link: WebSocket, id: number, to: number, error?: string): void {
    if (this.inFlight.get(id)?.link !== link) return;
    this.finish(id, to, error === undefined ? undefined : { code: "INTERNAL", message: error });
  }

  private send(id: number, entry: InFlight, link: WebSocket): void {
    entry.link = link;
    const message: EdgeLinkMessage = { type: "read", id, from: entry.reached, to: entry.to };
    sendQuietly(link, JSON.stringify(message));
  }

  private finish(id: number, to: number | undefined, error?: { code: ErrorCode; message: string }): void {
    const entry = this.inFlight.get(id);
    if (!entry) return;
    this.inFlight.delete(id);
    clearTimeout(entry.timer);
    if (error) log.warn("log.read", { from: entry.from, to: entry.to, outcome: error.code, message: error.message });
    entry.handler.onEnd(to ?? entry.from, error);
  }
}
