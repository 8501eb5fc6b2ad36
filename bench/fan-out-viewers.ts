// Row 3's viewers, some in a child process (children.ts): fifty people watching one session sit on
// fifty machines, and fifty viewers decoding in one bench process saturate its one thread (the
// bench, not the fan-out, then sets the pace). Started by measures.ts (fanOut) with the stack,
// the session, how many viewers, `deflate` (1: compress=deflate) and the flood's end marker.
// `ready` once all are connected; `watch` → `watching` (the flood may start), then `done` with
// each viewer's bytes, cuts, wire bytes and when it saw the marker (epoch ms); `close` → `closed`.
import { fail, report } from "./children.js";
import { type BenchTerm, stackTerm, waitForMarker } from "./terminals.js";

export type FanOutRequest = { type: "watch" } | { type: "close" };
export interface ViewerResult {
  bytes: number;
  /** When the end marker arrived: performance.timeOrigin + performance.now(), comparable across processes. */
  atEpochMs: number;
  cuts: number;
  wire: number;
}
export type FanOutReport = { type: "ready" } | { type: "watching" } | { type: "done"; viewers: ViewerResult[] } | { type: "closed" };

const [url, apiKey, sessionId, count, deflate, marker] = process.argv.slice(2);

async function main(): Promise<void> {
  if (!url || !apiKey || !sessionId || !count || !marker) {
    throw new Error("usage: fan-out-viewers.ts <url> <apiKey> <sessionId> <count> <deflate 0|1> <marker>");
  }
  const terms: BenchTerm[] = [];
  for (let i = 0; i < Number(count); i++) terms.push(await stackTerm({ url, apiKey }, sessionId, "live", { deflate: deflate === "1" }));
  report({ type: "ready" } satisfies FanOutReport);
  process.on("message", (request: FanOutRequest) => {
    if (request.type === "close") {
      void Promise.all(terms.map((term) => term.close())).then(() => {
        report({ type: "closed" } satisfies FanOutReport);
        process.disconnect();
      }, fail);
      return;
    }
    const wireBefore = terms.map((term) => term.wireBytes);
    const ends = terms.map((term) => waitForMarker(term, marker, 300_000));
    report({ type: "watching" } satisfies FanOutReport);
    void Promise.all(ends).then((seen) => {
      const viewers = seen.map((end, i): ViewerResult => {
        const term = terms[i] as BenchTerm;
        return { bytes: end.bytes, atEpochMs: performance.timeOrigin + end.at, cuts: term.cuts, wire: term.wireBytes - (wireBefore[i] ?? 0) };
      });
      report({ type: "done", viewers } satisfies FanOutReport);
    }, fail);
  });
}

main().catch(fail);
