// The runner's control socket to the RunnerPool object: registers capacity, receives spawn,
// serve and purge orders, and redials with backoff whenever the edge goes away (a deploy, a restart).
import WebSocket from "ws";
import { log } from "../../shared/log.js";
import { PING_TEXT, PONG_TEXT, PoolMessage, type RunnerControlMessage, parseMessage } from "../../shared/protocol.js";
import { backoffDelay } from "../../shared/backoff.js";
import type { RunnerConfig } from "../config.js";
import { CONTROL_PATH, edgeSocketUrl } from "./link-url.js";

const HEARTBEAT_MS = 10_000;
/** How long stop() waits for the edge's answer to its close frame. */
const CLOSE_WAIT_MS = 2000;

export interface ControlHandlers {
  onMessage(message: PoolMessage): void;
  /** Keys of the sessions hosted now, re-announced on every (re)connect. */
  hostedSessions(): string[];
  /** Whether the runner is draining: said in every register, so a reconnect never reopens it to placements. */
  draining?(): boolean;
  onRegistered?(): void;
}

export class ControlLink {
  private socket: WebSocket | undefined;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastPong = 0;
  private stopped = false;

  constructor(
    private readonly config: RunnerConfig,
    private readonly handlers: ControlHandlers,
  ) {}

  start(): void {
    this.stopped = false;
    this.dial();
  }

  send(message: RunnerControlMessage): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.heartbeat) clearInterval(this.heartbeat);
    const socket = this.socket;
    if (!socket || socket.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      // An edge that never answers the close (a half-open connection) is not waited for.
      const cut = setTimeout(() => socket.terminate(), CLOSE_WAIT_MS);
      socket.once("close", () => {
        clearTimeout(cut);
        resolve();
      });
      socket.close(1001, "runner stopping");
    });
  }

  private dial(): void {
    const url = edgeSocketUrl(this.config.brokerUrl, CONTROL_PATH);
    const socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${this.config.runnerToken}`, "x-runner-id": this.config.runnerId },
      // No permessage-deflate: its contexts cost ~300 KiB per socket (see edge-link.ts).
      perMessageDeflate: false,
    });
    this.socket = socket;
    socket.on("open", () => {
      this.attempt = 0;
      this.startHeartbeat(socket);
      this.send({
        type: "register",
        runnerId: this.config.runnerId,
        capacity: this.config.capacity,
        // What every session here gets (RUNNER_SANDBOX; a runner that cannot make it does not start).
        sandbox: this.config.sandbox.kind,
        sessions: this.handlers.hostedSessions(),
        ...(this.handlers.draining?.() ? { draining: true } : {}),
        ...(this.config.tenants ? { tenants: this.config.tenants } : {}),
      });
      log.info("control.registered", { runnerId: this.config.runnerId, url });
      this.handlers.onRegistered?.();
    });
    socket.on("message", (data, isBinary) => {
      if (isBinary) return log.warn("control.frame", { outcome: "unexpected_binary" });
      if ((data as Buffer).byteLength === PONG_TEXT.length && (data as Buffer).toString("utf8") === PONG_TEXT) {
        this.lastPong = Date.now();
        return;
      }
      const parsed = parseMessage(PoolMessage, (data as Buffer).toString("utf8"), 1 << 20);
      if (!parsed.ok) return log.warn("control.message", { outcome: "invalid", reason: parsed.reason });
      this.handlers.onMessage(parsed.value);
    });
    socket.on("error", (error) => log.warn("control.error", { error }));
    socket.on("close", (code) => {
      if (this.heartbeat) clearInterval(this.heartbeat);
      this.heartbeat = undefined;
      if (this.stopped) return;
      const delay = backoffDelay(this.attempt++);
      log.warn("control.closed", { code, retryInMs: Math.round(delay) });
      this.retryTimer = setTimeout(() => this.dial(), delay);
    });
  }

  /**
   * A ping every 10 s (answered by the edge without waking the pool object); the pool takes a
   * runner silent for 30 s for gone, and this side redials when pongs stop.
   */
  private startHeartbeat(socket: WebSocket): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.lastPong = Date.now();
    this.heartbeat = setInterval(() => {
      if (Date.now() - this.lastPong > HEARTBEAT_MS * 2.5) {
        // Judged after this turn's I/O: a pong may be waiting unread behind a busy turn.
        setImmediate(() => {
          if (Date.now() - this.lastPong <= HEARTBEAT_MS * 2.5 || socket.readyState !== WebSocket.OPEN) return;
          log.warn("control.heartbeat", { outcome: "no_pong" });
          socket.terminate();
        });
        return;
      }
      if (socket.readyState === WebSocket.OPEN) socket.send(PING_TEXT);
    }, HEARTBEAT_MS);
  }
}
