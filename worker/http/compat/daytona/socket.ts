// Daytona's PTY WebSocket (`GET .../process/pty/:id/connect`) over a session's own raw-mode
// client socket: the Worker holds both ends and translates. To the Daytona client: first the text
// `{"type":"control","status":"connected"}` (once the session object let the socket in, which
// for a held session is once its process started), then the output as binary frames; every
// frame it sends, text or binary, is input. When the session ends (the object closes its socket
// with 4010 after the last byte), the close Daytona's daemon sends: 1000 or 1011 with the exit
// code as JSON (shapes.ts, exitClose). Bounds are the session object's raw mode's: it cuts a
// client that fell too far behind (4008), which the Daytona client gets as 1008 "slow consumer".
import { CloseCode } from "../../../../shared/errors.js";
import { log } from "../../../../shared/log.js";
import type { sessionStub } from "../../../env.js";
import { closeQuietly, sendQuietly } from "../../../io/sockets.js";
import { closeReason, exitClose } from "./shapes.js";

type SessionStub = ReturnType<typeof sessionStub>;

const CONNECTED = JSON.stringify({ type: "control", status: "connected" });

/** The first subprotocol a client offered (the browser SDK offers `X-Daytona-SDK-Version~…`): agreed to, as Daytona's proxy does. */
function offeredProtocol(request: Request): string | undefined {
  const first = request.headers.get("sec-websocket-protocol")?.split(",")[0]?.trim();
  return first && /^[\x21-\x7e]{1,256}$/.test(first) ? first : undefined;
}

/**
 * A socket that opens, says what went wrong as Daytona's daemon does (a control message with
 * status `error`) and closes with 1011 and `{"error"}` (the SDK's PtyHandle reads either).
 */
export function refusedSocket(request: Request, message: string): Response {
  const { 0: client, 1: server } = new WebSocketPair();
  server.accept();
  server.send(JSON.stringify({ type: "control", status: "error", error: message }));
  server.close(1011, closeReason({ error: message }));
  return upgraded(client, request);
}

function upgraded(client: WebSocket, request: Request): Response {
  const protocol = offeredProtocol(request);
  return new Response(null, { status: 101, webSocket: client, headers: protocol ? { "sec-websocket-protocol": protocol } : {} });
}

/**
 * Connects to the session's object as a raw-mode client (the owner, or a viewer for a key with
 * only `sessions:read`; `from` as /v1's connect takes it; absent: everything retained) and
 * answers the Daytona client's upgrade with the translating end.
 */
export async function daytonaSocket(
  request: Request,
  stub: SessionStub,
  from: string | undefined,
  who: { role: "owner" | "viewer"; keyId: string | undefined },
): Promise<Response> {
  const headers = new Headers({ upgrade: "websocket", "x-ptyb-mode": "raw", "x-ptyb-role": who.role });
  if (from !== undefined) headers.set("x-ptyb-from", from);
  // The socket closes (4011) when the key it came with is revoked.
  if (who.keyId !== undefined) headers.set("x-ptyb-key", who.keyId);
  const res = await stub.fetch(new Request("https://session/connect", { headers }));
  const upstream = res.webSocket;
  if (res.status !== 101 || !upstream) return refusedSocket(request, `Failed to connect to PTY session: ${res.status}`);
  upstream.accept();
  const { 0: client, 1: server } = new WebSocketPair();
  server.accept();
  // Binary frames as ArrayBuffers (a Blob would need an await, and could overtake nothing in order).
  upstream.binaryType = "arraybuffer";
  server.binaryType = "arraybuffer";
  // Sent before anything of the session's: the listeners below run after this turn.
  server.send(CONNECTED);
  let closed = false;
  const closeClient = (code: number, reason: string) => {
    if (closed) return;
    closed = true;
    closeQuietly(server, code, reason);
    closeQuietly(upstream, 1000, "closed");
  };
  upstream.addEventListener("message", (event) => {
    // Raw mode: output only, as binary; a text frame (none is expected) goes on as its bytes.
    sendQuietly(server, typeof event.data === "string" ? new TextEncoder().encode(event.data) : event.data);
  });
  upstream.addEventListener("close", (event) => {
    if (closed) return;
    void upstreamClosed(stub, event.code, event.reason).then(({ code, reason }) => closeClient(code, reason));
  });
  // An error is followed by its close, which says what the client is told.
  upstream.addEventListener("error", (event) => log.warn("compat.daytona", { outcome: "upstream_error", error: event.message }));
  server.addEventListener("message", (event) => sendQuietly(upstream, event.data));
  server.addEventListener("close", () => {
    closed = true;
    closeQuietly(upstream, 1000, "client closed");
  });
  server.addEventListener("error", () => {
    closed = true;
    closeQuietly(upstream, 1000, "client failed");
  });
  return upgraded(client, request);
}

/** What the Daytona client is told when the session object closed its socket. */
async function upstreamClosed(stub: SessionStub, code: number, reason: string): Promise<{ code: number; reason: string }> {
  if (code === CloseCode.SessionEnded) {
    try {
      const session = await stub.get();
      if (!("failure" in session)) return exitClose(session);
    } catch (error) {
      log.warn("compat.daytona", { outcome: "exit_lookup_failed", error });
    }
    return { code: 1011, reason: closeReason({ error: "PTY session ended" }) };
  }
  if (code === CloseCode.SlowConsumer) return { code: 1008, reason: "slow consumer" };
  if (code === CloseCode.KeyRevoked) return { code, reason: closeReason({ error: reason || "API key revoked" }) };
  // 1001 (the edge restarts), 1013 (a replay failed), ...: a close the SDK reports as an error.
  const outgoing = code === 1001 || code === 1013 || code === 1009 || code === 1008 ? code : 1011;
  return { code: outgoing, reason: closeReason({ error: reason || `PTY session connection closed (${code})` }) };
}
