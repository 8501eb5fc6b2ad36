// Daytona's toolbox PTY shapes (docs/protocol.md, "Compatibility: Daytona"): what its client
// sends (validated here, then translated onto `POST /v1/sessions`'s own schema), the
// `PtySessionInfo` it reads, its error bodies, and the close its SDK's PtyHandle reads at exit.
import { z } from "zod";
import type { Session } from "../../../../shared/session.js";
import type { SessionAsked } from "../../../rpc.js";
import { SESSION_ID } from "../../schemas.js";
import { shellExitCode } from "../exit-code.js";

/** Daytona's id names a ptybroker session of the caller's tenant as it is: the same charset and length. */
export const DAYTONA_ID = SESSION_ID;

/** `:sandbox` is accepted and ignored (the tenant comes from the key), but bounded. */
export const SANDBOX = /^[A-Za-z0-9._-]{1,128}$/;

const dimension = z.number().int().min(1).max(1000);

/**
 * `POST /process/pty`. Fields Daytona's client does not send are ignored, as its daemon does;
 * cwd and envs are checked again, with every bound of `POST /v1/sessions`, once translated.
 */
export const PtyCreateBody = z.object({
  id: z.string({ error: "session ID is required" }).regex(DAYTONA_ID, "id is 1 to 64 of A-Z a-z 0-9 _ -"),
  cwd: z.string().max(4096).optional(),
  envs: z.record(z.string().max(256), z.string().max(65536)).optional(),
  cols: dimension.optional(),
  rows: dimension.optional(),
  lazyStart: z.boolean().optional(),
});
export type PtyCreateBody = z.infer<typeof PtyCreateBody>;

export const PtyResizeBody = z.object({ cols: dimension, rows: dimension });

/** `GET .../connect?from=`: a ptybroker extension (an offset, `live` or `screen`); absent = everything retained. */
export const PtyConnectQuery = z.object({
  from: z
    .union([z.enum(["live", "screen"]), z.string().regex(/^\d{1,15}$/, "from is an offset, live or screen")])
    .optional(),
});

/**
 * Daytona's cwd is a path in the sandbox; here a session's cwd is inside the tenant's workspace,
 * which is the session user's home: `~` (or nothing) is the workspace, `~/a` and `a` are `a` in
 * it. Anything else (an absolute path) is left as it is, for `POST /v1/sessions` to refuse.
 */
export function workspaceCwd(cwd: string | undefined): string | undefined {
  if (cwd === undefined || cwd === "" || cwd === "~" || cwd === "~/") return undefined;
  return cwd.startsWith("~/") ? cwd.slice(2) : cwd;
}

/** The cwd as `PtySessionInfo` shows it: `~` for the workspace, `~/a` inside it. */
function shownCwd(cwd: string | null): string {
  return cwd === null ? "~" : `~/${cwd}`;
}

/** Daytona's `PtySessionInfo`. */
export interface PtySessionInfo {
  id: string;
  cwd: string;
  envs: Record<string, string>;
  cols: number;
  rows: number;
  createdAt: string;
  active: boolean;
  lazyStart: boolean;
}

/** A session as Daytona's client reads it; `envs` as its daemon shows them, TERM included. */
export function ptyInfo(session: Session, asked: SessionAsked): PtySessionInfo {
  return {
    id: session.id,
    cwd: shownCwd(session.cwd),
    envs: { TERM: "xterm-256color", ...asked.spec.env },
    cols: session.cols,
    rows: session.rows,
    createdAt: session.createdAt,
    active: session.status === "running",
    lazyStart: asked.lazy,
  };
}

/** Whether Daytona's surface shows the session: a terminal that has not ended (Daytona forgets ended ones). */
export function shown(session: Session): boolean {
  return session.pty && (session.status === "starting" || session.status === "running");
}

/**
 * An error as Daytona answers one: its daemon's PTY routes write `{"error"}`, its other routes
 * `ErrorResponse` (`statusCode`, `message`, `code`, ...), and its SDK reads `message`: both, so
 * either reader finds the text.
 */
export function daytonaErrorBody(status: number, message: string, path: string, method: string) {
  return {
    error: message,
    statusCode: status,
    message,
    code: STATUS_TEXT[status] ?? "Error",
    timestamp: new Date().toISOString(),
    path,
    method,
  };
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  410: "Gone",
  413: "Request Entity Too Large",
  416: "Requested Range Not Satisfiable",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/** The close Daytona's daemon sends when a PTY's process ends: its code and its reason's JSON. */
export interface ExitClose {
  code: 1000 | 1011;
  reason: string;
}

/**
 * The close for an ended session, as Daytona's daemon makes it: 1000 and `{"exitCode":0}` for
 * exit code 0, else 1011 and `{"exitCode":N,"exitReason"}` with its names for 130, 137, 143 and
 * other signals. A DELETE ends a session as Daytona's kill does (137, SIGKILL); a process killed
 * by a signal exits 128 + its number; a session lost or failed, with no exit code, closes 1011
 * with `{"error"}`, which the SDK's PtyHandle reports as its error.
 */
export function exitClose(session: Session): ExitClose {
  const exitCode = session.reason === "deleted" ? 137 : shellExitCode(session);
  if (exitCode === null) {
    const error = session.error ?? `PTY session ${session.status} (${session.reason ?? "unknown"})`;
    return { code: 1011, reason: closeReason({ error }) };
  }
  if (exitCode === 0) return { code: 1000, reason: JSON.stringify({ exitCode: 0 }) };
  return { code: 1011, reason: JSON.stringify({ exitCode, exitReason: exitReason(exitCode) }) };
}

function exitReason(exitCode: number): string {
  if (exitCode === 130) return "Ctrl+C";
  if (exitCode === 137) return "SIGKILL";
  if (exitCode === 143) return "SIGTERM";
  if (exitCode > 128) return `signal ${exitCode - 128}`;
  return "non-zero exit";
}

/** A close reason is at most 123 bytes: `{"error"}` with its text cut to fit. */
export function closeReason(body: { error: string }): string {
  let text = body.error;
  let json = JSON.stringify({ error: text });
  while (new TextEncoder().encode(json).byteLength > 123) {
    text = text.slice(0, -4);
    json = JSON.stringify({ error: `${text}...` });
  }
  return json;
}
