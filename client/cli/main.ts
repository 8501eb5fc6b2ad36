// The `ptybroker` command. Configuration: PTYBROKER_URL and PTYBROKER_API_KEY (or PTYBROKER_TOKEN).
// This file is the entry (the usage text, the command table, main() and how each failure is
// reported, with its exit code); each command lives in the file of its family beside it.
import { PtyBrokerError } from "../index.js";
import { runCmd, screen, commands } from "./agent.js";
import { attachCommand, run } from "./attach.js";
import { errorLine, lastUnreachable, UsageError } from "./common.js";
import { events } from "./events.js";
import { exec, record } from "./exec.js";
import { keys } from "./keys.js";
import { runnerCredential } from "./runner-credential.js";
import { kill, logs, ls, share } from "./sessions.js";
import { audit, webhooks } from "./webhooks.js";

const USAGE = `ptybroker: persistent remote terminals

Usage:
  ptybroker run [--label L] [--cwd DIR] [--env NAME=VALUE]... [SANDBOX] [-- command [args...]]
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
  ptybroker exec [--stdin-file F] [--timeout SECONDS] [--max-output BYTES] [--json] [SANDBOX] -- <command> [args...]
                                   run one command to completion without a terminal: its stdout
                                   to stdout, its stderr to stderr, its exit code as ours (128+n
                                   for a signal; killed at the timeout, default 60 s, at most
                                   3600: 124). Its stdin, as UTF-8 text up to 1 MiB: the file, or
                                   ours when it is not a terminal (--stdin-file /dev/null: none).
                                   Output past --max-output (default 1 MiB) is cut; ptybroker
                                   logs <id> has all of it. Ctrl+C stops waiting, and the command
                                   runs on until it ends or times out
  SANDBOX, the session's network and limits (run, exec; absent: the runner's defaults):
    --network none|egress          none: a loopback of its own only; egress: outbound too
    --memory MIB                   memory, 32..16384 MiB; past it the session is killed and
                                   ends "out of memory" (reason oom)
    --pids N                       processes and threads, 8..4096
    --cpus N                       CPUs, 0.05..8 (0.5: half of one)
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
  ptybroker keys [list] [--json]   the tenant's API keys: ID NAME SCOPES CREATED LAST USED EXPIRES
  ptybroker keys create <name> [--scope S]... [--expires ISO-TIME] [--json]
                                   a new key, printed once (scopes: sessions:read,
                                   sessions:write, events:read, webhooks:write; none = all)
  ptybroker keys revoke <key id>   revoke a key at once (its sockets close with 4011)
                                   (keys needs a key with every scope)
  ptybroker webhooks [list] [--json]
                                   the tenant's webhooks: ID URL EVENTS CREATED
  ptybroker webhooks create --url URL [--events a,b] [--secret S] [--json]
                                   a new webhook; its signing secret is printed once
  ptybroker webhooks delete <id>   nothing more is sent to it
  ptybroker webhooks deliveries <id> [--json]
                                   its deliveries: EVENT TYPE STATE ATTEMPTS LAST NEXT
                                   (webhooks needs a key with webhooks:write)
  ptybroker audit [--after ID] [--limit N] [--json]
                                   a page of the audit log, oldest first (a key with every scope)
  ptybroker runner-credential --id RUNNER_ID [--tenants a,b]
                                   a runner's own credential, signed with RUNNER_SECRET (from the
                                   environment); the runner uses it as its RUNNER_TOKEN

While attached: Ctrl+] detaches and leaves the session running. The CLI reconnects by itself
when the network drops and resumes exactly where it was; it exits with the session's exit code.

Environment:
  PTYBROKER_URL       the broker's URL (default http://127.0.0.1:8787; a /v1 at its end is dropped)
  PTYBROKER_API_KEY   the tenant's API key (or PTYBROKER_TOKEN: a session token)
`;

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
  keys,
  webhooks,
  audit,
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
    const unreachable = lastUnreachable();
    if (error instanceof PtyBrokerError && error.code === "NETWORK" && unreachable) {
      process.stderr.write(`ptybroker: cannot reach ${unreachable.url}: ${unreachable.reason}\n`);
      process.exit(1);
    }
    if (error instanceof PtyBrokerError) {
      process.stderr.write(`ptybroker: ${errorLine(error)}\n`);
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
