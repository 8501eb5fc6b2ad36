// asciicast v2 (the format asciinema records and plays), written from a session's output log
// (docs/protocol.md §3, "Recordings"): a header line, then one JSON array per line:
// `[seconds, "o", text]` for output at the time the runner read it, `[seconds, "r", "COLSxROWS"]`
// where the terminal's size changed. Pure: the session object streams it (worker/link/recording.ts).
//
// `o` text is the chunk's bytes decoded as UTF-8, one streaming decoder per stream (stdout and
// stderr chunks interleave, and each is cut on its own character boundaries), so the `o`
// events, concatenated and encoded again, are exactly the output's bytes; the only exception is
// bytes that are not UTF-8 at all, which come out as U+FFFD (JSON strings cannot hold them).
import type { ChunkMeta, OutputStream } from "./protocol.js";

// shared/ compiles without the DOM library; TextDecoder is in every runtime this code runs in.
declare const TextDecoder: new (label: "utf-8") => { decode(bytes?: Uint8Array, options?: { stream: boolean }): string };
type Utf8Decoder = InstanceType<typeof TextDecoder>;

export interface CastSession {
  /** When the session was created (ms since epoch): the header's timestamp, and time 0 of events. */
  createdAt: number;
  /** Its size, for the header when the log does not say (pipes, or entries without a size). */
  cols: number;
  rows: number;
}

export class AsciicastEncoder {
  private readonly decoders: Record<OutputStream, Utf8Decoder> = {
    stdout: new TextDecoder("utf-8"),
    stderr: new TextDecoder("utf-8"),
  };
  private headerDone = false;
  /** Seconds of the last event: times never go back. */
  private time = 0;
  private size: { cols: number; rows: number } | undefined;

  constructor(private readonly session: CastSession) {}

  /** Lines for one chunk of output, in order (the header first, if it is still due). */
  chunk(data: Uint8Array, meta: ChunkMeta): string {
    let lines = "";
    const hasSize = meta.cols > 0 && meta.rows > 0;
    if (!this.headerDone) lines += this.header(hasSize ? meta : this.session);
    else if (hasSize && (meta.cols !== this.size?.cols || meta.rows !== this.size?.rows)) {
      lines += line([this.at(meta.at), "r", `${meta.cols}x${meta.rows}`]);
    }
    if (hasSize) this.size = { cols: meta.cols, rows: meta.rows };
    const text = this.decoders[meta.stream].decode(data, { stream: true });
    if (text.length > 0) lines += line([this.at(meta.at), "o", text]);
    return lines;
  }

  /** The rest: the header if no output came, and whatever a decoder still held. */
  end(): string {
    let lines = this.headerDone ? "" : this.header(this.session);
    for (const decoder of Object.values(this.decoders)) {
      const text = decoder.decode();
      if (text.length > 0) lines += line([this.time, "o", text]);
    }
    return lines;
  }

  private header(size: { cols: number; rows: number }): string {
    this.headerDone = true;
    this.size = { cols: size.cols, rows: size.rows };
    return `${JSON.stringify({
      version: 2,
      width: size.cols,
      height: size.rows,
      timestamp: Math.floor(this.session.createdAt / 1000),
    })}\n`;
  }

  /** Seconds since the session's start, to the microsecond; a time the log lacks (0) or one earlier than the last is the last. */
  private at(readAt: number): number {
    if (readAt > 0) this.time = Math.max(this.time, Math.round((readAt - this.session.createdAt) * 1000) / 1e6);
    return this.time;
  }
}

function line(event: [number, "o" | "r", string]): string {
  return `${JSON.stringify(event)}\n`;
}
