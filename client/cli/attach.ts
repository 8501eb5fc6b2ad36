// `ptybroker run` and `ptybroker attach`: a session (a new one, or one by id) joined to the local
// terminal (terminal.ts), and what the CLI says when that ends.
import { parseArgs } from "node:util";
import type { PtyBroker } from "../index.js";
import { broker, offset, one, terminalSize, UsageError } from "./common.js";
import { SANDBOX_FLAGS, sandboxOptions } from "./sandbox-flags.js";
import { type AttachResult, attach } from "./terminal.js";

async function attachAndReport(b: PtyBroker, id: string, from: number | "live" | "screen" | "auto"): Promise<number> {
  const pty = await b.connect(id, { from });
  const result: AttachResult = await attach(pty, process);
  if (result.kind === "detached") {
    process.stderr.write(`\r\n[ptybroker: detached from ${id}; \`ptybroker attach ${id}\` to return]\r\n`);
    return 0;
  }
  if (result.message) process.stderr.write(`\r\n[ptybroker: ${result.message}]\r\n`);
  return result.code;
}

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      label: { type: "string" },
      cwd: { type: "string" },
      env: { type: "string", multiple: true },
      tag: { type: "string", multiple: true },
      ...SANDBOX_FLAGS,
    },
  });
  const env: Record<string, string> = {};
  for (const pair of values.env ?? []) {
    const eq = pair.indexOf("=");
    if (eq < 1) throw new UsageError(`--env takes NAME=VALUE, got ${JSON.stringify(pair)}`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const [command, ...commandArgs] = positionals;
  const b = broker();
  const session = await b.createSession({
    ...(command ? { command, args: commandArgs } : {}),
    ...terminalSize(),
    cwd: values.cwd,
    label: values.label,
    tags: values.tag,
    env: Object.keys(env).length ? env : undefined,
    ...sandboxOptions(values),
  });
  process.stderr.write(`[ptybroker: session ${session.id}]\r\n`);
  return attachAndReport(b, session.id, 0);
}

export async function attachCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { from: { type: "string" }, live: { type: "boolean" } },
  });
  if (values.live && values.from !== undefined) throw new UsageError("--from and --live exclude each other");
  // By default a large history is not replayed: the session's screen is drawn instead (a few KiB).
  const from = values.live ? "live" : values.from === "screen" ? "screen" : (offset(values.from) ?? "auto");
  return attachAndReport(broker(), one(positionals, "session id"), from);
}
