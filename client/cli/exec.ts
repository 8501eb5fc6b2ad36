// Runs and records without a terminal: `ptybroker exec` (one command to completion, docs/protocol.md
// §3, "Exec") and `ptybroker record` (the output as an asciicast, docs/protocol.md §3, "Recordings").
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { broker, networkReason, offset, one, UsageError, write } from "./common.js";
import { execExitStatus, OOM_NOTE } from "./exit-status.js";
import { SANDBOX_FLAGS, sandboxOptions } from "./sandbox-flags.js";

export async function exec(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      "stdin-file": { type: "string" },
      timeout: { type: "string" },
      "max-output": { type: "string" },
      json: { type: "boolean" },
      ...SANDBOX_FLAGS,
    },
  });
  const [command, ...commandArgs] = positionals;
  if (!command) throw new UsageError("exec needs a command: exec -- <command> [args...]");
  const timeoutSec = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutSec !== undefined && !(Number.isInteger(timeoutSec) && timeoutSec >= 1 && timeoutSec <= 3600)) {
    throw new UsageError(`--timeout takes whole seconds 1..3600, got ${JSON.stringify(values.timeout)}`);
  }
  const maxOutputBytes = offset(values["max-output"], "max-output");
  const sandbox = sandboxOptions(values);
  let stdin: string | undefined;
  if (values["stdin-file"] !== undefined) stdin = await readFile(values["stdin-file"], "utf8");
  else if (!process.stdin.isTTY) stdin = await text(process.stdin);
  const result = await broker().exec(command, { args: commandArgs, stdin, timeoutSec, maxOutputBytes, ...sandbox });
  if (values.json) {
    await write(new TextEncoder().encode(`${JSON.stringify(result, null, 2)}\n`));
  } else {
    await write(new TextEncoder().encode(result.stdout));
    process.stderr.write(result.stderr);
  }
  const note = (line: string) => process.stderr.write(`[ptybroker: ${line}]\n`);
  if (result.truncated) note(`output cut at ${maxOutputBytes ?? 1 << 20} bytes; all of it: ptybroker logs ${result.id}`);
  if (result.timedOut) note(`timed out after ${timeoutSec ?? 60} s and killed (session ${result.id})`);
  else if (result.reason === "oom") note(`${OOM_NOTE} (session ${result.id})`);
  return execExitStatus(result);
}

/** A stream read to its end as UTF-8 text. */
async function text(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString("utf8");
}

export async function record(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { from: { type: "string" }, to: { type: "string" } },
  });
  const id = one(positionals, "session id");
  const res = await broker().recordingResponse(id, { from: offset(values.from), to: offset(values.to, "to") });
  if (!res.body) return 0;
  const reader = res.body.getReader();
  // A reader that went away (`ptybroker record <id> | head`) ends it, as a success; another
  // failure to write is reported.
  let stdoutFailed: NodeJS.ErrnoException | undefined;
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    stdoutFailed = error;
    void reader.cancel().catch(() => undefined);
  });
  // Written as it comes: a long session's recording is never held whole.
  let written = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || stdoutFailed) break;
      await write(value);
      written += value.byteLength;
    }
  } catch (error) {
    if (!stdoutFailed) {
      process.stderr.write(`ptybroker: the recording broke off after ${written} bytes: ${networkReason(error)}\n`);
      return 1;
    }
  }
  if (stdoutFailed && stdoutFailed.code !== "EPIPE") {
    process.stderr.write(`ptybroker: cannot write the recording: ${stdoutFailed.message}\n`);
    return 1;
  }
  return 0;
}
