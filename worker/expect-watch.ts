// `POST .../expect` (DESIGN §10): a wait for a pattern in the session's output from an offset.
// It rides the client hub as a subscriber that is not a client (it holds no slot and keeps no
// session attached): the hub replays the log from `from` and then hands it live output, with
// the same no-gap, no-overlap switch-over as any client, so output that came before the request
// is matched and nothing is seen twice. It holds only the matcher's window, never the history.
import type { ExpectResult } from "../shared/agent.js";
import { type ErrorCode, type Failure, fail } from "../shared/errors.js";
import type { ServerMessage } from "../shared/protocol.js";
import { ExpectMatcher } from "../shared/terminal-text.js";
import type { Subscriber } from "./subscribers.js";

/** Output is matched in slices of this size, so one 4 MiB replay read never becomes 4 MiB of text at once. */
const SLICE_BYTES = 64 << 10;

export interface ExpectRequest {
  pattern: string;
  literal: boolean;
  flags: string;
  from: number;
  timeoutMs: number;
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
  private readonly timer: ReturnType<typeof setTimeout>;

  constructor(
    private readonly request: ExpectRequest,
    /** Called once the watch is over, so the hub lets go of it. */
    private readonly onOver: (watch: ExpectWatch) => void,
  ) {
    this.cursor = request.from;
    this.matcher = this.matcherAt(request.from);
    this.result = new Promise((resolve) => {
      this.settle = resolve;
    });
    this.timer = setTimeout(() => this.finish({ matched: false, reason: "timeout", offset: this.cursor }), request.timeoutMs);
  }

  deliver(offset: number, data: Uint8Array): void {
    if (this.closed) return;
    // Trimmed history was skipped (a gap): matching starts again where the output does.
    if (offset > this.matcher.offset) this.matcher = this.matcherAt(offset);
    for (let at = 0; at < data.byteLength && !this.closed; at += SLICE_BYTES) {
      const slice = data.subarray(at, at + SLICE_BYTES);
      const found = this.matcher.push(offset + at, slice);
      this.cursor = offset + at + slice.byteLength;
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
