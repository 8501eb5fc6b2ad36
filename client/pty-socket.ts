// The WebSocket under one Pty (pty.ts): dials the session's connect URL, gives up on an attempt
// that does not open in time (its token fetch and its handshake alike), on a socket that falls
// silent (pings, and a deadline of two intervals), and redials with backoff when its owner asks;
// a nudge (the network or the page is back) redials at once or checks an open socket now. It
// knows nothing of offsets, messages or why a socket closed: it hands each message and each drop
// to its owner, which decides (docs/protocol.md §5, "What a client does on reconnect").
import { backoffDelay } from "../shared/backoff.js";
import { PING_TEXT } from "../shared/protocol.js";
import { PtyBrokerError } from "./errors.js";
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

/** An attempt to open (its token, then its handshake) that takes longer is given up and made again. */
const OPEN_TIMEOUT_MS = 5_000;
/** A nudged open socket is given up unless it hears something within this (or the heartbeat, if shorter). */
const PROBE_TIMEOUT_MS = 2_000;
/** A nudge leaves an attempt younger than this alone: the events of one return come in a burst. */
const FRESH_ATTEMPT_MS = 1_000;
const OPEN = 1;

/** Where the socket stands: nothing to do, a redial waiting for its backoff, an attempt under way, or open. */
type Phase = "idle" | "waiting" | "dialling" | "open";

export class PtySocket {
  private socket: SocketLike | undefined;
  private phase: Phase = "idle";
  private attempt = 0;
  /** Bumped by each dial: an attempt that settles after a newer one began, or after its deadline, is let go. */
  private dials = 0;
  private dialStarted = 0;
  private lastHeard = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private probeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly owner: SocketOwner,
    private readonly options: Pick<ConnectOptions, "reconnect" | "heartbeatMs" | "openTimeoutMs">,
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
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.owner.isClosed()) return;
    const mine = ++this.dials;
    this.phase = "dialling";
    this.dialStarted = Date.now();
    const openTimeout = this.options.openTimeoutMs ?? OPEN_TIMEOUT_MS;
    let socket: SocketLike;
    try {
      socket = await withDeadline(this.owner.open(), openTimeout, (late) => late.close(1000));
    } catch (error) {
      if (mine !== this.dials) return; // a newer attempt has taken over
      this.phase = "idle";
      // An attempt that used up its whole deadline (a silent network) has waited long enough:
      // the next one goes after the base delay, so a network that comes back is found within
      // about one deadline (docs/protocol.md §5, "What a client does on reconnect").
      if (Date.now() - this.dialStarted >= openTimeout) this.attempt = 0;
      this.owner.openFailed(error);
      return;
    }
    if (mine !== this.dials || this.owner.isClosed()) {
      socket.close(1000);
      return;
    }
    this.socket = socket;
    socket.binaryType = "arraybuffer";
    let opened = false;
    const openTimer = setTimeout(() => this.abandon(socket, "open timed out"), openTimeout);
    socket.onopen = () => {
      opened = true;
      clearTimeout(openTimer);
      this.phase = "open";
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
      if (socket !== this.socket) return;
      this.phase = "idle";
      void this.owner.dropped(event.code, event.reason, opened);
    };
    socket.onerror = () => undefined; // a close event follows
  }

  /** Dials again after the backoff's next delay. */
  redialLater(): void {
    const delay = backoffDelay(this.attempt++, {
      baseMs: this.options.reconnect?.baseMs ?? 250,
      maxMs: this.options.reconnect?.maxMs ?? 5000,
    });
    clearTimeout(this.retryTimer);
    this.phase = "waiting";
    this.retryTimer = setTimeout(() => void this.dial(), delay);
  }

  /**
   * The network or the page is back: a redial waiting for its backoff goes now (and the backoff
   * starts over); an attempt under way for a while (begun, most likely, on the network that went
   * away) is let go and made anew; an open socket is pinged and given up unless it hears
   * something soon. Nothing otherwise.
   */
  nudge(): void {
    if (this.owner.isClosed()) return;
    switch (this.phase) {
      case "waiting":
        this.attempt = 0;
        void this.dial();
        return;
      case "dialling":
        if (Date.now() - this.dialStarted < FRESH_ATTEMPT_MS) return;
        if (this.socket) letGo(this.socket, "given up after a nudge");
        this.socket = undefined;
        void this.dial();
        return;
      case "open":
        if (this.socket) this.probe(this.socket);
        return;
      case "idle":
        return;
    }
  }

  /** Lets go of a socket that dropped: its late events are not heard, its heartbeat stops. */
  forget(): void {
    this.socket = undefined;
    this.phase = "idle";
    this.stopHeartbeat();
  }

  /** Final: no redial, no heartbeat, and the socket (if any) closed normally. */
  close(): void {
    clearTimeout(this.retryTimer);
    this.stopHeartbeat();
    this.phase = "idle";
    this.dials++; // an attempt under way is closed when it settles
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.onclose = socket.onmessage = socket.onopen = null;
      socket.close(1000);
    }
  }

  /** Gives up on a socket that is silent or never opened, and tells the owner it dropped. */
  private abandon(socket: SocketLike, why: string): void {
    if (socket !== this.socket) return;
    letGo(socket, why);
    this.phase = "idle";
    void this.owner.dropped(1006, why, true);
  }

  /** A ping now; the socket is given up unless anything is heard before the probe's deadline. */
  private probe(socket: SocketLike): void {
    if (this.probeTimer !== undefined) return; // one probe at a time
    const sent = Date.now();
    socket.send(PING_TEXT);
    const within = Math.min(PROBE_TIMEOUT_MS, this.options.heartbeatMs ?? PROBE_TIMEOUT_MS);
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      if (this.lastHeard < sent) this.abandon(socket, "no answer to a ping after a nudge");
    }, within);
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
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
  }
}

/** Closes a socket without hearing from it again (`terminate` where `ws` has it: no closing handshake on a dead link). */
function letGo(socket: SocketLike, why: string): void {
  socket.onclose = socket.onmessage = socket.onopen = null;
  const terminate = (socket as { terminate?: () => void }).terminate;
  if (terminate) terminate.call(socket);
  else socket.close(4000, why);
}

/**
 * `promise`, or a NETWORK error once `ms` pass first; what it resolves with later is handed to
 * `late` (a socket that came too late is closed).
 */
function withDeadline<T>(promise: Promise<T>, ms: number, late: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      reject(new PtyBrokerError("NETWORK", `opening the socket took over ${ms} ms (timeout)`));
    }, ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        if (expired) late(value);
        else resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (!expired) reject(error);
      },
    );
  });
}
