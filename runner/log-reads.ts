// Answers the edge's `read` requests from the output log: ReadChunk frames and `read_gap`
// messages covering the range in order, then `read_end`. Who reads the log for replay is
// always a runner: the session's host while it has one, otherwise any runner the pool picks
// (with Redis every runner sees every log).
import { log } from "../shared/log.js";
import { type EdgeLinkMessage, type RunnerLinkMessage, encodeReadChunk } from "../shared/protocol.js";
import type { OutputLog } from "./output-log.js";

type ReadRequest = Extract<EdgeLinkMessage, { type: "read" }>;

/** Chunk data fetched from the log per round trip. */
const PIECE_BYTES = 1 << 20;

export async function serveRead(
  outputLog: OutputLog,
  key: string,
  request: ReadRequest,
  send: (frame: string | Uint8Array) => boolean,
): Promise<void> {
  const { id, from, to } = request;
  const message = (m: RunnerLinkMessage) => send(JSON.stringify(m));
  let cursor = from;
  try {
    while (cursor < to) {
      const items = await outputLog.read(key, cursor, to, PIECE_BYTES);
      if (items.length === 0) break;
      for (const item of items) {
        if (item.type === "chunk") {
          if (!send(encodeReadChunk(id, item.offset, item.data))) return;
          cursor = item.offset + item.data.byteLength;
        } else {
          if (!message({ type: "read_gap", id, from: item.from, to: item.to })) return;
          cursor = item.to;
        }
      }
    }
    message({ type: "read_end", id, to: cursor });
  } catch (error) {
    log.warn("log.read", { key, from, to, error });
    message({ type: "read_end", id, to: cursor, error: "the output log could not be read" });
  }
}
