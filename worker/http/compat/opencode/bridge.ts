// `GET /compat/opencode/pty/:id/connect`: OpenCode's WebSocket over ptybroker's framed one. The
// edge opens a framed connection to the session's object (as `/v1/sessions/:id/connect` does)
// and translates: output from `cursor` as text frames (text-frames.ts), then one binary frame
// `0x00` + `{"cursor": N}` where the replay meets live output, then live output as text frames;
// every client frame, text or binary, is input; at the end, close 4404 once all output is sent.
// docs/protocol.md, "Compatibility: OpenCode".
import type { TokenRole } from "../../../auth/tokens.js";
import { CloseCode } from "../../../../shared/errors.js";
import { type ServerMessage, decodeFrame, encodeInput } from "../../../../shared/protocol.js";
import { type Env, limits, sessionStub } from "../../../env.js";
import { closeQuietly, sendQuietly } from "../../../io/sockets.js";
import { TextFramer } from "./text-frames.js";

/** OpenCode's close code for a PTY that does not exist or has ended. */
export const PTY_GONE = 4404;

const encoder = new TextEncoder();

/** The `0x00` + JSON `{"cursor": N}` frame. */
export function cursorFrame(cursor: number): Uint8Array {
  const json = encoder.encode(JSON.stringify({ cursor }));
  const frame = new Uint8Array(1 + json.byteLength);
  frame.set(json, 1);
  return frame;
}

/** A socket that closes at once with `code`: how an upgrade is refused to a browser. */
export function closedSocket(code: number, reason: string): Response {
  const { 0: client, 1: server } = new WebSocketPair();
  server.accept();
  server.close(code, reason.slice(0, 120));
  return new Response(null, { status: 101, webSocket: client });
}

export interface BridgeRequest {
  tenant: string;
  id: string;
  /**
   * "owner" for the tenant's key; a ticket's own role: "writer" for one from connect-token, and
   * "viewer" for a /v1 viewer link, which reads and never types (the session object drops a
   * viewer's input).
   */
  role: "owner" | TokenRole;
  /** The offset asked for; "live" for `cursor=-1`. */
  from: number | "live";
  /** The API key the client came with (or that minted its ticket): the socket closes (4011) when it is revoked. */
  keyId: string | undefined;
}

/**
 * Opens the framed connection to the session's object, not yet accepted (the caller listens
 * first); a refusal comes back as an error message before `hello`.
 */
async function dialSession(env: Env, request: BridgeRequest, from: number | "live"): Promise<WebSocket | null> {
  const headers = new Headers({ upgrade: "websocket", "x-ptyb-mode": "framed", "x-ptyb-role": request.role });
  headers.set("x-ptyb-from", String(from));
  if (request.keyId !== undefined) headers.set("x-ptyb-key", request.keyId);
  const res = await sessionStub(env, request.tenant, request.id).fetch(new Request("https://session/connect", { headers }));
  return res.webSocket ?? null;
}

/**
 * The client's socket, bridged to the session's. A client's lag is counted as a raw client's
 * is (it cannot acknowledge): the bytes sent since its own last frame, at most twice
 * MAX_CLIENT_LAG_BYTES, beyond which it is closed with 4008 and reconnects from its cursor. The
 * edge acknowledges to the session what it has passed on.
 */
export async function bridge(env: Env, request: BridgeRequest): Promise<Response> {
  const upstream = await dialSession(env, request, request.from).catch(() => null);
  if (!upstream) return closedSocket(1011, "cannot reach the session");
  const { 0: client, 1: downstream } = new WebSocketPair();
  new Bridge(upstream, downstream, env, (from) => dialSession(env, request, from)).start();
  return new Response(null, { status: 101, webSocket: client });
}

class Bridge {
  /** Set where the output starts (`replay`, `gap` or `live`); null until then. */
  private framer: TextFramer | null = null;
  private ended = false;
  private closed = false;
  /** Bytes sent to the client since it last sent a frame (a raw client's lag). */
  private unheard = 0;
  private retried = false;
  /** Between a refused connection and the one dialled instead: the refused one's close is expected. */
  private redialling = false;
  private readonly maxInput: number;
  private readonly maxUnheard: number;

  constructor(
    private upstream: WebSocket,
    private readonly downstream: WebSocket,
    env: Env,
    private readonly redial: (from: number | "live") => Promise<WebSocket | null>,
  ) {
    const lim = limits(env);
    this.maxInput = lim.maxInputBytes;
    this.maxUnheard = 2 * lim.maxClientLagBytes;
  }

  start(): void {
    this.listenUpstream(this.upstream);
    this.downstream.addEventListener("message", (event) => this.fromClient(event.data));
    this.downstream.addEventListener("close", () => this.shut(1000, "client closed"));
    this.downstream.addEventListener("error", () => this.shut(1011, "client socket error"));
    // Binary messages as ArrayBuffer (workerd's default for this compatibility date is Blob).
    this.downstream.binaryType = "arraybuffer";
    this.downstream.accept();
  }

  private listenUpstream(socket: WebSocket): void {
    socket.addEventListener("message", (event) => {
      if (socket === this.upstream) this.fromSession(event.data);
    });
    socket.addEventListener("close", (event) => {
      if (socket === this.upstream) this.sessionClosed(event.code, event.reason);
    });
    socket.addEventListener("error", () => {
      if (socket === this.upstream) this.sessionClosed(1011, "session socket error");
    });
    socket.binaryType = "arraybuffer";
    socket.accept();
  }

  // ---- Session → client ----

  private fromSession(data: string | ArrayBuffer): void {
    if (this.closed) return;
    if (typeof data === "string") return this.control(JSON.parse(data) as ServerMessage);
    const frame = decodeFrame(new Uint8Array(data));
    if ((frame.op !== "output" && frame.op !== "stderr") || !this.framer) return;
    const framer = this.framer;
    const expected = framer.cursor + framer.holding;
    // Only what lies past what was framed (a resend after a restart may overlap it).
    const end = frame.offset + frame.data.byteLength;
    if (end <= expected) return;
    if (frame.offset > expected) this.text(framer.skipTo(frame.offset));
    const start = Math.max(frame.offset, framer.cursor + framer.holding);
    this.text(framer.push(start, frame.data.subarray(start - frame.offset)));
    sendQuietly(this.upstream, JSON.stringify({ type: "ack", offset: end }));
    if (this.unheard > this.maxUnheard) this.shut(CloseCode.SlowConsumer, "slow consumer: reconnect with cursor");
  }

  private control(message: ServerMessage): void {
    switch (message.type) {
      case "hello":
        return;
      case "replay":
        if (!this.framer) this.begin(message.from);
        return;
      case "gap":
        // What the log no longer holds: the client's cursor moves past it.
        if (!this.framer) this.begin(message.to);
        else this.text(this.framer.skipTo(message.to));
        this.cursor();
        return;
      case "live":
        if (!this.framer) this.begin(message.offset);
        this.cursor();
        return;
      case "exit":
        this.ended = true;
        if (this.framer) this.text(this.framer.flush());
        return this.shut(PTY_GONE, "pty exited");
      case "error":
        // Before any output, a refusal (the socket closes next); later, news such as input
        // dropped, which OpenCode's socket has no way to say: the connection goes on.
        if (!this.framer) this.refused(message.code, message.message);
        return;
      default:
        return; // resize, command, screen, pong: OpenCode's socket has no such messages
    }
  }

  private begin(offset: number): void {
    this.framer = new TextFramer(offset);
  }

  /** The cursor frame: where the client is, in bytes (what is held back of a cut character excluded). */
  private cursor(): void {
    if (this.framer) this.send(cursorFrame(this.framer.cursor), 0);
  }

  private text(text: string): void {
    if (text) this.send(text, text.length);
  }

  private send(data: string | Uint8Array, bytes: number): void {
    this.unheard += bytes;
    sendQuietly(this.downstream, data);
  }

  /**
   * The session's object refused or dropped the connection. A cursor past the session's output
   * (one no client of this session can hold) starts at the live output instead, as OpenCode's
   * own server does; a session that is not there is OpenCode's 4404.
   */
  private refused(code: string, message: string): void {
    if (code === "INVALID_OFFSET" && !this.framer && !this.retried) {
      this.retried = true;
      this.redialling = true;
      const old = this.upstream;
      void this.redial("live")
        .catch(() => null)
        .then((socket) => {
          this.redialling = false;
          closeQuietly(old, 1000, "redialled");
          if (!socket) return this.shut(1011, "cannot reach the session");
          if (this.closed) return closeQuietly(socket, 1000, "client closed");
          this.upstream = socket;
          this.listenUpstream(socket);
        });
      return;
    }
    if (code === "NOT_FOUND") return this.shut(PTY_GONE, "pty not found");
    this.shut(code === "QUOTA_EXCEEDED" ? 1013 : 1011, message);
  }

  private sessionClosed(code: number, reason: string): void {
    if (this.closed || this.redialling) return;
    if (code === CloseCode.SessionEnded || code === CloseCode.NotFound || this.ended) return this.shut(PTY_GONE, "pty exited");
    // 1001 (the edge restarting), 4008 and the like: the client reconnects from its cursor.
    const passable = code === 1001 || code === 1011 || code === 1013 || (code >= 4000 && code < 5000);
    this.shut(passable ? code : 1011, reason || "session connection closed");
  }

  // ---- Client → session ----

  private fromClient(data: string | ArrayBuffer): void {
    if (this.closed) return;
    this.unheard = 0;
    const bytes = typeof data === "string" ? encoder.encode(data) : new Uint8Array(data);
    // A paste larger than one input frame goes in pieces, in order.
    for (let at = 0; at < bytes.byteLength; at += this.maxInput) {
      sendQuietly(this.upstream, encodeInput(bytes.subarray(at, at + this.maxInput)));
    }
  }

  private shut(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    closeQuietly(this.downstream, code, reason.slice(0, 120));
    closeQuietly(this.upstream, 1000, "bridge closed");
  }
}
