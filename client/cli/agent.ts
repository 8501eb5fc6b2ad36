// The agent layer's commands (docs/protocol.md §3, "Agents"): `ptybroker run-cmd` (one command
// line in the session's shell, its exit code as ours), `screen` and `commands`.
import { parseArgs } from "node:util";
import type { CommandRecord } from "../index.js";
import { broker, one, UsageError, write } from "./common.js";
import { TIMED_OUT_STATUS, UNKNOWN_END_STATUS } from "./exit-status.js";

export async function runCmd(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { timeout: { type: "string" }, json: { type: "boolean" } },
  });
  const [id, ...words] = positionals;
  if (!id) throw new UsageError("run-cmd needs a session id and a command: run-cmd <id> -- <command...>");
  if (words.length === 0) throw new UsageError("run-cmd needs a command: run-cmd <id> -- <command...>");
  const timeoutSec = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutSec !== undefined && !(Number.isFinite(timeoutSec) && timeoutSec > 0)) {
    throw new UsageError(`--timeout takes seconds, got ${JSON.stringify(values.timeout)}`);
  }
  // Words are joined with spaces, as ssh does: quote what the remote shell should see whole.
  const command = words.join(" ");
  const b = broker();
  // Ctrl+C interrupts the remote command, as it would in a terminal; a second one gives up
  // waiting and leaves it running.
  let interrupts = 0;
  const onInterrupt = () => {
    if (++interrupts > 1) {
      process.stderr.write(`[ptybroker: stopped waiting; the command may still be running in ${id}]
`);
      process.exit(130);
    }
    b.signal(id, "SIGINT").catch((error: Error) => process.stderr.write(`[ptybroker: SIGINT not delivered: ${error.message}]
`));
  };
  process.on("SIGINT", onInterrupt);
  try {
    const result = await b.run(id, command, { timeoutSec });
    if (values.json) await write(new TextEncoder().encode(`${JSON.stringify(result, null, 2)}
`));
    else await write(new TextEncoder().encode(result.output));
    const note = (text: string) => process.stderr.write(`[ptybroker: ${text}]
`);
    if (result.truncated) {
      note(`output cut at 1 MiB; all of it: ptybroker logs ${id} --from ${result.from} (up to offset ${result.to})`);
    }
    if (result.timedOut) {
      note(`timed out after ${timeoutSec ?? 30} s; the command is still running in ${id}`);
      return TIMED_OUT_STATUS;
    }
    if (result.exitCode === null) {
      note("the shell reported no exit code for the command");
      return UNKNOWN_END_STATUS;
    }
    return result.exitCode;
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}

const SCREEN_FORMATS = ["text", "json", "ansi"] as const;

export async function screen(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { format: { type: "string" } } });
  const id = one(positionals, "session id");
  const format = (values.format ?? "text") as (typeof SCREEN_FORMATS)[number];
  if (!SCREEN_FORMATS.includes(format)) throw new UsageError(`--format is one of ${SCREEN_FORMATS.join(", ")}`);
  const b = broker();
  if (format === "json") {
    await write(new TextEncoder().encode(`${JSON.stringify(await b.screen(id), null, 2)}
`));
  } else if (format === "text") {
    await write(new TextEncoder().encode(`${await b.screenText(id)}
`));
  } else {
    await write((await b.screenAnsi(id)).data);
  }
  return 0;
}

export async function commands(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { limit: { type: "string" }, json: { type: "boolean" } },
  });
  const id = one(positionals, "session id");
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 1000)) {
    throw new UsageError(`--limit takes 1..1000, got ${JSON.stringify(values.limit)}`);
  }
  const list = await broker().commands(id, { limit });
  if (values.json) await write(new TextEncoder().encode(`${JSON.stringify(list, null, 2)}
`));
  else await write(new TextEncoder().encode(commandTable(list)));
  return 0;
}

function commandTable(list: CommandRecord[]): string {
  const rows = list.map((c) => {
    const ms = Date.parse(c.endedAt) - Date.parse(c.startedAt);
    const duration = Number.isFinite(ms) ? (ms < 10_000 ? `${(ms / 1000).toFixed(2)}s` : `${Math.round(ms / 1000)}s`) : "";
    return [String(c.seq), c.exitCode === null ? "-" : String(c.exitCode), duration, c.command];
  });
  const header = ["SEQ", "EXIT", "DURATION", "COMMAND"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [header, ...rows].map((r) => `${r.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()}
`).join("");
}
