// The local terminal's answers to queries in replayed output, kept from the session
// (docs/protocol.md §5, "Replies to replayed queries"). Replayed bytes are history: a `vim` that
// asked for the cursor position (CPR) or the colours (OSC 10/11) got its answers long ago, and a
// terminal shown them again answers again, into stdin, where they would be typed into the shell.
//
// A terminal answers queries in the order it reads them, a little later. So once the replay is
// written (the Pty's `live`), a fence follows it: DSR `ESC[5n`, which every terminal answers with
// `ESC[0n` (xterm, tmux, xterm.js do). From the start of a replay until the fence's answer has
// come (and one answer for each DSR the replay itself held), stdin's replies are dropped
// (shared/terminal-replies.ts) and everything else passes; the fence's answer is dropped with
// them. A terminal that never answers DSR ends the wait at a deadline.
import { ReplyStripper } from "../../shared/terminal-replies.js";

/** The fence: DSR, "report your status", answered `ESC[0n`. */
export const FENCE = "\x1b[5n";
const FENCE_ANSWER = "\x1b[0n";

/** Without an answer to the fence by then, input passes unfiltered again. */
export const FENCE_DEADLINE_MS = 2000;

export interface ReplayRepliesOwner {
  /** Writes to the local terminal (the fence). */
  write(text: string): void;
  /** Input held back while filtering, given up when the filter ends by itself (the deadline). */
  release(bytes: Buffer): void;
}

export class ReplayReplies {
  private filtering = false;
  /** `ESC[0n` answers still to come: one per DSR the replays held, one per fence written. */
  private answersDue = 0;
  /** The end of the previous replayed chunk, for a DSR split across two. */
  private tail = "";
  private readonly stripper = new ReplyStripper();
  private deadline: ReturnType<typeof setTimeout> | undefined;
  /** Called once filtering has ended, after `settle`. */
  private settled: (() => void) | undefined;

  constructor(
    private readonly owner: ReplayRepliesOwner,
    private readonly deadlineMs = FENCE_DEADLINE_MS,
  ) {}

  /** A replay begins (an attach, or a socket's `hello` after a reconnect): replies are dropped from now on. */
  replaying(): void {
    this.filtering = true;
  }

  /** Replayed bytes, as written to the terminal. */
  replayed(bytes: Uint8Array): void {
    if (!this.filtering) return;
    const text = this.tail + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");
    this.answersDue += text.split(FENCE).length - 1;
    this.tail = text.slice(1 - FENCE.length); // too short to hold a whole one, so none is counted twice
  }

  /** The replay is written (`live`): the fence goes after it. */
  live(): void {
    if (!this.filtering) return;
    this.answersDue += 1;
    this.tail = "";
    this.owner.write(FENCE);
    clearTimeout(this.deadline);
    this.deadline = setTimeout(() => {
      const held = this.end();
      if (held.byteLength > 0) this.owner.release(held);
    }, this.deadlineMs);
  }

  /** What of a piece of stdin goes on to the session. */
  input(chunk: Buffer): Buffer {
    if (!this.filtering) return chunk;
    const { kept, replies } = this.stripper.push(chunk.toString("latin1"));
    const answers = replies.filter((reply) => reply === FENCE_ANSWER).length;
    this.answersDue -= answers;
    // The filter ends with the fence's answer, which comes after all the others.
    if (answers === 0 || this.deadline === undefined || this.answersDue > 0) return Buffer.from(kept, "latin1");
    return Buffer.concat([Buffer.from(kept, "latin1"), this.end()]);
  }

  /**
   * Calls `done` once the answers due have come (or the deadline has passed): a CLI that lets go
   * of the terminal before that would leave them to be typed into the local shell. Fences what
   * was written of a replay cut short.
   */
  settle(done: () => void): void {
    if (!this.filtering) return done();
    this.settled = done;
    if (this.deadline === undefined) this.live();
  }

  /** Stops filtering and its timer; answers what was held back. */
  end(): Buffer {
    const settled = this.settled;
    this.settled = undefined;
    queueMicrotask(() => settled?.());
    clearTimeout(this.deadline);
    this.deadline = undefined;
    this.filtering = false;
    this.answersDue = 0;
    this.tail = "";
    return Buffer.from(this.stripper.flush(), "latin1");
  }
}
