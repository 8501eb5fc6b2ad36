// `GET .../recording` (docs/protocol.md §3, "Recordings"): the session's output as asciicast v2
// (shared/asciicast.ts), read from the log a piece at a time as the client takes the body, so an
// 8 MiB log is never held whole. History the log no longer holds (trimmed) is left out; a read
// that fails midway ends the body with an error (the status has gone out already).
import { type CastSession, AsciicastEncoder } from "../../shared/asciicast.js";
import type { LogReads } from "./log-reads.js";

/** Log bytes read per pull of the body. */
const PIECE_BYTES = 1 << 20;

export function recordingResponse(reads: LogReads, range: { from: number; to: number }, session: CastSession): Response {
  const cast = new AsciicastEncoder(session);
  const utf8 = new TextEncoder();
  let cursor = range.from;
  let reading: number | undefined;
  const body = new ReadableStream<Uint8Array>(
    {
      pull: (controller) =>
        new Promise<void>((resolve) => {
          if (cursor >= range.to) {
            const rest = cast.end();
            if (rest) controller.enqueue(utf8.encode(rest));
            controller.close();
            return resolve();
          }
          const start = cursor;
          let lines = "";
          reading = reads.read(cursor, Math.min(range.to, cursor + PIECE_BYTES), {
            onChunk: (offset, data, meta) => {
              if (offset + data.byteLength <= cursor) return;
              const part = offset < cursor ? data.subarray(cursor - offset) : data;
              lines += cast.chunk(part, meta);
              cursor = Math.max(offset, cursor) + part.byteLength;
            },
            onGap: (_from, to) => {
              cursor = Math.max(cursor, to);
            },
            onEnd: (to, error) => {
              reading = undefined;
              if (error) {
                controller.error(new Error(`${error.code}: ${error.message}`));
                return resolve();
              }
              // A log that ends before `to` (nothing more is there) ends the recording too.
              cursor = Math.max(cursor, to);
              if (cursor === start) cursor = range.to;
              if (lines) controller.enqueue(utf8.encode(lines));
              resolve();
            },
          });
        }),
      cancel: () => {
        if (reading !== undefined) reads.cancel(reading);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, {
    headers: { "content-type": "application/x-asciicast", "cache-control": "no-store" },
  });
}
