// exec's output, kept in the session object as it arrives: the first `maxBytes` bytes, stdout
// and stderr apart. The exec route waits on the object for the exit, so the object stays in
// memory and answers from here without reading the log back through a runner (the host link
// has closed by then, and a reader link would have to be summoned). Should the object have
// restarted meanwhile, nothing is captured and the answer is read from the log instead.
import type { OutputStream } from "../../shared/protocol.js";
import { concat } from "../link/output-reads.js";
import type { StreamsRange } from "../rpc.js";

export class OutputCapture {
  private readonly parts: Record<OutputStream, Uint8Array[]> = { stdout: [], stderr: [] };
  /** Offset of the next byte expected; output never skips, so a mismatch means a hole. */
  private end = 0;
  private broken = false;

  constructor(readonly maxBytes: number) {}

  /** Live output at `offset`, in order. */
  take(offset: number, data: Uint8Array, stream: OutputStream): void {
    if (this.broken || this.end >= this.maxBytes) return;
    if (offset !== this.end) {
      this.broken = true;
      return;
    }
    const part = data.subarray(0, this.maxBytes - this.end);
    this.parts[stream].push(part.slice());
    this.end += part.byteLength;
  }

  /** The first min(maxBytes, output) bytes from offset 0, or undefined if a hole was seen. */
  result(maxBytes: number): StreamsRange | undefined {
    if (this.broken || maxBytes !== this.maxBytes) return undefined;
    return { from: 0, to: this.end, stdout: concat(this.parts.stdout), stderr: concat(this.parts.stderr) };
  }
}
