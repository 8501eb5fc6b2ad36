// A screen rebuilt from the output log (a session with no live emulator: ended, or its runner
// gone; runner/link/reader-link.ts): a fresh TerminalScreen (screen.ts) fed the log in order.
import type { ScreenSnapshot } from "../../shared/agent.js";
import type { OutputLog } from "../log/output-log.js";
import { withLogSlot } from "../log/log-reads.js";
import { TerminalScreen } from "./screen.js";

/** Log data fed to a rebuilt screen per round trip (and parsed before the next is read). */
const REBUILD_PIECE_BYTES = 1 << 20;

const EMPTY = new Uint8Array(0);

/**
 * The screen as the log's [from, to) draws it on a fresh terminal of cols × rows (a session with
 * no live emulator: ended, or its runner gone). Read a piece at a time, each parsed before the
 * next is read; gaps draw nothing. The snapshot's offset is where the log's data ended.
 */
export async function rebuildScreen(
  outputLog: OutputLog,
  key: string,
  range: { from: number; to: number; cols: number; rows: number },
): Promise<ScreenSnapshot> {
  const { from, to, cols, rows } = range;
  const screen = new TerminalScreen({ cols, rows, offset: from });
  try {
    let cursor = from;
    while (cursor < to) {
      const items = await withLogSlot(() => outputLog.read(key, cursor, to, REBUILD_PIECE_BYTES));
      if (items.length === 0) break;
      for (const item of items) {
        if (item.type === "chunk") {
          screen.write(item.offset, item.data);
          cursor = item.offset + item.data.byteLength;
        } else {
          screen.write(item.to, EMPTY);
          cursor = item.to;
        }
      }
      await screen.parsed();
    }
    return await screen.snapshot();
  } finally {
    screen.dispose();
  }
}
