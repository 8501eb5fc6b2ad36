// Bounds the input waiting for a session's process (docs/security.md, "Limits"): a process that
// does not read (raw mode, `sleep`) leaves written bytes queued in node-pty. Past `softBytes` the
// gate tells the edge, which then refuses input (429 on REST, an error on WebSocket) until the
// process has taken all but half of it; past `hardBytes` (input already on its way when the edge
// heard) the runner drops input and says so. The runner's memory stays flat either way.

export interface InputGateOptions {
  softBytes: number;
  hardBytes: number;
  /** How often the queue is looked at while it is full. */
  pollMs?: number;
}

export class InputGate {
  private full = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** Bytes written and not yet taken by the process. */
    private readonly pending: () => number,
    private readonly options: InputGateOptions,
    /** The edge is told when the gate closes (full) and opens again. */
    private readonly report: (full: boolean) => void,
  ) {}

  /** Whether the edge was last told that input is full. */
  get isFull(): boolean {
    return this.full;
  }

  /** Writes `bytes` unless the hard bound would be passed; false when they were dropped. */
  write(bytes: Uint8Array, write: (bytes: Uint8Array) => void): boolean {
    const queued = this.pending();
    if (queued + bytes.byteLength > this.options.hardBytes) {
      this.close();
      return false;
    }
    write(bytes);
    if (queued + bytes.byteLength > this.options.softBytes) this.close();
    return true;
  }

  dispose(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private close(): void {
    if (this.full) return;
    this.full = true;
    this.report(true);
    this.timer = setInterval(() => {
      if (this.pending() > this.options.softBytes / 2) return;
      this.dispose();
      this.full = false;
      this.report(false);
    }, this.options.pollMs ?? 50);
  }
}
