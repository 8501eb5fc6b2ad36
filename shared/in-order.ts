// Steps run in the order they were queued, some of them known only later (a frame still being
// compressed or inflated): a step that is ready waits for every step queued before it. The edge
// sends a compressing viewer's messages this way (worker/clients/deflate.ts, DeflateOutbox), and
// the SDK hands on a socket's messages while a 0x06 frame inflates (client/pty-inflate.ts).
// Web APIs only: the Worker, Node and browsers import it.

type Step = () => void;

interface Entry {
  /** The step, once known; `undefined` after it is known means nothing to run. */
  step?: Step | undefined;
  known: boolean;
}

export class InOrder {
  private readonly queue: Entry[] = [];
  private drainedHooks: Step[] = [];

  /** Steps waiting (one still unknown, and those behind it). */
  get size(): number {
    return this.queue.length;
  }

  /** Runs `step` now if nothing waits, else after everything queued before it. */
  now(step: Step): void {
    if (this.queue.length === 0) step();
    else this.queue.push({ step, known: true });
  }

  /** Runs the step `pending` resolves to after everything queued before it (`undefined`: none). `pending` must not reject. */
  later(pending: Promise<Step | undefined>): void {
    const entry: Entry = { known: false };
    this.queue.push(entry);
    void pending.then((step) => {
      entry.step = step;
      entry.known = true;
      this.pump();
    });
  }

  /** Runs `then` once every step queued so far has run: at once when none waits. */
  whenDrained(then: Step): void {
    if (this.queue.length === 0) then();
    else this.drainedHooks.push(then);
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0];
      if (!head?.known) return;
      this.queue.shift();
      head.step?.();
    }
    const hooks = this.drainedHooks;
    this.drainedHooks = [];
    for (const hook of hooks) hook();
  }
}
