// `ptybroker events`: the tenant's session lifecycle as it happens (docs/protocol.md §3, "Events"),
// one line each, until Ctrl+C or a reader that went away.
import { parseArgs } from "node:util";
import { broker, UsageError, write } from "./common.js";

export async function events(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { after: { type: "string" }, json: { type: "boolean" } },
  });
  if (positionals.length) throw new UsageError("events takes no arguments");
  if (values.after !== undefined && !/^\d+$/.test(values.after)) {
    throw new UsageError(`--after takes an event id, got ${JSON.stringify(values.after)}`);
  }
  const after = values.after === undefined ? undefined : Number(values.after);
  const note = (text: string) => process.stderr.write(`[ptybroker: ${text}]\n`);
  // Ctrl+C (or a reader that went away: `ptybroker events | head`) ends it, as a success.
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") stop.abort();
  });
  let watching = false;
  let lostAt: number | undefined;
  const stream = broker().events({
    after,
    signal: stop.signal,
    onState: (state, error) => {
      if (state === "open") {
        if (!watching) note(after === undefined ? "watching events" : `watching events after ${after}`);
        else if (lostAt !== undefined) note(`reconnected after ${Date.now() - lostAt} ms`);
        watching = true;
        lostAt = undefined;
      } else if (error && state !== "closed" && lostAt === undefined) {
        lostAt = Date.now();
        note(`${watching ? "connection lost" : "cannot connect"} (${error.message}); retrying…`);
      }
    },
  });
  for await (const event of stream) {
    if (stop.signal.aborted) break;
    if (values.json) await write(new TextEncoder().encode(`${JSON.stringify(event)}\n`));
    else if (event.type === "gap") note(`events ${event.from}..${event.to - 1} are no longer kept`);
    else {
      const { id, status, reason } = event.session;
      await write(new TextEncoder().encode(`${[event.id, event.type, id, status, reason ?? ""].join(" ").trimEnd()}\n`));
    }
  }
  return 0;
}
