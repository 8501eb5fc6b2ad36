// The `ptybroker` command. Configuration: PTYBROKER_URL and PTYBROKER_API_KEY (or PTYBROKER_TOKEN).
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { type AttachResult, attach } from "./terminal.js";
import type { CommandRecord } from "../../shared/agent.js";
import { PtyBroker } from "../broker.js";
import { PtyBrokerError } from "../errors.js";
import { execExitStatus, TIMED_OUT_STATUS, UNKNOWN_END_STATUS } from "./exit-status.js";
import { mintRunnerCredential, runnerClaimsProblem } from "../../shared/runner-credential.js";
import type { Session, SessionStatus } from "../../shared/session.js";

const USAGE = `ptybroker: persistent remote terminals

Usage:
  ptybroker run [--label L] [--cwd DIR] [--env NAME=VALUE]... [-- command [args...]]
                                   create a session (default: a login shell) and attach
  ptybroker attach <id> [--from OFFSET | --from screen | --live]
                                   attach; the earlier output is shown again first, or, when
                                   the session has more than 256 KiB of it, its current screen
                                   (--from 0 replays everything retained)
  ptybroker run-cmd <id> [--timeout SECONDS] [--json] -- <command...>
                                   run one command line in the session's shell (the default
                                   login shell) and wait for it: its output to stdout, its exit
                                   code as ours; timed out (default 30 s, at most 3600): 124,
                                   the command keeps running. Ctrl+C interrupts the command
                                   (SIGINT to the session); twice leaves it running
  ptybroker exec [--stdin-file F] [--timeout SECONDS] [--max-output BYTES] [--json] -- <command> [args...]
                                   run one command to completion without a terminal: its stdout
                                   to stdout, its stderr to stderr, its exit code as ours (128+n
                                   for a signal; killed at the timeout, default 60 s, at most
                                   3600: 124). Its stdin, as UTF-8 text up to 1 MiB: the file, or
                                   ours when it is not a terminal (--stdin-file /dev/null: none).
                                   Output past --max-output (default 1 MiB) is cut; ptybroker
                                   logs <id> has all of it. Ctrl+C stops waiting, and the command
                                   runs on until it ends or times out
  ptybroker record <id> [--from OFFSET] [--to OFFSET] > session.cast
                                   the session's output as an asciicast v2 recording, streamed to
                                   stdout as it is read (asciinema play session.cast plays it)
  ptybroker screen <id> [--format text|json|ansi]
                                   the session's screen as it is now: text lines (default), the
                                   JSON state, or bytes that repaint it
  ptybroker commands <id> [--limit N] [--json]
                                   the commands the session's shell ran: SEQ EXIT DURATION COMMAND
  ptybroker ls [--status S] [--tag T] [--json]
                                   every session, oldest first (all pages); REASON says why an
                                   ended session ended
  ptybroker events [--after ID] [--json]
                                   the tenant's session lifecycle as it happens, one line each:
                                   ID TYPE SESSION STATUS [REASON] (--json: the event as JSON);
                                   reconnects and resumes by itself; --after ID replays what
                                   came after that event first; Ctrl+C ends it
  ptybroker kill <id> [--purge]    end the process (SIGHUP, then SIGKILL)
  ptybroker logs <id> [--from OFFSET] [--follow]
                                   the output log to stdout; --follow waits for more
  ptybroker share <id> [--writer] [--ttl SECONDS]
                                   a link to the web page with a scoped token (viewer by default)
  ptybroker runner-credential --id RUNNER_ID [--tenants a,b]
                                   a runner's own credential, signed with RUNNER_SECRET (from the
                                   environment); the runner uses it as its RUNNER_TOKEN

While attached: Ctrl+] detaches and leaves the session running. The CLI reconnects by itself
when the network drops and resumes exactly where it was; it exits with the session's exit code.

Environment:
  PTYBROKER_URL       the broker's URL (default http://127.0.0.1:8787)
  PTYBROKER_API_KEY   the tenant's API key (or PTYBROKER_TOKEN: a session token)
`;

class UsageError extends Error {}

/** The last request that got no answer at all: its URL (no query: it may hold a token) and why. */
let unreachable: { url: string; reason: string } | undefined;

/** Why a fetch got no answer, from undici's `fetch failed` and its cause: `connect ECONNREFUSED 127.0.0.1:1`. */
function networkReason(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause ?? error;
  const { message, code, errors } = cause as { message?: string; code?: string; errors?: unknown[] };
  // Several addresses tried (localhost: ::1 and 127.0.0.1) come as an AggregateError without a message.
  const each = Array.isArray(errors) ? errors.map((e) => (e as Error)?.message).filter(Boolean) : [];
  return message || each.join("; ") || code || String(cause);
}

/** fetch, remembering which URL could not be reached and why, so the CLI's error can name both. */
const fetchNamingUrl: typeof fetch = async (input, init) => {
  try {
    return await fetch(input, init);
  } catch (error) {
    if ((error as Error)?.name !== "AbortError") {
      const tried = new URL(input instanceof Request ? input.url : String(input));
      unreachable = { url: `${tried.origin}${tried.pathname}`, reason: networkReason(error) };
      throw new Error(`cannot reach ${unreachable.url}: ${unreachable.reason}`);
    }
    throw error;
  }
};

function broker(): PtyBroker {
  const url = process.env.PTYBROKER_URL ?? "http://127.0.0.1:8787";
  const apiKey = process.env.PTYBROKER_API_KEY;
  const token = process.env.PTYBROKER_TOKEN;
  if (!apiKey && !token) throw new UsageError("set PTYBROKER_API_KEY (or PTYBROKER_TOKEN)");
  return new PtyBroker({ url, apiKey, token, fetch: fetchNamingUrl });
}

function one(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0];
}

/** A byte offset (or count) given as `--<flag> N`. */
function offset(value: string | undefined, flag = "from"): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value)) throw new UsageError(`--${flag} takes a byte ${flag === "max-output" ? "count" : "offset"}, got ${JSON.stringify(value)}`);
  return Number(value);
}

function terminalSize(): { cols?: number; rows?: number } {
  const { columns, rows } = process.stdout;
  return process.stdout.isTTY && columns && rows ? { cols: columns, rows } : {};
}

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

async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      label: { type: "string" },
      cwd: { type: "string" },
      env: { type: "string", multiple: true },
      tag: { type: "string", multiple: true },
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
  });
  process.stderr.write(`[ptybroker: session ${session.id}]\r\n`);
  return attachAndReport(b, session.id, 0);
}

async function attachCommand(args: string[]): Promise<number> {
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

async function runCmd(args: string[]): Promise<number> {
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

async function screen(args: string[]): Promise<number> {
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

async function commands(args: string[]): Promise<number> {
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

const STATUSES: SessionStatus[] = ["starting", "running", "exited", "lost", "failed"];

async function ls(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { status: { type: "string" }, tag: { type: "string" }, json: { type: "boolean" } },
  });
  if (positionals.length) throw new UsageError("ls takes no arguments");
  const status = values.status as SessionStatus | undefined;
  if (status !== undefined && !STATUSES.includes(status)) {
    throw new UsageError(`--status is one of ${STATUSES.join(", ")}`);
  }
  const sessions = await broker().list({ status, tag: values.tag });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(sessions, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(table(sessions));
  return 0;
}

function table(sessions: Session[]): string {
  const rows = sessions.map((s) => [
    s.id,
    s.status === "exited" ? `exited (${s.exitCode ?? s.signal})` : s.status,
    s.reason ?? "",
    [s.command, ...s.args].join(" "),
    s.createdAt.replace("T", " ").replace(/\.\d+Z$/, "Z"),
    String(s.clients),
    s.label ?? "",
  ]);
  const header = ["ID", "STATUS", "REASON", "COMMAND", "CREATED", "CLIENTS", "LABEL"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [header, ...rows].map((r) => `${r.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()}\n`).join("");
}

async function events(args: string[]): Promise<number> {
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

async function kill(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { purge: { type: "boolean" } } });
  const id = one(positionals, "session id");
  const s = await broker().kill(id, { purge: values.purge });
  process.stdout.write(`${id}: ${s.status}${s.signal ? ` (${s.signal})` : s.exitCode !== null ? ` (exit ${s.exitCode})` : ""}\n`);
  return 0;
}

async function logs(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { from: { type: "string" }, follow: { type: "boolean", short: "f" } },
  });
  const id = one(positionals, "session id");
  const b = broker();
  let cursor = offset(values.from);
  const end = (await b.get(id)).offset;
  for (;;) {
    const range = await b.output(id, { from: cursor });
    if (cursor !== undefined && range.from > cursor) {
      process.stderr.write(`[ptybroker: output before offset ${range.from} is no longer kept]\n`);
    }
    await write(range.bytes);
    cursor = range.to;
    if (range.to >= end || range.bytes.byteLength === 0) break;
  }
  if (!values.follow) return 0;
  const pty = await b.connect(id, { from: cursor });
  for await (const chunk of pty) await write(chunk);
  return 0;
}

/** Writes to stdout, waiting when the pipe is full (or until it fails or closes). */
function write(bytes: Uint8Array): Promise<void> {
  if (process.stdout.write(bytes)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      for (const event of ["drain", "error", "close"]) process.stdout.off(event, done);
      resolve();
    };
    for (const event of ["drain", "error", "close"]) process.stdout.once(event, done);
  });
}

async function share(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { writer: { type: "boolean" }, ttl: { type: "string" } },
  });
  const id = one(positionals, "session id");
  const ttlSec = values.ttl === undefined ? undefined : Number(values.ttl);
  if (ttlSec !== undefined && !(Number.isInteger(ttlSec) && ttlSec > 0)) {
    throw new UsageError(`--ttl takes whole seconds, got ${JSON.stringify(values.ttl)}`);
  }
  const b = broker();
  const role = values.writer ? "writer" : "viewer";
  const { token, expiresAt } = await b.createToken(id, role, { ttlSec });
  process.stdout.write(`${b.url}/#session=${encodeURIComponent(id)}&token=${token}\n`);
  process.stderr.write(`a ${role} link, valid until ${expiresAt}\n`);
  return 0;
}

async function runnerCredential(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { id: { type: "string" }, tenants: { type: "string" } } });
  const secret = process.env.RUNNER_SECRET;
  if (!secret) throw new UsageError("set RUNNER_SECRET: the edge's secret that signs runner credentials");
  if (!values.id) throw new UsageError("--id is required: the runner's id");
  const tenants = values.tenants === undefined ? null : values.tenants.split(",").map((t) => t.trim());
  const claims = { runnerId: values.id, tenants };
  const problem = runnerClaimsProblem(claims);
  if (problem) throw new UsageError(problem);
  process.stdout.write(`${await mintRunnerCredential(secret, claims)}\n`);
  process.stderr.write(`runner ${values.id}, ${tenants ? `tenants ${tenants.join(", ")}` : "any tenant"}\n`);
  return 0;
}

async function exec(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      "stdin-file": { type: "string" },
      timeout: { type: "string" },
      "max-output": { type: "string" },
      json: { type: "boolean" },
    },
  });
  const [command, ...commandArgs] = positionals;
  if (!command) throw new UsageError("exec needs a command: exec -- <command> [args...]");
  const timeoutSec = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutSec !== undefined && !(Number.isInteger(timeoutSec) && timeoutSec >= 1 && timeoutSec <= 3600)) {
    throw new UsageError(`--timeout takes whole seconds 1..3600, got ${JSON.stringify(values.timeout)}`);
  }
  const maxOutputBytes = offset(values["max-output"], "max-output");
  let stdin: string | undefined;
  if (values["stdin-file"] !== undefined) stdin = await readFile(values["stdin-file"], "utf8");
  else if (!process.stdin.isTTY) stdin = await text(process.stdin);
  const result = await broker().exec(command, { args: commandArgs, stdin, timeoutSec, maxOutputBytes });
  if (values.json) {
    await write(new TextEncoder().encode(`${JSON.stringify(result, null, 2)}\n`));
  } else {
    await write(new TextEncoder().encode(result.stdout));
    process.stderr.write(result.stderr);
  }
  const note = (line: string) => process.stderr.write(`[ptybroker: ${line}]\n`);
  if (result.truncated) note(`output cut at ${maxOutputBytes ?? 1 << 20} bytes; all of it: ptybroker logs ${result.id}`);
  if (result.timedOut) note(`timed out after ${timeoutSec ?? 60} s and killed (session ${result.id})`);
  return execExitStatus(result);
}

/** A stream read to its end as UTF-8 text. */
async function text(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function record(args: string[]): Promise<number> {
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

const COMMANDS: Record<string, (args: string[]) => Promise<number>> = {
  run,
  attach: attachCommand,
  "run-cmd": runCmd,
  exec,
  record,
  screen,
  commands,
  ls,
  events,
  kill,
  logs,
  share,
  "runner-credential": runnerCredential,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "help" || name === "--help" || name === "-h") {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)}`);
  return command(rest);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`ptybroker: ${(error as Error).message}\n\n${USAGE}`);
      process.exit(2);
    }
    if (error instanceof PtyBrokerError && error.code === "NETWORK" && unreachable) {
      process.stderr.write(`ptybroker: cannot reach ${unreachable.url}: ${unreachable.reason}\n`);
      process.exit(1);
    }
    if (error instanceof PtyBrokerError) {
      process.stderr.write(`ptybroker: ${error.code}: ${error.message}\n`);
      process.exit(1);
    }
    // A local file that cannot be read (exec --stdin-file): the system's message says which and why.
    if (typeof (error as NodeJS.ErrnoException).syscall === "string") {
      process.stderr.write(`ptybroker: ${(error as Error).message}\n`);
      process.exit(1);
    }
    process.stderr.write(`ptybroker: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
