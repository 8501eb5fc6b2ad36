// A WebSocket the runner dials to a session's Durable Object, redialled with backoff whenever
// it drops (a deploy, an edge restart, a network blip) until the edge says the session is
// over or the owner stops it. Heartbeats detect a dead edge that never sent a close.
import WebSocket from "ws";
import { backoffDelay } from "../../shared/backoff.js";
import { log } from "../../shared/log.js";
import { PING_TEXT, PONG_TEXT } from "../../shared/protocol.js";
import { CloseCode } from "../../shared/errors.js";

export interface EdgeLinkOptions {
  url: string;
  runnerToken: string;
  runnerId: string;
  /** The edge's credential for this one link (from the spawn or serve order). */
  linkToken: string;
  /** for logs */
  key: string;
  heartbeatMs?: number;
  /**
   * Whether this side has nothing in flight that the edge still has to answer (no output
   * waiting for its ack): only then may the link's liveness ping be an auto-responded text
   * ping (see startHeartbeat). Default: always.
   */
  settled?: () => boolean;
}

export interface EdgeLinkHandlers {
  onOpen(): void;
  /** An open link closed (it may be redialled): nothing sent now reaches the edge. */
  onDown?(): void;
  /** Text frames other than the heartbeat's pong, and binary frames. */
  onMessage(data: Buffer, isBinary: boolean): void;
  /** The edge refused the link or closed it for good: the session is over or unknown there. */
  onGone(reason: string): void;
}

/** How often a sender waiting for the socket's buffer to drain looks again. */
const BUFFER_POLL_MS = 5;
/**
 * Largest JSON message the runner takes from the edge: a `run` carries up to MAX_COMMAND_TEXT
 * (16,384) characters of command, up to 6 bytes each once escaped.
 */
export const MAX_EDGE_MESSAGE_BYTES = 128 * 1024;

/** HTTP answers to the upgrade, and close codes, that mean "do not redial". */
// 403: the link token is not this session's (it was placed elsewhere, or is a new incarnation).
const FINAL_STATUS = new Set([403, 404, 409]);
const FINAL_CLOSE = new Set<number>([CloseCode.SessionEnded, CloseCode.NotFound]);

export class EdgeLink {
  private socket: WebSocket | undefined;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** When anything last came from the edge (a pong, an ack, any message). */
  private lastHeard = 0;
  /** When this side last sent anything (the edge takes a link silent for 30 s for dead). */
  private lastSent = 0;
  private stopped = false;

  constructor(
    private readonly options: EdgeLinkOptions,
    private readonly handlers: EdgeLinkHandlers,
  ) {}

  start(): void {
    this.dial();
  }

  /** Sends if open; false when the frame could not be sent (it is then not sent at all). */
  send(data: string | Uint8Array): boolean {
    const socket = this.socket;
    if (socket?.readyState !== WebSocket.OPEN) return false;
    socket.send(data);
    this.lastSent = Date.now();
    return true;
  }

  /** Resolves once the socket holds at most `bytes` unsent, or is not open (then nothing waits). */
  async whenBuffered(bytes: number): Promise<void> {
    for (;;) {
      const socket = this.socket;
      if (socket?.readyState !== WebSocket.OPEN || socket.bufferedAmount <= bytes) return;
      await new Promise((resolve) => setTimeout(resolve, BUFFER_POLL_MS));
    }
  }

  /** Closes for good; no redial. */
  stop(code = 1000, reason = "closed"): void {
    this.stopped = true;
    this.clearTimers();
    const socket = this.socket;
    if (socket && socket.readyState !== WebSocket.CLOSED) socket.close(code, reason);
  }

  private dial(): void {
    if (this.stopped) return;
    const { url, runnerToken, runnerId, linkToken, key } = this.options;
    const socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${runnerToken}`, "x-runner-id": runnerId, "x-link-token": linkToken },
      maxPayload: 2 << 20,
      // Compressing every frame cost the runner ~10% of its CPU in a flood (zlib in its profile),
      // and its contexts ~300 KiB of memory per link; between runner and edge bandwidth is cheap.
      perMessageDeflate: false,
      // A client must mask its frames; an all-zero mask lets ws skip the copy and XOR of every
      // output byte (masking guards browsers' intermediaries, not a runner talking to its edge).
      generateMask: zeroMask,
    });
    this.socket = socket;
    socket.binaryType = "nodebuffer";
    let refused: string | undefined;
    let opened = false;
    socket.on("unexpected-response", (_req, res) => {
      const status = res.statusCode ?? 0;
      if (FINAL_STATUS.has(status)) refused = `the edge answered ${status}`;
      log.warn("link.refused", { key, status });
      res.resume();
      socket.terminate();
    });
    socket.on("open", () => {
      opened = true;
      this.attempt = 0;
      this.lastHeard = this.lastSent = Date.now();
      this.startHeartbeat(socket);
      this.handlers.onOpen();
    });
    socket.on("pong", () => {
      this.lastHeard = Date.now();
    });
    socket.on("message", (data: Buffer, isBinary) => {
      this.lastHeard = Date.now();
      if (!isBinary && data.byteLength === PONG_TEXT.length && data.toString("utf8") === PONG_TEXT) return;
      this.handlers.onMessage(data, isBinary);
    });
    socket.on("error", (error) => log.debug("link.error", { key, error }));
    socket.on("close", (code) => {
      if (this.socket !== socket) return;
      this.clearTimers();
      if (opened) this.handlers.onDown?.();
      if (this.stopped) return;
      if (refused || FINAL_CLOSE.has(code)) {
        this.stopped = true;
        this.handlers.onGone(refused ?? `the edge closed the link with ${code}`);
        return;
      }
      const delay = backoffDelay(this.attempt++);
      log.warn("link.closed", { key, code, retryInMs: Math.round(delay) });
      this.retryTimer = setTimeout(() => this.dial(), delay);
    });
  }

  /**
   * Two heartbeats, neither of which races the object's own sends:
   * - This side hears the edge through WebSocket ping frames when nothing else has come for a
   *   period: kj answers them below JavaScript (queueing the pong behind a send in progress),
   *   so they never wake the object.
   * - The edge hears this side through its frames, or, when the link has carried nothing this
   *   way for a period and nothing is waiting for an ack, the text ping that the object
   *   auto-responds to without waking. The auto-responded pong is written outside the object's
   *   send queue; next to a send in progress it trips workerd's "expected !currentlySending"
   *   and stalls the link (reproduced with 300 busy sessions: test/scale.test.ts), so it is
   *   sent only on a link with nothing in flight.
   * Silence for 2.5 periods ends the link (it is redialled).
   */
  private startHeartbeat(socket: WebSocket): void {
    const every = this.options.heartbeatMs ?? 10_000;
    this.heartbeat = setInterval(() => {
      const now = Date.now();
      const silent = now - this.lastHeard;
      if (silent > every * 2.5) {
        // Timers run before I/O in each turn of the event loop: after a long busy turn, frames
        // may be waiting unread. Judge once they have been read (setImmediate runs after I/O).
        setImmediate(() => {
          const unheard = Date.now() - this.lastHeard;
          if (unheard <= every * 2.5 || socket.readyState !== WebSocket.OPEN) return;
          log.warn("link.heartbeat", { key: this.options.key, outcome: "no_pong", silentMs: unheard });
          socket.terminate();
        });
        return;
      }
      if (socket.readyState !== WebSocket.OPEN) return;
      if (silent >= every) socket.ping();
      if (now - this.lastSent >= every && (this.options.settled?.() ?? true)) {
        socket.send(PING_TEXT);
        this.lastSent = now;
      }
    }, every / 2);
  }



  private clearTimers(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.retryTimer = undefined;
    this.heartbeat = undefined;
  }
}

function zeroMask(mask: Buffer): void {
  mask.fill(0);
}
