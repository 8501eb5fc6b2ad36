// Sends and closes on accepted sockets. A socket may close between listing and sending;
// that is normal in a fan-out and not an error. And a client's upgrade refused as a socket
// that opens, says why and closes with the matching code.
import { type ApiError, CloseCode, type ErrorCode } from "../../shared/errors.js";

export function sendQuietly(ws: WebSocket, data: string | ArrayBuffer | ArrayBufferView): void {
  try {
    ws.send(data);
  } catch {
    // closed meanwhile
  }
}

export function closeQuietly(ws: WebSocket, code: number, reason: string): void {
  try {
    ws.close(code, reason);
  } catch {
    // already closed
  }
}

/**
 * A `Sec-WebSocket-Extensions` answer that agrees to no extension. workerd answers an upgrade
 * whose response has no such header with the client's own offer (permessage-deflate from
 * browsers and `ws`); an empty value is dropped on the way, and a name no client offers is
 * dropped from the agreement, so the socket ends up with no extension at all and no
 * `Sec-WebSocket-Extensions` header reaches the client (docs/protocol.md §1, Compression).
 */
export const NO_SOCKET_COMPRESSION = "x-ptyb-none";

/** An accepted upgrade (101) whose socket declines permessage-deflate: for `compress=deflate` clients. */
export function withoutSocketCompression(res: Response): Response {
  if (res.status !== 101 || !res.webSocket) return res;
  const headers = new Headers(res.headers);
  headers.set("sec-websocket-extensions", NO_SOCKET_COMPRESSION);
  return new Response(null, { status: 101, webSocket: res.webSocket, headers });
}

const CLOSE_FOR: Partial<Record<ErrorCode, number>> = {
  UNAUTHORIZED: CloseCode.Unauthorized,
  FORBIDDEN: CloseCode.Forbidden,
  NOT_FOUND: CloseCode.NotFound,
  SESSION_EXITED: CloseCode.SessionEnded,
  QUOTA_EXCEEDED: 1013, // try again later
  INTERNAL: 1011,
};

/**
 * Whether a client upgrade asked for raw mode, by query or by subprotocol; inside the session
 * object, whose request has no query, by the `x-ptyb-mode` the route set from them.
 */
export function wantsRaw(request: Request): { raw: boolean; subprotocol: boolean } {
  const subprotocol = (request.headers.get("sec-websocket-protocol") ?? "").split(",").some((p) => p.trim() === "raw");
  const byQuery = new URL(request.url).searchParams.get("mode") === "raw";
  return { raw: subprotocol || byQuery || request.headers.get("x-ptyb-mode") === "raw", subprotocol };
}

/**
 * Browsers cannot read a refused handshake's status, so a client's refusal is a socket that
 * opens, says why (framed mode) and closes with the matching code (docs/protocol.md §5,
 * "Refusals and close codes").
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
