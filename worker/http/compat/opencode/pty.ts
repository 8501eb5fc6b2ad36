// OpenCode's shapes over ptybroker's: the `Pty` object a session is shown as, the bodies its
// routes take, its error bodies, and who is calling (the tenant's key as Bearer, or as the
// password of HTTP Basic). docs/protocol.md, "Compatibility: OpenCode".
import { z } from "zod";
import { ApiError, type ErrorCode, ErrorStatus } from "../../../../shared/errors.js";
import type { Session } from "../../../../shared/session.js";
import { type OwnerPrincipal, bearer, keyPrincipal } from "../../../auth/auth.js";
import type { Env } from "../../../env.js";
import { SESSION_ID } from "../../schemas.js";
import { shellExitCode } from "../exit-code.js";

/** OpenCode's `Pty`; `exitCode` once it has exited (its v2 type has it). */
export interface Pty {
  id: string;
  title: string;
  command: string;
  args: string[];
  cwd: string;
  status: "running" | "exited";
  pid: number;
  exitCode?: number;
}

/** An exit code as a shell reports it: the process's own, or 128 + the signal that ended it. */
export function exitCodeOf(session: Session): number {
  return shellExitCode(session) ?? 128;
}

/** How OpenCode names a terminal it was given no title for. */
export function defaultTitle(id: string): string {
  return `Terminal ${id.slice(-4)}`;
}

/**
 * A session as OpenCode's `Pty`: `title` is the label, `status` running while it starts or runs
 * and exited after (`lost` and `failed` too), `pid` 0 until the process has one, `cwd` relative
 * to the tenant's workspace ("." for the workspace itself).
 */
export function toPty(session: Session): Pty {
  const ended = session.status !== "starting" && session.status !== "running";
  return {
    id: session.id,
    title: session.label ?? defaultTitle(session.id),
    command: session.command,
    args: session.args,
    cwd: session.cwd ?? ".",
    status: ended ? "exited" : "running",
    pid: session.pid ?? 0,
    ...(ended ? { exitCode: exitCodeOf(session) } : {}),
  };
}

// ---- Request bodies (OpenCode's fields; ptybroker's bounds) ----

const cwd = z
  .string()
  .min(1)
  .max(4096)
  .refine((value) => !value.startsWith("/") && !value.includes("\0") && !value.split("/").includes(".."), {
    message: "cwd is a relative path inside the tenant's workspace",
  });

export const PtyCreateBody = z.object({
  command: z.string().min(1).max(4096).optional(),
  args: z.array(z.string().max(65536)).max(1024).optional(),
  cwd: cwd.optional(),
  title: z.string().max(256).optional(),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "env names are letters, digits and _").max(256), z.string().max(65536))
    .refine((env) => Object.keys(env).length <= 256, "at most 256 env variables")
    .optional(),
});

const dimension = z.number().int().min(1).max(1000);

export const PtyUpdateBody = z.object({
  title: z.string().max(256).optional(),
  size: z.object({ rows: dimension, cols: dimension }).optional(),
});

/** `directory` and `workspace` name an OpenCode project; here the tenant is the workspace, so they are read and ignored. */
export const LocationQuery = z.object({
  directory: z.string().max(4096).optional(),
  workspace: z.string().max(256).optional(),
});

/** `cursor`: a byte offset, -1 for live output only; absent, everything from 0. `ticket`: from connect-token. */
export const ConnectQuery = LocationQuery.extend({
  cursor: z
    .string()
    .regex(/^-?\d{1,15}$/, "cursor is a byte offset, or -1")
    .transform(Number)
    .optional(),
  ticket: z.string().min(1).max(2048).optional(),
});

/** A PTY id in a path: anything else cannot name a session, so it is not found. */
export function ptyId(raw: string): string {
  if (!SESSION_ID.test(raw)) throw new ApiError("NOT_FOUND", `pty ${raw} not found`);
  return raw;
}

/** When an OpenCode shell gets `-l`: OpenCode logs a shell in when it starts one. */
export function loginArgs(command: string | undefined, args: string[] | undefined): string[] | undefined {
  if (args !== undefined || command === undefined) return args;
  const name = command.split("/").pop() ?? "";
  return /^(ba|z|k|c|tc|fi|da|a)?sh$/.test(name) ? ["-l"] : undefined;
}

// ---- Errors, in the shapes OpenCode's clients read ----

/**
 * OpenCode's error body for `error`: `{name, data: {message}}` (its NamedError, read by the v1
 * client) and `_tag`/`message` (its v2 errors) in one object; a 404 is its `PtyNotFoundError`.
 */
export function errorBody(error: ApiError, ptyID?: string): Record<string, unknown> {
  const message = error.message;
  if (error.code === "NOT_FOUND") {
    return { name: "NotFoundError", _tag: "PtyNotFoundError", ptyID: ptyID ?? null, message, data: { message } };
  }
  if (error.code === "INVALID_REQUEST") {
    return { name: "BadRequest", _tag: "InvalidRequestError", message, data: { message, kind: "Body" } };
  }
  if (error.code === "UNAUTHORIZED") return { name: "UnauthorizedError", _tag: "UnauthorizedError", message, data: { message } };
  if (error.code === "FORBIDDEN") return { name: "ForbiddenError", _tag: "PtyForbiddenError", message, data: { message } };
  return { name: error.code, _tag: error.code, message, data: { message, code: error.code } };
}

/** The status of an error code (ptybroker's table). */
export function statusOf(code: ErrorCode): number {
  return ErrorStatus[code];
}

// ---- Who is calling ----

/** The API key in `Authorization`: `Bearer <key>`, or HTTP Basic with the key as the password (any user name). */
export function keyFromAuthorization(header: string | undefined): string | null {
  const token = bearer(header);
  if (token) return token;
  const basic = /^Basic\s+([A-Za-z0-9+/=]{1,4096})\s*$/i.exec(header ?? "");
  if (!basic) return null;
  let decoded: string;
  try {
    decoded = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(Uint8Array.from(atob(basic[1]), (c) => c.charCodeAt(0)));
  } catch {
    return null;
  }
  const colon = decoded.indexOf(":");
  const password = colon < 0 ? "" : decoded.slice(colon + 1);
  return password || null;
}

/**
 * Who holds the key the request carries (its tenant and scopes), or null when it carries none;
 * a wrong, expired or revoked key is 401.
 */
export async function ownerOf(env: Env, header: string | undefined): Promise<OwnerPrincipal | null> {
  if (header === undefined || header.trim() === "") return null;
  const key = keyFromAuthorization(header);
  if (!key) throw new ApiError("UNAUTHORIZED", "Authorization must be 'Bearer <api key>' or Basic with the API key as the password");
  const owner = await keyPrincipal(env, key);
  if (!owner) throw new ApiError("UNAUTHORIZED", "invalid API key");
  return owner;
}
