// The fifo pairs egress sessions' networks talk to their sandboxes through (network.ts: "info"
// from the sandbox, "go" to it). Node cannot make a fifo, so each takes a `mkfifo` process: made
// while a session waits, that spawn blocked the runner's event loop for a few ms of every egress
// start (docs/benchmarks.md, issue 26). The stock makes them ahead, many at a time with one
// `mkfifo` (starting a process blocks the event loop too, so a refill is rare: once the stock is
// down to a quarter, and after the taking session's own spawn), and a session takes a pair
// already made; an empty stock (a burst of starts) makes one pair at once as before. Each pair is in a folder of its own, 0700,
// in the run's root-only sandbox folder, used by one session and removed with it (never reused).
import { execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { log } from "../../shared/log.js";
import { ROOT_ENV } from "./launch.js";

/** One session's fifos, in their own folder. */
export interface FifoPair {
  folder: string;
  info: string;
  go: string;
}

/** How many pairs are kept made ahead: bounded, a refill makes them all with one `mkfifo`. */
export const FIFO_STOCK = 16;

export class FifoStock {
  private readonly ready: FifoPair[] = [];
  private refilling = false;
  private closed = false;
  /** Called after each background refill (tests wait on it). */
  onRefilled: (() => void) | null = null;

  constructor(
    /** the run's root-only folder the pairs' folders are made in */
    private readonly runFolder: string,
    private readonly mkfifo: string,
    private readonly size = FIFO_STOCK,
  ) {}

  /** How many pairs are made and waiting. */
  get stocked(): number {
    return this.ready.length;
  }

  /**
   * A pair for one session, made ahead when the stock has one, else now. A stock down to a
   * quarter refills once the caller's turn of the event loop (the session's spawn) is done.
   */
  take(): FifoPair {
    const pair = this.ready.shift() ?? this.makeNow();
    if (this.ready.length <= this.size / 4) setImmediate(() => this.refill());
    return pair;
  }

  /** Removes the pairs not taken; takes after this make theirs at once and keep none. */
  close(): void {
    this.closed = true;
    for (const pair of this.ready.splice(0)) rmSync(pair.folder, { recursive: true, force: true });
  }

  /** Fills the stock up in the background: one `mkfifo` for every missing pair. */
  refill(): void {
    if (this.refilling || this.closed) return;
    const pairs: FifoPair[] = [];
    for (let i = this.ready.length; i < this.size; i++) pairs.push(this.folderFor());
    if (pairs.length === 0) return;
    this.refilling = true;
    execFile(this.mkfifo, ["-m", "600", ...pairs.flatMap((p) => [p.info, p.go])], { env: { ...ROOT_ENV } }, (error) => {
      this.refilling = false;
      if (error || this.closed) {
        for (const pair of pairs) rmSync(pair.folder, { recursive: true, force: true });
        if (error) log.warn("session.fifos", { outcome: "refill_failed", error: error.message });
      } else {
        this.ready.push(...pairs);
      }
      this.onRefilled?.();
    });
  }

  private makeNow(): FifoPair {
    const pair = this.folderFor();
    try {
      execFileSync(this.mkfifo, ["-m", "600", pair.info, pair.go], { env: { ...ROOT_ENV } });
    } catch (error) {
      rmSync(pair.folder, { recursive: true, force: true });
      throw error;
    }
    return pair;
  }

  /** A new folder (opaque name: it names no tenant or session) and its pair's paths. */
  private folderFor(): FifoPair {
    const folder = join(this.runFolder, randomBytes(8).toString("hex"));
    mkdirSync(folder, { mode: 0o700 });
    return { folder, info: join(folder, "info"), go: join(folder, "go") };
  }
}
