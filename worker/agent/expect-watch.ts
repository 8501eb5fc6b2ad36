// `POST .../expect` (docs/protocol.md §3, "Agents"): a wait for a pattern in the session's
// output from an offset. It rides the client hub as a subscriber that is not a client (it holds
// no slot and keeps no session attached): the hub replays the log from `from` and then hands it
// live output, with the same no-gap, no-overlap switch-over as any client, so output that came
// before the request is matched and nothing is seen twice. It holds only the matcher's window,
// never the history. Output inside a shell's command line (OSC 133 B…C, prompt-marks.ts) is
// skipped: the echo of what was typed is not output to wait for.
//
// Output is taken at once but matched in turns (docs/security.md, "Fair share"): each push
// searches the whole window, and a replay hands over up to 4 MiB in many small chunks at once,
// so a costly pattern matched synchronously held the object's thread, and every object that
// shares it, for as long as it took. Matching stops after RUN_WORK and goes on in a later turn;
// what waits counts as the watch's lag, so a replay reads on only as the matcher takes it, and
// the timeout answers in time with how far the output was searched.
import type { ExpectResult } from "../../shared/agent.js";
import { CloseCode, type ErrorCode, type Failure, fail } from "../../shared/errors.js";
import type { ServerMessage } from "../../shared/protocol.js";
import { EXPECT_WINDOW_CHARS, ExpectMatcher } from "../../shared/expect-matcher.js";
import { ShellMarkScanner } from "../../shared/shell-marks.js";
import type { Subscriber } from "../clients/subscribers.js";
import type { ExpectQuery } from "../rpc.js";

/** Output is matched in slices of this size, so one 4 MiB replay read never becomes 4 MiB of text at once. */
const SLICE_BYTES = 64 << 10;
/**
 * Search work one run of code may do before the watches yield, in window units searched times
 * the pattern's program size (ExpectMatcher.searchCost): a full window at 32 instructions,
 * about 40 ms at worst. Counted for every watch of the isolate together (the objects that
 * share its thread), so the watches that one push of output reaches share it too.
 */
const RUN_WORK = EXPECT_WINDOW_CHARS * 32;

/** Search work done in the current run of code by every watch here; back to 0 once the run ends. */
let runWork = 0;
let runEndQueued = false;

function spend(work: number): void {
  runWork += work;
  if (runEndQueued) return;
  runEndQueued = true;
  queueMicrotask(() => {
    runWork = 0;
    runEndQueued = false;
  });
}

export interface ExpectRequest extends Omit<ExpectQuery, "from"> {
  from: number;
  /** `from` lies inside a command line (after a B mark, before the next mark). */
  inCommandLine: boolean;
}

/** Output waiting to be matched: [at, to) of `data` (which starts at `offset`); `reached` once done. */
interface Pending {
  offset: number;
  data: Uint8Array;
  at: number;
  to: number;
  reached: number;
}

export class ExpectWatch implements Subscriber {
  readonly kind = "watch" as const;
  /** Offset of the next byte the hub delivers (what is matched lags behind it: `searched`). */
  cursor: number;
  live = false;
  closed = false;
  /** Settles once: the match, no match (timeout, exit), or a failure (replay failed, session purged). */
  readonly result: Promise<ExpectResult | Failure>;
  private settle!: (result: ExpectResult | Failure) => void;
  private matcher: ExpectMatcher;
  private marks: ShellMarkScanner;
  private inCommandLine: boolean;
  private readonly timer: ReturnType<typeof setTimeout>;
  /** How far the output has been searched (the timeout's `offset`). */
  private searched: number;
  /** Output taken but not matched yet, in order, and its bytes (the watch's lag). */
  private pending: Pending[] = [];
  private pendingBytes = 0;
  /** The session ended at this offset: answered once what came before it is matched. */
  private exitAt: number | null = null;
  private draining = false;
  private nextTurn: ReturnType<typeof setTimeout> | undefined;
  private lagWaiter: { bytes: number; resume: () => void } | undefined;

  constructor(
    private readonly request: ExpectRequest,
    /** Called once the watch is over, so the hub lets go of it. */
    private readonly onOver: (watch: ExpectWatch) => void,
  ) {
    this.cursor = request.from;
    this.searched = request.from;
    this.matcher = this.matcherAt(request.from);
    this.marks = new ShellMarkScanner(request.from);
    this.inCommandLine = request.inCommandLine;
    this.result = new Promise((resolve) => {
      this.settle = resolve;
    });
    this.timer = setTimeout(() => this.finish({ matched: false, reason: "timeout", offset: this.searched }), request.timeoutMs);
  }

  /** Output in order; the parts outside command lines are queued for the matcher. */
  deliver(offset: number, data: Uint8Array): void {
    if (this.closed) return;
    // Trimmed history was skipped (a gap): marks are scanned afresh from here.
    if (offset !== this.marks.offset) {
      this.marks = new ShellMarkScanner(offset);
      this.inCommandLine = false;
    }
    const end = offset + data.byteLength;
    let at = offset;
    for (const mark of this.marks.push(offset, data)) {
      if (!this.inCommandLine) this.queue(offset, data, at, Math.max(at, mark.end), Math.max(at, mark.end));
      at = Math.max(at, mark.end);
      this.inCommandLine = mark.kind === "B";
    }
    // The last part reaches the end of this output, also when it is all command line.
    this.queue(offset, data, this.inCommandLine ? end : at, end, end);
    this.cursor = end;
    this.drain();
  }

  private queue(offset: number, data: Uint8Array, at: number, to: number, reached: number): void {
    this.pending.push({ offset, data, at, to, reached });
    this.pendingBytes += to - at;
  }

  /**
   * Matches queued output until this run of code has spent RUN_WORK (a run that starts with a
   * slice matches it whatever it costs), then goes on in a later turn. What was skipped before a
   * part (a command line, a gap) restarts the matcher there.
   */
  private drain(): void {
    if (this.draining || this.nextTurn !== undefined || this.closed) return;
    this.draining = true;
    while (!this.closed && this.pending.length > 0 && runWork < RUN_WORK) {
      const part = this.pending[0] as Pending;
      if (part.at < part.to) {
        if (part.at > this.matcher.offset) this.matcher = this.matcherAt(part.at);
        const sliceEnd = Math.min(part.to, part.at + SLICE_BYTES);
        const found = this.matcher.push(part.at, part.data.subarray(part.at - part.offset, sliceEnd - part.offset));
        spend(Math.max(1, this.matcher.searchCost));
        this.pendingBytes -= sliceEnd - part.at;
        part.at = sliceEnd;
        this.searched = sliceEnd;
        if (found) return this.finish({ matched: true, ...found });
      }
      if (part.at >= part.to) {
        this.pending.shift();
        this.searched = part.reached;
      }
    }
    const waiter = this.lagWaiter;
    if (!this.closed && waiter && this.pendingBytes <= waiter.bytes) {
      this.lagWaiter = undefined;
      // The replay reads on; what it hands over now (from its cache) is matched in a later turn.
      waiter.resume();
    }
    this.draining = false;
    if (this.closed) return;
    if (this.pending.length > 0) {
      this.nextTurn = setTimeout(() => {
        this.nextTurn = undefined;
        this.drain();
      }, 0);
    } else if (this.exitAt !== null) this.finish({ matched: false, reason: "exited", offset: this.exitAt });
  }

  control(message: ServerMessage): void {
    if (message.type === "exit") {
      // Output before the end is matched first: the answer is `exited` only if it did not match.
      this.exitAt = message.offset;
      if (this.pending.length === 0) this.finish({ matched: false, reason: "exited", offset: message.offset });
    } else if (message.type === "error") this.finish(fail(message.code as ErrorCode, message.message));
  }

  /** Output taken and not yet matched. */
  lag(): number {
    return this.pendingBytes;
  }

  whenLagAtMost(bytes: number, resume: () => void): void {
    if (this.pendingBytes <= bytes) return resume();
    this.lagWaiter = { bytes, resume };
  }

  screen(): void {
    // A watch starts at an offset, never at the screen.
  }

  /**
   * The hub lets go of it: the session ended (after `exit`: the output before it is still
   * matched), was purged, a replay failed after saying why, or the watch fell further behind
   * the output than any client may (MAX_CLIENT_LAG_BYTES: its pattern is too slow for it).
   */
  close(code: number): void {
    if (code === CloseCode.SessionEnded && this.exitAt !== null) return;
    if (code === CloseCode.SlowConsumer) {
      const message = `expect fell too far behind the output (searched to ${this.searched}): its pattern is too slow for it`;
      return this.finish(fail("QUOTA_EXCEEDED", message, 1));
    }
    this.finish(fail("NOT_FOUND", "the session is gone"));
  }

  private finish(result: ExpectResult | Failure): void {
    if (this.closed) return;
    this.closed = true;
    this.draining = false;
    clearTimeout(this.timer);
    if (this.nextTurn !== undefined) clearTimeout(this.nextTurn);
    this.nextTurn = undefined;
    this.pending = [];
    this.pendingBytes = 0;
    this.lagWaiter = undefined;
    this.settle(result);
    this.onOver(this);
  }

  private matcherAt(offset: number): ExpectMatcher {
    const { pattern, literal, flags } = this.request;
    return new ExpectMatcher({ pattern, literal, flags, from: offset });
  }
}
