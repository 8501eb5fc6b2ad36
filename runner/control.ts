// The runner's control socket to the RunnerPool object: registers capacity, receives spawn,
// serve and purge orders, and redials with backoff whenever the edge goes away (a deploy, a restart).
import WebSocket from "ws";
import { log } from "../shared/log.js";
import { PoolMessage, type RunnerControlMessage, parseMessage } from "../shared/protocol.js";
import { backoffDelay } from "../shared/backoff.js";
import type { RunnerConfig } from "./config.js";
import { CONTROL_PATH, edgeSocketUrl } from "./link-url.js";

export interface ControlHandlers {
  onMessage(message: PoolMessage): void;
  /** Keys of the sessions hosted now, re-announced on every (re)connect. */
  hostedSessions(): string[];
  onRegistered?(): void;
}

export class ControlLink {
  private socket: WebSocket | undefined;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
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
    const socket = this.socket;
    if (!socket || socket.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      socket.once("close", () => resolve());
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
      this.send({
        type: "register",
        runnerId: this.config.runnerId,
        capacity: this.config.capacity,
        sessions: this.handlers.hostedSessions(),
        ...(this.config.tenants ? { tenants: this.config.tenants } : {}),
      });
      log.info("control.registered", { runnerId: this.config.runnerId, url });
      this.handlers.onRegistered?.();
    });
    socket.on("message", (data, isBinary) => {
      if (isBinary) return log.warn("control.frame", { outcome: "unexpected_binary" });
      const parsed = parseMessage(PoolMessage, (data as Buffer).toString("utf8"), 1 << 20);
      if (!parsed.ok) return log.warn("control.message", { outcome: "invalid", reason: parsed.reason });
      this.handlers.onMessage(parsed.value);
    });
    socket.on("error", (error) => log.warn("control.error", { error }));
    socket.on("close", (code) => {
      if (this.stopped) return;
      const delay = backoffDelay(this.attempt++);
      log.warn("control.closed", { code, retryInMs: Math.round(delay) });
      this.retryTimer = setTimeout(() => this.dial(), delay);
    });
  }
}
