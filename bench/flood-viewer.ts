// Row 17's flooding session A, seen by its viewer in a process of its own: A's viewer and B's
// typist are different people on different machines, so A's output (tens of MB/s to decode,
// inflate and scan) must not run on the thread that times B's echoes. Started by
// measures.ts (floodNeighbourEcho) with `fork`; talks to it over IPC:
//   parent → child: {type: "mark"} → {type: "received", bytes}; {type: "stop"} → Ctrl+C, the
//   prompt back, {type: "stopped"}, exit.
//   child → parent: {type: "flooding"} once `yes` runs; {type: "error", message} on a failure.
import { settle, stackTerm, waitForMarker } from "./terminals.js";

export type ViewerRequest = { type: "mark" } | { type: "stop" };
export type ViewerReport =
  | { type: "flooding" }
  | { type: "received"; bytes: number }
  | { type: "stopped" }
  | { type: "error"; message: string };

const [url, apiKey, sessionId] = process.argv.slice(2);
const report = (message: ViewerReport) => process.send?.(message);

async function main(): Promise<void> {
  if (!url || !apiKey || !sessionId) throw new Error("usage: flood-viewer.ts <url> <apiKey> <sessionId>");
  const term = await stackTerm({ url, apiKey }, sessionId);
  await settle(term, "PS1='PROMPT-$((6*7))> '");
  const line = `${"x".repeat(99)}\r\n`;
  const flooding = waitForMarker(term, line.repeat(64), 30_000);
  term.send(`yes ${"x".repeat(99)}\r`);
  await flooding;
  report({ type: "flooding" });
  process.on("message", (request: ViewerRequest) => {
    if (request.type === "mark") return report({ type: "received", bytes: term.received });
    const prompt = waitForMarker(term, "PROMPT-42> ", 60_000);
    term.send("\x03");
    void prompt
      .then(() => term.close())
      .then(() => {
        report({ type: "stopped" });
        process.disconnect();
      }, fail);
  });
}

function fail(error: unknown): void {
  report({ type: "error", message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
  process.disconnect();
}

main().catch(fail);
