// `POST .../expect` (docs/protocol.md §3, "Agents"): a wait for a pattern in the session's
// output from an offset. It rides the client hub as a subscriber that is not a client (it holds
// no slot and keeps no session attached): the hub replays the log from `from` and then hands it
// live output, with the same no-gap, no-overlap switch-over as any client, so output that came
// before the request is matched and nothing is seen twice. It holds only the matcher's window,
// never the history. Output inside a shell's command line (OSC 133 B…C, prompt-marks.ts) is
// skipped: the echo of what was typed is not output to wait for.
import type { ExpectResult } from "../../shared/agent.js";
import { type ErrorCode, type Failure, fail } from "../../shared/errors.js";
import type { ServerMessage } from "../../shared/protocol.js";
import { ExpectMatcher } from "../../shared/expect-matcher.js";
import { ShellMarkScanner } from "../../shared/shell-marks.js";
import type { Subscriber } from "../clients/subscribers.js";
import type { ExpectQuery } from "../rpc.js";

/** Output is matched in slices of this size, so one 4 MiB replay read never becomes 4 MiB of text at once. */
const SLICE_BYTES = 64 << 10;

export interface ExpectRequest extends Omit<ExpectQuery, "from"> {
  from: number;
  /** `from` lies inside a command line (after a B mark, before the next mark). */
  inCommandLine: boolean;
}

export class ExpectWatch implements Subscriber {
  readonly kind = "watch" as const;
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

  constructor(
    private readonly request: ExpectRequest,
    /** Called once the watch is over, so the hub lets go of it. */
    private readonly onOver: (watch: ExpectWatch) => void,
  ) {
    this.cursor = request.from;
    this.matcher = this.matcherAt(request.from);
    this.marks = new ShellMarkScanner(request.from);
    this.inCommandLine = request.inCommandLine;
    this.result = new Promise((resolve) => {
      this.settle = resolve;
    });
    this.timer = setTimeout(() => this.finish({ matched: false, reason: "timeout", offset: this.cursor }), request.timeoutMs);
  }

  /** Output in order; the parts outside command lines go to the matcher. */
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
      if (!this.inCommandLine) this.match(offset, data, at, Math.max(at, mark.end));
      at = Math.max(at, mark.end);
      this.inCommandLine = mark.kind === "B";
    }
    if (!this.inCommandLine) this.match(offset, data, at, end);
    this.cursor = end;
  }

  /** Matches output [from, to) of `data` (at `offset`); what was skipped before it restarts the matcher. */
  private match(offset: number, data: Uint8Array, from: number, to: number): void {
    if (from > this.matcher.offset) this.matcher = this.matcherAt(from);
    for (let at = from; at < to && !this.closed; at += SLICE_BYTES) {
      const slice = data.subarray(at - offset, Math.min(to, at + SLICE_BYTES) - offset);
      const found = this.matcher.push(at, slice);
      this.cursor = at + slice.byteLength;
      if (found) this.finish({ matched: true, ...found });
    }
  }

  control(message: ServerMessage): void {
    if (message.type === "exit") this.finish({ matched: false, reason: "exited", offset: message.offset });
    else if (message.type === "error") this.finish(fail(message.code as ErrorCode, message.message));
  }

  lag(): number {
    return 0;
  }

  whenLagAtMost(_bytes: number, resume: () => void): void {
    resume();
  }

  screen(): void {
    // A watch starts at an offset, never at the screen.
  }

  /** The hub lets go of it (the session was purged, or a replay failed after saying why). */
  close(): void {
    this.finish(fail("NOT_FOUND", "the session is gone"));
  }

  private finish(result: ExpectResult | Failure): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.settle(result);
    this.onOver(this);
  }

  private matcherAt(offset: number): ExpectMatcher {
    const { pattern, literal, flags } = this.request;
    return new ExpectMatcher({ pattern, literal, flags, from: offset });
  }
}
