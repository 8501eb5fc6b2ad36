// One Pty's output as async iterators (`for await (const chunk of pty)`): every iterator gets each
// chunk from when it starts, and the first one also what came before it (up to 4 MiB), so
// `for await` right after `create` misses nothing. The Pty (pty.ts) pushes each chunk, and null
// for the end.

/** Output kept for an iterator that has not started yet (see `Pty[Symbol.asyncIterator]`). */
const PRELUDE_BYTES = 4 * 1024 * 1024;

export class OutputChunks {
  private readonly consumers = new Set<(chunk: Uint8Array | null) => void>();
  private prelude: Uint8Array[] | null = [];
  private preludeBytes = 0;

  /** A chunk for every iterator (null: the output ended), kept for the first until it starts. */
  push(chunk: Uint8Array | null): void {
    if (this.prelude) {
      if (chunk && this.preludeBytes + chunk.byteLength <= PRELUDE_BYTES) {
        this.prelude.push(chunk);
        this.preludeBytes += chunk.byteLength;
      }
    }
    for (const consumer of this.consumers) consumer(chunk);
  }

  /** Chunks until the end; `closed` (asked when the iterator starts) says whether it came already. */
  async *iterate(closed: () => boolean): AsyncGenerator<Uint8Array> {
    const queue: (Uint8Array | null)[] = this.prelude ?? [];
    this.preludeBytes = 0;
    this.prelude = null;
    if (closed()) queue.push(null);
    let wake: (() => void) | undefined;
    const consumer = (chunk: Uint8Array | null) => {
      queue.push(chunk);
      wake?.();
    };
    this.consumers.add(consumer);
    try {
      for (;;) {
        const chunk = queue.shift();
        if (chunk === null) return;
        if (chunk) yield chunk;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      this.consumers.delete(consumer);
    }
  }
}
