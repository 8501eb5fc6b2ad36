// `POST /v1/exec` (docs/protocol.md §3, "Exec"): one command run to completion without a
// terminal. Underneath it is a `pty: false` session like any other (its id stays readable and
// replayable, it counts against the tenant's quota and create rate); this route creates it with
// the timeout as its `timeoutSec` (ended with SIGKILL, by the session's own timer, so a caller
// that goes away does not leave it running), writes stdin and closes it, waits for the exit, and
// answers with the first `maxOutputBytes` of the output, stdout and stderr apart.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError, type Failure, unwrap } from "../../shared/errors.js";
import type { ExecResult, Session } from "../../shared/session.js";
import { completeUtf8Length } from "../../shared/utf8.js";
import { type AuthVariables, authenticate, requireScope } from "../auth/auth.js";
import { type Env, sessionStub } from "../env.js";
import type { StreamsRange } from "../rpc.js";
import { ExecBody, MAX_EXEC_STDIN_BYTES } from "./schemas.js";
import { createSession } from "./session-create.js";
import { actorOf, audited } from "./audit.js";
import { jsonBodies, validate } from "./validate.js";

/** How long past its timeout the route waits for the session's own timer to have ended it. */
const EXIT_SLACK_MS = 15_000;

export const execRoutes = new Hono<{ Bindings: Env; Variables: AuthVariables }>();

execRoutes.use("*", authenticate);
execRoutes.use("*", jsonBodies);
// stdin is the largest part: MAX_EXEC_STDIN_BYTES of text, each byte at most six escaped.
execRoutes.use(
  "*",
  bodyLimit({
    maxSize: MAX_EXEC_STDIN_BYTES * 6 + (1 << 20),
    onError: () => {
      throw new ApiError("PAYLOAD_TOO_LARGE", "request body too large");
    },
  }),
);

execRoutes.post("/", validate("json", ExecBody), async (c) => {
  const { stdin, timeoutSec, maxOutputBytes, ...process } = c.req.valid("json");
  const principal = c.get("principal");
  const tenant = requireScope(principal, "sessions:write");
  const input = new TextEncoder().encode(stdin ?? "");
  if (input.byteLength > MAX_EXEC_STDIN_BYTES) {
    throw new ApiError("PAYLOAD_TOO_LARGE", `stdin is ${input.byteLength} bytes; at most ${MAX_EXEC_STDIN_BYTES}`);
  }
  const started = Date.now();
  const id = crypto.randomUUID();
  // Recorded as a create (with `exec`), with the stdin's byte count, never its content.
  const what = { tenant, actor: actorOf(principal), action: "session.create" as const, sessionId: id, detail: { exec: true, stdinBytes: input.byteLength } };
  const created = await audited(c, what, () =>
    createSession(c.env, tenant, {
      ...process,
      id,
      pty: false,
      label: "exec",
      timers: { timeoutSec, idleTimeoutSec: 0, detachedTimeoutSec: 0 },
      timeoutSignal: "SIGKILL",
      captureBytes: maxOutputBytes,
    }),
  );
  const stub = sessionStub(c.env, tenant, created.id);
  const written = await stub.input(input, undefined, true);
  // A process that has already ended (it never read stdin) is fine; anything else is not.
  if ("failure" in written && written.failure.code !== "SESSION_EXITED") unwrap(written);
  const ended = unwrap((await stub.wait(timeoutSec * 1000 + EXIT_SLACK_MS)) as Session | Failure);
  if (ended.status === "starting" || ended.status === "running") {
    throw new ApiError("INTERNAL", `exec ${created.id} did not end within its timeout; it is still ${ended.status}`);
  }
  // RPC typing wraps results as Disposable; the value is the object's own StreamsRange or Failure.
  const output = unwrap((await stub.outputStreams(maxOutputBytes)) as StreamsRange | Failure);
  const truncated = output.from > 0 || output.to < ended.offset;
  const result: ExecResult = {
    id: created.id,
    exitCode: ended.exitCode,
    signal: ended.signal,
    stdout: text(output.stdout, truncated),
    stderr: text(output.stderr, truncated),
    truncated,
    durationMs: ended.exitedAt ? Date.parse(ended.exitedAt) - Date.parse(created.createdAt) : Date.now() - started,
    timedOut: ended.reason === "timeout",
    reason: ended.reason,
  };
  return c.json(result);
});

/** UTF-8 text; a character cut by the cap is left out rather than shown as U+FFFD. */
function text(bytes: Uint8Array, truncated: boolean): string {
  const whole = truncated ? bytes.subarray(0, completeUtf8Length(bytes)) : bytes;
  return new TextDecoder().decode(whole);
}
