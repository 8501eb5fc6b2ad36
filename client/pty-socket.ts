// The WebSocket under one Pty (pty.ts): dials the session's connect URL, gives up on a socket that
// never opens or falls silent (pings, and a deadline of two intervals), and redials with backoff
// when its owner asks. It knows nothing of offsets, messages or why a socket closed: it hands each
// message and each drop to its owner, which decides (docs/protocol.md §5).
import { backoffDelay } from "../shared/backoff.js";
import { PING_TEXT } from "../shared/protocol.js";
import type { ConnectOptions, SocketLike } from "./pty-types.js";

/** What the socket's owner (the Pty) hears and decides. */
export interface SocketOwner {
  /** Whether the owner is closed for good: then nothing is dialled, and a socket that comes is closed. */
  isClosed(): boolean;
  /** Opens a new socket (where output should start is the owner's to say). */
  open(): Promise<SocketLike>;
  /** Opening failed (the owner retries or gives up). */
  openFailed(error: unknown): void;
  /** The socket opened: the owner's first frame goes now. */
  opened(socket: SocketLike): void;
  message(data: unknown): void;
  /** The socket closed or was given up; `opened` says whether it had opened. */
  dropped(code: number, reason: string, opened: boolean): void;
}

const OPEN_TIMEOUT_MS = 10_000;
const OPEN = 1;

export class PtySocket {
  private socket: SocketLike | undefined;
  private attempt = 0;
  private lastHeard = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeat: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly owner: SocketOwner,
    private readonly options: Pick<ConnectOptions, "reconnect" | "heartbeatMs">,
  ) {}

  /** Whether there is a socket and it is open. */
  isOpen(): boolean {
    return this.socket?.readyState === OPEN;
  }

  send(data: string | Uint8Array): void {
    this.socket?.send(data);
  }

  /** A connection was accepted (`hello`): the next drop redials without waiting long. */
  resetBackoff(): void {
    this.attempt = 0;
  }

  async dial(): Promise<void> {
    this.retryTimer = undefined;
    if (this.owner.isClosed()) return;
    let socket: SocketLike;
    try {
      socket = await this.owner.open();
    } catch (error) {
      this.owner.openFailed(error);
      return;
    }
    if (this.owner.isClosed()) {
      socket.close(1000);
      return;
    }
    this.socket = socket;
    socket.binaryType = "arraybuffer";
    let opened = false;
    const openTimer = setTimeout(() => this.abandon(socket, "open timed out"), OPEN_TIMEOUT_MS);
    socket.onopen = () => {
      opened = true;
      clearTimeout(openTimer);
      this.lastHeard = Date.now();
      this.owner.opened(socket);
      this.startHeartbeat(socket);
    };
    socket.onmessage = (event) => {
      this.lastHeard = Date.now();
      this.owner.message(event.data);
    };
    socket.onclose = (event) => {
      clearTimeout(openTimer);
      if (socket === this.socket) void this.owner.dropped(event.code, event.reason, opened);
    };
    socket.onerror = () => undefined; // a close event follows
  }

  /** Dials again after the backoff's next delay. */
  redialLater(): void {
    const delay = backoffDelay(this.attempt++, {
      baseMs: this.options.reconnect?.baseMs ?? 250,
      maxMs: this.options.reconnect?.maxMs ?? 5000,
    });
    this.retryTimer = setTimeout(() => void this.dial(), delay);
  }

  /** Lets go of a socket that dropped: its late events are not heard, its heartbeat stops. */
  forget(): void {
    this.socket = undefined;
    this.stopHeartbeat();
  }

  /** Final: no redial, no heartbeat, and the socket (if any) closed normally. */
  close(): void {
    clearTimeout(this.retryTimer);
    this.stopHeartbeat();
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.onclose = socket.onmessage = socket.onopen = null;
      socket.close(1000);
    }
  }

  /** Gives up on a socket that is silent or never opened, and redials at once. */
  private abandon(socket: SocketLike, why: string): void {
    if (socket !== this.socket) return;
    socket.onclose = socket.onmessage = socket.onopen = null;
    const terminate = (socket as { terminate?: () => void }).terminate;
    if (terminate) terminate.call(socket);
    else socket.close(4000, why);
    void this.owner.dropped(1006, why, true);
  }

  private startHeartbeat(socket: SocketLike): void {
    const every = this.options.heartbeatMs ?? 5000;
    this.stopHeartbeat();
    this.heartbeat = setInterval(() => {
      if (Date.now() - this.lastHeard >= 2 * every) this.abandon(socket, "heartbeat lost");
      else if (socket.readyState === OPEN) socket.send(PING_TEXT);
    }, every);
  }

  private stopHeartbeat(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }
}
