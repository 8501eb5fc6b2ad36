// The one place errors become responses: `{"error": {"code", "message"}}` with the code's
// status, or, for a WebSocket upgrade, a socket closed with the matching close code
// (io/sockets.ts).
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ApiError, type ErrorCode } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import { refuseSocket } from "../io/sockets.js";
import { MethodNotAllowed } from "./not-found.js";

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof HTTPException) {
    const byStatus: Record<number, ErrorCode> = {
      400: "INVALID_REQUEST",
      401: "UNAUTHORIZED",
      403: "FORBIDDEN",
      404: "NOT_FOUND",
      405: "METHOD_NOT_ALLOWED",
      413: "PAYLOAD_TOO_LARGE",
    };
    return new ApiError(byStatus[err.status] ?? "INTERNAL", err.message || "request failed");
  }
  return new ApiError("INTERNAL", "internal error");
}

export function renderError(err: unknown, c: Context): Response {
  const error = toApiError(err);
  if (error.code === "INTERNAL") {
    log.error("http.error", { method: c.req.method, path: c.req.path, error: err });
  }
  // Runner routes answer plain HTTP errors: a runner reads the status and backs off.
  if (c.req.header("upgrade")?.toLowerCase() === "websocket" && c.req.path.startsWith("/v1/")) {
    return refuseSocket(error, c.req.raw);
  }
  const headers: Record<string, string> = {};
  if (error.retryAfterSec !== undefined) headers["retry-after"] = String(error.retryAfterSec);
  if (error instanceof MethodNotAllowed) headers.allow = error.allow.join(", ");
  return c.json(error.toBody(), error.status as 400, headers);
}
