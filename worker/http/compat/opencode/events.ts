// `GET /compat/opencode/event`: the tenant's lifecycle events (`/v1/events`, served by the
// tenant's object) as OpenCode publishes them on its bus: `server.connected` first, then
// `pty.created`, `pty.updated`, `pty.exited` and `pty.deleted`, each `data: {"id", "type",
// "properties"}`. Every event keeps its `id:` (the tenant's sequence number), so a client that
// reconnects with `Last-Event-ID` (the SDK does) misses nothing. docs/protocol.md,
// "Compatibility: OpenCode", "Events".
import type { TenantEvent } from "../../../../shared/session.js";
import { toPty, exitCodeOf } from "./pty.js";

const encoder = new TextEncoder();

/** OpenCode's form of one ptybroker lifecycle event (its `data:`). */
export function openCodeEvent(id: string, event: TenantEvent): Record<string, unknown> | null {
  const session = event.session;
  switch (event.type) {
    case "session.created":
      return { id, type: "pty.created", properties: { info: toPty(session) } };
    case "session.updated":
      return { id, type: "pty.updated", properties: { info: toPty(session) } };
    case "session.exited":
      return { id, type: "pty.exited", properties: { id: session.id, exitCode: exitCodeOf(session) } };
    case "session.deleted":
      return { id, type: "pty.deleted", properties: { id: session.id } };
    default:
      return null;
  }
}

/** One SSE block (the lines between blank lines) in OpenCode's form; comments and ids pass as they are. */
export function translateBlock(block: string): string {
  let id: string | undefined;
  let type: string | undefined;
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("id:")) id = line.slice(3).trim();
    else if (line.startsWith("event:")) type = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  const idLine = id === undefined ? "" : `id: ${id}\n`;
  if (type === undefined && data.length === 0) return `${block}\n\n`; // a comment (keep-alive)
  if (type?.startsWith("session.") && id !== undefined) {
    const translated = openCodeEvent(id, JSON.parse(data.join("\n")) as TenantEvent);
    if (translated) return `${idLine}data: ${JSON.stringify(translated)}\n\n`;
  }
  // gap (events trimmed before a resume) and cut (a stream that fell too far behind, which ends
  // here and is resumed from its id): no OpenCode event says so; a comment does, with the id.
  return `${idLine}: ${type ?? "event"} ${data.join(" ")}\n\n`;
}

/** The tenant's event stream, translated block by block as it flows (a block is never split). */
export function translateStream(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const decoder = new TextDecoder();
  let pending = "";
  const connected = { id: "connected", type: "server.connected", properties: {} };
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode(`data: ${JSON.stringify(connected)}\n\n`));
      },
      transform(chunk, controller) {
        pending += decoder.decode(chunk, { stream: true });
        let end = pending.indexOf("\n\n");
        while (end >= 0) {
          const block = pending.slice(0, end);
          pending = pending.slice(end + 2);
          if (block) controller.enqueue(encoder.encode(translateBlock(block)));
          end = pending.indexOf("\n\n");
        }
      },
    }),
  );
}
