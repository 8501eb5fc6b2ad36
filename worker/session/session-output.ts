// A session's output at the edge: output as the host link delivers it, at the edge's offset
// (fanned out to the clients, kept for exec, scanned for prompt marks, then the offset moves
// on), and output read back from the log: `GET .../output`, exec's answer and recordings. Owns
// exec's capture (output-capture.ts), the waits for the output to reach an offset (run's
// answer) and the output reads in flight (link/output-reads.ts); the session object wires it
// with the record, its log reads and an OutputArrivalPort.
import type { Failure } from "../../shared/errors.js";
import type { OutputStream } from "../../shared/protocol.js";
import type { LogReads } from "../link/log-reads.js";
import { OutputReads } from "../link/output-reads.js";
import { recordingResponse } from "../link/recording.js";
import type { OutputRange, StreamsRange } from "../rpc.js";
import { OutputCapture } from "./output-capture.js";
import type { RecordFields, SessionRecord } from "./session-record.js";
import { settleWithin } from "./settle.js";

export class SessionOutput {
  /** exec: the first bytes of output, kept while the exec route waits for the exit. */
  private capture: OutputCapture | undefined;
  /** Callers waiting for the output to reach an offset (run's answer). */
  private readonly offsetWaiters = new Set<{ offset: number; resolve: () => void }>();
  private readonly outputReads: OutputReads;

  constructor(
    private readonly record: SessionRecord,
    private readonly reads: LogReads,
    private readonly port: OutputArrivalPort,
  ) {
    this.outputReads = new OutputReads(reads, {
      offset: () => record.offset,
      retainedFrom: () => record.retainedFrom,
      noteLeadingGap: (from, to) => record.noteLeadingGap(from, to),
    });
  }

  /** exec: the first `maxBytes` of output are kept in memory for its answer. */
  startCapture(maxBytes: number): void {
    this.capture = new OutputCapture(maxBytes);
  }

  /**
   * Output at the edge's offset: fanned out before the offset moves, since clients restored
   * from hibernation by this very frame take the offset as where they stand. The bytes are in
   * the log already (the runner appends before it sends), so clients need not wait for a
   * write: the offset is stored with the next ack, and an edge that restarts before that
   * resumes from the stored offset while the runner, which drops only acknowledged output,
   * sends the rest again.
   */
  arrived(offset: number, data: Uint8Array, stream: OutputStream, frame: ArrayBuffer | undefined): void {
    this.port.fanOut(offset, data, stream, frame);
    this.capture?.take(offset, data, stream);
    if (this.record.isTty) this.port.marks(offset, data);
    this.record.advance(offset + data.byteLength);
    for (const waiter of this.offsetWaiters) if (waiter.offset <= this.record.offset) waiter.resolve();
    this.port.noteActivity(Date.now());
  }

  /** Resolves once the edge's offset is at least `offset`, or after `timeoutMs`. */
  reached(offset: number, timeoutMs: number): Promise<void> {
    if (this.record.offset >= offset) return Promise.resolve();
    let waiter: { offset: number; resolve: () => void } | undefined;
    return settleWithin<void>(timeoutMs, undefined, (resolve) => {
      waiter = { offset, resolve };
      this.offsetWaiters.add(waiter);
    }).finally(() => {
      if (waiter) this.offsetWaiters.delete(waiter);
    });
  }

  /** `GET .../output` (link/output-reads.ts). */
  read(from: number | undefined, to: number | undefined, stream?: OutputStream): Promise<OutputRange | Failure> {
    return this.outputReads.read(from, to, this.port.maxOutputReads(), stream);
  }

  /** exec's answer: the first `maxBytes` of the output, stdout and stderr apart (captured as it came, else read). */
  streams(maxBytes: number): Promise<StreamsRange | Failure> {
    const captured = this.record.ended ? this.capture?.result(maxBytes) : undefined;
    this.capture = undefined;
    if (captured) return Promise.resolve(captured);
    return this.outputReads.readStreams(maxBytes, this.port.maxOutputReads());
  }

  /** `GET .../recording` of [from, to) of the session `stored` (link/recording.ts). */
  recording(from: number | undefined, to: number | undefined, stored: Pick<RecordFields, "createdAt" | "cols" | "rows">): Response {
    const range = this.outputReads.clamp(from, to);
    const { createdAt, cols, rows } = stored;
    return recordingResponse(this.reads, { from: range.start, to: range.end }, { createdAt: Date.parse(createdAt), cols, rows });
  }
}

// ---- Shared types ----

/** What the output needs from its session; callbacks, so it never holds the session object. */
export interface OutputArrivalPort {
  /** Live output to every client (clients/client-hub.ts). */
  fanOut(offset: number, data: Uint8Array, stream: OutputStream, frame: ArrayBuffer | undefined): void;
  /** A terminal's output, scanned for the shell's prompt marks (agent/prompt-marks.ts). */
  marks(offset: number, data: Uint8Array): void;
  noteActivity(now: number): void;
  /** `GET .../output` reads in flight per session (MAX_OUTPUT_READS). */
  maxOutputReads(): number;
}
