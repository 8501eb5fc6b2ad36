// Row 17's flooding session A, seen by its viewer in a process of its own (children.ts): A's
// viewer and B's typist are different people, so A's output (tens of MB/s to decode, inflate and
// scan) must not run on the thread that times B's echoes. Started by measures.ts
// (floodNeighbourEcho). It types `yes` and reports `flooding`; `mark` → `received` (A's bytes
// so far); `stop` → Ctrl+C, the prompt back, `stopped`, exit.
import { fail, report } from "./children.js";
import { settle, stackTerm, waitForMarker } from "./terminals.js";

export type FloodViewerRequest = { type: "mark" } | { type: "stop" };
export type FloodViewerReport = { type: "flooding" } | { type: "received"; bytes: number } | { type: "stopped" };

const [url, apiKey, sessionId] = process.argv.slice(2);

async function main(): Promise<void> {
  if (!url || !apiKey || !sessionId) throw new Error("usage: flood-viewer.ts <url> <apiKey> <sessionId>");
  const term = await stackTerm({ url, apiKey }, sessionId);
  await settle(term, "PS1='PROMPT-$((6*7))> '");
  const line = `${"x".repeat(99)}\r\n`;
  const flooding = waitForMarker(term, line.repeat(64), 30_000);
  term.send(`yes ${"x".repeat(99)}\r`);
  await flooding;
  report({ type: "flooding" } satisfies FloodViewerReport);
  process.on("message", (request: FloodViewerRequest) => {
    if (request.type === "mark") return report({ type: "received", bytes: term.received } satisfies FloodViewerReport);
    const prompt = waitForMarker(term, "PROMPT-42> ", 60_000);
    term.send("\x03");
    void prompt
      .then(() => term.close())
      .then(() => {
        report({ type: "stopped" } satisfies FloodViewerReport);
        process.disconnect();
      }, fail);
  });
}

main().catch(fail);
