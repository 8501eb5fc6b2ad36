// Who has paused a session's process: its output waits for the edge (delivery.ts) or for the
// screen's emulator (runner/agent/screen.ts). The process reads again only when no reason is left,
// so one never resumes what the other paused.
export class PauseReasons<Reason extends string> {
  private readonly reasons = new Set<Reason>();

  constructor(private readonly target: { pause(): void; resume(): void }) {}

  get paused(): boolean {
    return this.reasons.size > 0;
  }

  pause(reason: Reason): void {
    if (this.reasons.has(reason)) return;
    this.reasons.add(reason);
    if (this.reasons.size === 1) this.target.pause();
  }

  resume(reason: Reason): void {
    if (!this.reasons.delete(reason)) return;
    if (this.reasons.size === 0) this.target.resume();
  }
}
