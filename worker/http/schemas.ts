// Request validation for the public API (zod, applied with @hono/zod-validator).
import { z } from "zod";
import { SESSION_STATUSES } from "../../shared/session.js";
import { EXPECT_TIMEOUT_SEC, RUN_TIMEOUT_SEC } from "../../shared/agent.js";
import { LIMITS_ASKED, MAX_COMMAND_TEXT, SessionNetworkSchema, SignalSchema, WRITER_ID_PATTERN } from "../../shared/protocol.js";

export const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A cwd is resolved by the runner inside the tenant's workspace folder: only relative paths
 * that never climb above it (`a/../b` is fine, `../x` and `/etc` are not) and hold no NUL.
 */
function insideWorkspace(cwd: string): boolean {
  if (cwd.startsWith("/") || cwd.includes("\0")) return false;
  let depth = 0;
  for (const part of cwd.split("/")) {
    if (part === "..") depth--;
    else if (part !== "" && part !== ".") depth++;
    if (depth < 0) return false;
  }
  return true;
}
const dimension = z.number().int().min(1).max(1000);
/** A timer in whole seconds: 0 turns it off; at most 30 days. */
const timerSeconds = z
  .number()
  .int()
  .min(0)
  .max(30 * 24 * 3600);
const tags = z.array(z.string().min(1).max(128)).max(32);

/** What a process is started with: shared by `POST /v1/sessions` and `POST /v1/exec`. */
const processFields = {
  command: z.string().min(1).max(4096),
  args: z.array(z.string().max(65536)).max(1024).optional(),
  cwd: z
    .string()
    .min(1)
    .max(4096)
    .refine(insideWorkspace, "cwd is a relative path inside the tenant's workspace")
    .optional(),
  env: z
    .record(
      z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "env names are letters, digits and _")
        .max(256),
      z.string().max(65536),
    )
    .refine((env) => Object.keys(env).length <= 256, "at most 256 env variables")
    .optional(),
  /** The session's network and limits (docs/protocol.md §3, "Create"); absent: the runner's defaults. */
  network: SessionNetworkSchema.optional(),
  limits: z.strictObject(LIMITS_ASKED).optional(),
};

export const CreateSessionBody = z
  .strictObject({
    ...processFields,
    command: processFields.command.optional(),
    cols: dimension.optional(),
    rows: dimension.optional(),
    /** false: pipes instead of a terminal (docs/protocol.md §3, "Processes without a terminal") */
    pty: z.boolean().optional(),
    id: z.string().regex(SESSION_ID, "id is 1 to 64 of A-Z a-z 0-9 _ -").optional(),
    tags: tags.optional(),
    label: z.string().max(256).optional(),
    timeoutSec: timerSeconds.optional(),
    idleTimeoutSec: timerSeconds.optional(),
    detachedTimeoutSec: timerSeconds.optional(),
  })
  // A size means nothing without a terminal: refused rather than silently ignored.
  .refine((body) => body.pty !== false || (body.cols === undefined && body.rows === undefined), {
    message: "cols and rows size a terminal; a session with pty: false has none",
    path: ["pty"],
  });
export type CreateSessionBody = z.infer<typeof CreateSessionBody>;

export const PatchSessionBody = z
  .strictObject({
    timeoutSec: timerSeconds.optional(),
    idleTimeoutSec: timerSeconds.optional(),
    detachedTimeoutSec: timerSeconds.optional(),
    label: z.string().max(256).nullable().optional(),
    tags: tags.optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "give at least one of timeoutSec, idleTimeoutSec, detachedTimeoutSec, label, tags");

export const ListQuery = z.object({
  status: z.enum(SESSION_STATUSES).optional(),
  tag: z.string().min(1).max(128).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  /** `nextCursor` of the page before (opaque to clients; a position in the tenant's index). */
  cursor: z.string().regex(/^\d{1,15}$/, "cursor is a nextCursor from an earlier page").transform(Number).optional(),
});

/** `GET /v1/events`: resume after this event id (`Last-Event-ID` does the same). */
export const EventsQuery = z.object({
  after: z.string().regex(/^\d{1,15}$/, "after is an event id").optional(),
});

export const InputBody = z.strictObject({
  data: z.string(),
  encoding: z.enum(["utf8", "base64"]).default("utf8"),
  /** close the process's stdin after `data` (a terminal gets Ctrl+D) */
  eof: z.boolean().default(false),
});

export const ResizeBody = z.strictObject({ cols: dimension, rows: dimension });

export const SignalBody = z.strictObject({ signal: SignalSchema });

export const WaitQuery = z.object({
  timeoutSec: z.coerce.number().min(0).max(300).default(30),
});

export const DeleteQuery = z.object({
  purge: z.enum(["true", "false", "1", "0"]).optional(),
});

export const ConnectQuery = z.object({
  from: z
    .union([z.enum(["live", "screen"]), z.string().regex(/^\d{1,15}$/, "from is an offset, live or screen")])
    .optional(),
  mode: z.enum(["raw", "framed"]).optional(),
  /**
   * A framed client that falls too far behind: cut (4008) or skip ahead to the screen
   * (docs/protocol.md §5, "The screen instead of history").
   */
  onLag: z.enum(["cut", "screen"]).optional(),
  /**
   * A framed client that takes output compressed once per chunk (0x06) instead of
   * permessage-deflate (docs/protocol.md §5, "Compressed output"); ignored in raw mode.
   */
  compress: z.enum(["deflate", "none"]).optional(),
  /**
   * The client's writer id: its input comes numbered (0x07) and is written once, in order, across
   * its reconnects (docs/protocol.md §5, "Input exactly once"); ignored in raw mode and for viewers.
   */
  writer: z.string().regex(WRITER_ID_PATTERN, "writer is 8 to 64 of A-Z, a-z, 0-9, _ and -").optional(),
  /** With `writer`: its input below this offset was acknowledged to it (where its count starts if the runner has none). */
  inputFrom: z.string().regex(/^\d{1,15}$/, "inputFrom is an offset").transform(Number).optional(),
});

const offset = z.string().regex(/^\d{1,15}$/, "an offset is a whole number of bytes").transform(Number);

export const OutputQuery = z.object({
  from: offset.optional(),
  to: offset.optional(),
  /** only this stream's bytes of the range (`pty: false`; a terminal's output is stdout) */
  stream: z.enum(["stdout", "stderr"]).optional(),
});

export const RecordingQuery = z.object({ from: offset.optional(), to: offset.optional() });

/** Most stdin one exec takes (written to the process in MAX_INPUT_BYTES pieces). */
export const MAX_EXEC_STDIN_BYTES = 1 << 20;
/** Most output one exec answer carries. */
export const MAX_EXEC_OUTPUT_BYTES = 8 << 20;

export const ExecBody = z.strictObject({
  ...processFields,
  /** written to the process, then its stdin is closed (UTF-8 text) */
  stdin: z.string().optional(),
  timeoutSec: z.number().int().min(1).max(3600).default(60),
  maxOutputBytes: z
    .number()
    .int()
    .min(0)
    .max(MAX_EXEC_OUTPUT_BYTES)
    .default(1 << 20),
});

export const StreamQuery = z.object({
  from: z.union([z.literal("screen"), z.string().regex(/^\d{1,15}$/, "from is an offset or screen")]).optional(),
});

/** `Idempotency-Key`: visible ASCII, as Stripe and the IETF draft use it. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/;

const offsetNumber = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const ExpectBody = z.strictObject({
  pattern: z.string().min(1).max(4096),
  literal: z.boolean().default(false),
  flags: z.string().max(8).default(""),
  from: offsetNumber.optional(),
  timeoutSec: z.number().min(0).max(EXPECT_TIMEOUT_SEC.max).default(EXPECT_TIMEOUT_SEC.default),
});

export const RunBody = z.strictObject({
  command: z
    .string()
    .min(1)
    .max(MAX_COMMAND_TEXT)
    .refine((command) => !/[\r\n]/.test(command), "command is one line (no \\r or \\n)")
    .refine((command) => command.trim().length > 0, "command is blank"),
  timeoutSec: z.number().min(0.1).max(RUN_TIMEOUT_SEC.max).default(RUN_TIMEOUT_SEC.default),
});

export const CommandsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(1000),
});

export const ScreenQuery = z.object({
  format: z.enum(["json", "text", "ansi"]).default("json"),
});

export const TokenBody = z.strictObject({
  role: z.enum(["viewer", "writer"]),
  /** Lifetime in seconds: 1 s to 7 days, 1 hour by default. */
  ttlSec: z
    .number()
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .default(3600),
});

/** A runner's `POST /internal/sessions/:tenant/:id/retained`: where the log of one incarnation now starts. */
export const LogTrimmedBody = z.strictObject({
  incarnation: z.string().min(1).max(64),
  from: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
});
