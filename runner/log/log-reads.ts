// Answers the edge's `read` requests from the output log: ReadChunk frames and `read_gap`
// messages covering the range in order, then `read_end`. Who reads the log for replay is
// always a runner: the session's host while it has one, otherwise any runner the pool picks
// (with Redis every runner sees every log).
//
// Reads are bounded three ways, so clients that connect with `from=0` and drop cannot grow the
// runner's memory or keep Redis busy: the edge cancels a read whose client has gone
// (`read_cancel`), each piece waits until the link has sent what it holds (backpressure), and
// the runner fetches at most MAX_PIECES_IN_FLIGHT pieces from the log at once.
import { log } from "../../shared/log.js";
import { type EdgeLinkMessage, type RunnerLinkMessage, encodeReadChunk } from "../../shared/protocol.js";
import type { OutputLog } from "./output-log.js";

type ReadRequest = Extract<EdgeLinkMessage, { type: "read" }>;

/** Chunk data fetched from the log per round trip. */
const PIECE_BYTES = 1 << 20;
/** A read sends its next piece only once the link holds at most this much unsent. */
const LINK_BUFFER_BYTES = 2 << 20;
/** Log pieces fetched at once by the whole runner. */
const MAX_PIECES_IN_FLIGHT = 2;

/** The link a read answers on. */
export interface ReadLink {
  send(frame: string | Uint8Array): boolean;
  /** Resolves once the link holds at most `bytes` unsent (or has closed). */
  whenBuffered(bytes: number): Promise<void>;
}

/** One link's reads in progress, by id, so the edge can cancel them. */
export class ReadServer {
  private readonly active = new Map<number, { cancelled: boolean }>();

  constructor(
    private readonly outputLog: OutputLog,
    private readonly key: string,
    private readonly link: ReadLink,
  ) {}

  /** Handles `read` and `read_cancel`; false for other messages. */
  handle(message: EdgeLinkMessage): boolean {
    if (message.type === "read_cancel") {
      const read = this.active.get(message.id);
      if (read) read.cancelled = true;
      return true;
    }
    if (message.type !== "read") return false;
    const state = { cancelled: false };
    this.active.set(message.id, state);
    void serveRead(this.outputLog, this.key, message, this.link, () => state.cancelled).finally(() =>
      this.active.delete(message.id),
    );
    return true;
  }

  /** The link is gone: every read stops. */
  cancelAll(): void {
    for (const read of this.active.values()) read.cancelled = true;
  }

  /** Reads in progress (for tests and logs). */
  get size(): number {
    return this.active.size;
  }
}

/** A counting semaphore over the runner's log fetches. */
const slots = { free: MAX_PIECES_IN_FLIGHT, waiting: [] as (() => void)[] };

/** Runs a log fetch in one of the runner's MAX_PIECES_IN_FLIGHT slots (reads and screen rebuilds share them). */
export async function withLogSlot<T>(work: () => Promise<T>): Promise<T> {
  if (slots.free > 0) slots.free--;
  else await new Promise<void>((resolve) => slots.waiting.push(resolve));
  try {
    return await work();
  } finally {
    const next = slots.waiting.shift();
    if (next) next();
    else slots.free++;
  }
}

export async function serveRead(
  outputLog: OutputLog,
  key: string,
  request: ReadRequest,
  link: ReadLink,
  cancelled: () => boolean = () => false,
): Promise<void> {
  const { id, from, to } = request;
  const message = (m: RunnerLinkMessage) => link.send(JSON.stringify(m));
  let cursor = from;
  try {
    while (cursor < to) {
      await link.whenBuffered(LINK_BUFFER_BYTES);
      if (cancelled()) return;
      const items = await withLogSlot(() => (cancelled() ? Promise.resolve([]) : outputLog.read(key, cursor, to, PIECE_BYTES)));
      if (cancelled()) return;
      if (items.length === 0) break;
      for (const item of items) {
        if (item.type === "chunk") {
          if (!link.send(encodeReadChunk(id, item.offset, item.data, item.meta))) return;
          cursor = item.offset + item.data.byteLength;
        } else {
          if (!message({ type: "read_gap", id, from: item.from, to: item.to })) return;
          cursor = item.to;
        }
      }
    }
    message({ type: "read_end", id, to: cursor });
  } catch (error) {
    log.warn("log.read", { key, from, to, error });
    message({ type: "read_end", id, to: cursor, error: "the output log could not be read" });
  }
}
