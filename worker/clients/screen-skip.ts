// The screen instead of history (docs/protocol.md §5, "The screen instead of history"):
// `from=screen` joins with the current screen, then output from the screen's offset on; a
// framed client with `onLag=screen` that falls too far behind skips ahead to the current screen
// instead of being cut. Owns which clients are waiting for their screen; the hub
// (client-hub.ts) wires it with a ScreenPort.
import type { ScreenSnapshot } from "../../shared/agent.js";
import type { Failure } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { ReplayFrom } from "./replays.js";
import { SocketSubscriber, type Subscriber } from "./subscribers.js";

export class ScreenSkip {
  /** Lagging `onLag=screen` clients whose screen is on its way: they get no output meanwhile. */
  private readonly skipping = new Set<Subscriber>();

  constructor(private readonly port: ScreenPort) {}

  /**
   * from=screen: the current screen (the host's emulator, or rebuilt from the log), then output
   * from the screen's offset on, as a replay from there. If no screen can be had, the client
   * replays everything retained instead, as if it had not asked.
   */
  join(sub: Subscriber): void {
    void this.port.screen().then((screen) => {
      if (sub.closed) return;
      if ("failure" in screen) {
        log.warn("client.screen", { key: this.port.keyForLog(), outcome: screen.failure.code, message: screen.failure.message });
        return this.port.replay(sub, "retained");
      }
      this.show(sub, screen);
      this.port.replay(sub, screen.offset);
    });
  }

  /**
   * A framed client too far behind that asked for onLag=screen: it gets no more output until
   * the current screen has come, then `gap` for what it skipped, the screen, and output from
   * the screen's offset.
   */
  skip(sub: SocketSubscriber): void {
    if (this.skipping.has(sub)) return;
    log.info("client.skip", { key: this.port.keyForLog(), cursor: sub.cursor, lag: sub.lag() });
    this.skipping.add(sub);
    this.port.giveUpReplay(sub);
    sub.live = false;
    const skippedFrom = sub.cursor;
    void this.port.screen().then((screen) => {
      this.skipping.delete(sub);
      if (sub.closed) return;
      if ("failure" in screen) {
        log.warn("client.screen", { key: this.port.keyForLog(), outcome: screen.failure.code, message: screen.failure.message });
        return this.port.cut(sub);
      }
      if (screen.offset > skippedFrom) sub.control({ type: "gap", from: skippedFrom, to: screen.offset });
      sub.screen(screen);
      sub.skippedTo(screen.offset);
      sub.persist();
      // Nothing more goes to it until it has taken the screen (acked its offset): a client that
      // stays paused is not sent output it would only skip again.
      sub.whenLagAtMost(0, () => this.port.replay(sub, screen.offset));
    });
  }

  /** Sends the screen to a client that joins with it; its lag counts from the screen's offset. */
  private show(sub: Subscriber, screen: ScreenSnapshot): void {
    sub.screen(screen);
    if (sub instanceof SocketSubscriber) {
      sub.skippedTo(screen.offset);
      sub.acked = screen.offset;
      sub.persist();
    } else sub.cursor = screen.offset;
  }
}

// ---- Shared types ----

/** What the screen skip needs from the hub; callbacks, so it never holds the hub or the session. */
export interface ScreenPort {
  /** The screen now (from the host's emulator, or rebuilt from the log). */
  screen(): Promise<ScreenSnapshot | Failure>;
  /** Replays to the subscriber from `from`, then live output (replays.ts). */
  replay(sub: Subscriber, from: ReplayFrom): void;
  /** The subscriber's replay stops and goes no further. */
  giveUpReplay(sub: Subscriber): void;
  /** Cuts a slow client (no screen could be had for it). */
  cut(sub: Subscriber): void;
  keyForLog(): string | null;
}
