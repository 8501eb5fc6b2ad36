// The one place errors become responses: `{"error": {"code", "message"}}` with the code's
// status, or, for a WebSocket upgrade, a socket closed with the matching close code.
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ApiError, CloseCode, type ErrorCode } from "../../shared/errors.js";
import { log } from "../../shared/log.js";

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof HTTPException) {
    const byStatus: Record<number, ErrorCode> = {
      400: "INVALID_REQUEST",
      401: "UNAUTHORIZED",
      403: "FORBIDDEN",
      404: "NOT_FOUND",
      413: "PAYLOAD_TOO_LARGE",
    };
    return new ApiError(byStatus[err.status] ?? "INTERNAL", err.message || "request failed");
  }
  return new ApiError("INTERNAL", "internal error");
}

const CLOSE_FOR: Partial<Record<ErrorCode, number>> = {
  UNAUTHORIZED: CloseCode.Unauthorized,
  FORBIDDEN: CloseCode.Forbidden,
  NOT_FOUND: CloseCode.NotFound,
  SESSION_EXITED: CloseCode.SessionEnded,
  QUOTA_EXCEEDED: 1013, // try again later
  INTERNAL: 1011,
};

/** Whether a client upgrade asked for raw mode, by query or by subprotocol. */
export function wantsRaw(request: Request): { raw: boolean; subprotocol: boolean } {
  const subprotocol = (request.headers.get("sec-websocket-protocol") ?? "").split(",").some((p) => p.trim() === "raw");
  return { raw: subprotocol || new URL(request.url).searchParams.get("mode") === "raw", subprotocol };
}

/**
 * Browsers cannot read a refused handshake's status, so a client's refusal is a socket that
 * opens, says why (framed mode) and closes with the matching code (DESIGN §5).
 */
export function refuseSocket(error: ApiError, request: Request): Response {
  const { raw, subprotocol } = wantsRaw(request);
  const { 0: client, 1: server } = new WebSocketPair();
  server.accept();
  if (!raw) server.send(JSON.stringify({ type: "error", code: error.code, message: error.message }));
  server.close(CLOSE_FOR[error.code] ?? 1008, error.message.slice(0, 120));
  const headers = subprotocol ? { "sec-websocket-protocol": "raw" } : undefined;
  return new Response(null, { status: 101, webSocket: client, headers });
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
  return c.json(error.toBody(), error.status as 400, headers);
}
