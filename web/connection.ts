// The attached terminal: attaching it to what an `open` function connects (an existing session or
// a new one), showing the Pty's events (status, exit, gap, resize, errors), drawing a session's
// screen in place of its history, and detaching. This part owns the attachment: the Pty, whether
// its session ended, and a generation that drops a connect resolved after another one began. It
// hears of the rest of the page through `AttachmentHooks` (main.ts wires them).
//
// Replayed output is history: the queries in it (DA, CPR, OSC 10/11, DECRQM...) were answered
// when they were live, and xterm.js answering them again would type the answers into the session
// (docs/protocol.md §5, "Replies to replayed queries"). xterm.js emits its answers synchronously
// while it parses a write, and calls that write's callback right after: so this part counts the
// replayed writes not yet parsed, and while any is, drops the replies in what the terminal sends
// (shared/terminal-replies.ts); keystrokes, which come from DOM events, still go.
//
// What is typed is kept by the Pty until the process has it, and sent again after a reconnect
// (docs/protocol.md §5, "Input exactly once"): pending.ts shows it meanwhile, and a full queue
// (`inputQueueBytes`) is said plainly in the message line, until everything is delivered.
import type { Terminal } from "@xterm/xterm";
import { type Pty, type PtyBroker, PtyBrokerError, type ScreenRepaint } from "../client/index.js";
import { stripReplies } from "../shared/terminal-replies.js";
import { PendingInput } from "./pending.js";
import type { TerminalSize } from "./size.js";
import { exitText, isEnded, type Mode, say, setStatus, showError, ui } from "./ui.js";

/**
 * What the terminal is fed: output bytes (stderr too, for `pty: false`), and a screen drawn in
 * place of the history; and the bound of its input queue (undefined: the SDK's default).
 */
export interface Feed {
  onData: (bytes: Uint8Array) => void;
  onStderr: (bytes: Uint8Array) => void;
  onScreen: (screen: ScreenRepaint) => void;
  inputQueueBytes: number | undefined;
}

/** What the attachment asks of the rest of the page. */
export interface AttachmentHooks {
  /** The broker, or a "not signed in" error. */
  broker(): PtyBroker;
  mode(): Mode;
  /** The most bytes typed and not yet delivered that the terminal keeps (undefined: the SDK's default). */
  inputQueueBytes(): number | undefined;
  /** The attached session ended. */
  ended(): void;
  /** A terminal is about to be shown attached (and measured). */
  showing(): void;
  /** Attached to session `id`. */
  attached(id: string): void;
  /** Detached (the terminal is empty again). */
  detached(): void;
}

export function setAttached(attached: boolean, readOnly = false): void {
  document.body.dataset.attached = String(attached);
  document.body.dataset.readonly = String(readOnly);
}

export class Connection {
  private pty: Pty | null = null;
  /** Bumped by every attach and detach: a connect that resolves after another began is dropped. */
  private generation = 0;
  private ended = false;
  /** Output now is replay: from the start of an attach, or a socket's `hello`, to its `live`. */
  private replaying = false;
  /** Replayed writes (and screen repaints) given to the terminal and not yet parsed by it. */
  private unparsedReplay = 0;
  /** What is typed and not yet delivered, drawn over the terminal. */
  private readonly pending: PendingInput;
  /** The message line's "input queue full" text while it may still show it. */
  private queueFull = "";

  constructor(
    private readonly term: Terminal,
    private readonly size: TerminalSize,
    private readonly hooks: AttachmentHooks,
  ) {
    this.pending = new PendingInput(term);
  }

  /** The attached terminal, or null. */
  get attached(): Pty | null {
    return this.pty;
  }

  /** Whether the attached terminal's session has ended. */
  get exited(): boolean {
    return this.ended;
  }

  /**
   * Types into the attached session, unless it is read-only. While replayed output is being
   * parsed, the terminal's replies to the queries in it are left out.
   */
  send(data: string | Uint8Array): void {
    const pty = this.pty;
    if (!pty || pty.readOnly) return;
    if (this.unparsedReplay > 0 && typeof data === "string") data = stripReplies(data).kept;
    if (data.length > 0) pty.sendInput(data).catch((error: unknown) => this.notDelivered(pty, error));
  }

  /**
   * Typed input that will not arrive. A full queue is said plainly; input that the session's end,
   * a detach or a closed terminal left undelivered adds nothing to what the badge says.
   */
  private notDelivered(pty: Pty, error: unknown): void {
    if (pty !== this.pty) return;
    if (error instanceof PtyBrokerError && error.code === "QUOTA_EXCEEDED") {
      this.queueFull = `input queue full: ${pty.pendingInput} bytes typed are not yet delivered (the page keeps at most ${pty.inputQueueBytes}); keys typed past that are dropped`;
      say(this.queueFull);
      return;
    }
    if (error instanceof PtyBrokerError && (error.code === "SESSION_EXITED" || error.code === "CLOSED")) return;
    showError(error);
  }

  /** Everything typed is delivered (or given up): a queue-full message still up goes. */
  private drained(): void {
    if (this.queueFull && ui.message.textContent === this.queueFull) say("");
    this.queueFull = "";
  }

  /**
   * Writes output into the terminal; replayed output is counted until the terminal has parsed it
   * (`data-replaying` on the body says whether any is). A write left over from an earlier
   * attachment does not count for this one.
   */
  private write(bytes: Uint8Array | string, replayed: boolean): void {
    if (!replayed) return this.term.write(bytes);
    const generation = this.generation;
    this.countReplay(+1);
    this.term.write(bytes, () => {
      if (generation === this.generation) this.countReplay(-1);
    });
  }

  private countReplay(change: 1 | -1 | 0): void {
    this.unparsedReplay = change === 0 ? 0 : this.unparsedReplay + change;
    document.body.dataset.replaying = String(this.unparsedReplay > 0);
  }

  detach(): void {
    const term = this.term;
    this.generation++;
    this.countReplay(0);
    this.pty?.close();
    this.pty = null;
    this.pending.follow(null);
    this.drained();
    this.ended = false;
    this.size.reset();
    term.reset();
    term.options.disableStdin = false;
    ui.readonly.hidden = true;
    ui.detach.hidden = true;
    ui.record.hidden = true;
    ui.title.textContent = "";
    setAttached(false);
    setStatus("idle");
    this.size.layout();
    this.hooks.detached();
  }

  /**
   * The session's screen instead of its history: the terminal at the screen's size, emptied, and
   * the repaint written into it; output then continues from the screen's offset.
   */
  private drawScreen({ cols, rows, data }: ScreenRepaint): void {
    const term = this.term;
    this.size.heard({ cols, rows });
    if (term.cols !== cols || term.rows !== rows) term.resize(cols, rows);
    term.reset();
    this.write(data, true);
    this.size.layout();
  }

  /** Attaches the terminal to what `open` connects (an existing session, or a new one). */
  async attach(open: (feed: Feed) => Promise<Pty>): Promise<void> {
    const term = this.term;
    this.detach();
    const mine = ++this.generation;
    this.replaying = true;
    setStatus("connecting");
    let next: Pty;
    try {
      next = await open({
        onData: (bytes) => {
          if (mine === this.generation) this.write(bytes, this.replaying);
        },
        onStderr: (bytes) => {
          if (mine === this.generation) this.write(bytes, this.replaying);
        },
        onScreen: (screen) => {
          if (mine === this.generation) this.drawScreen(screen);
        },
        inputQueueBytes: this.hooks.inputQueueBytes(),
      });
    } catch (error) {
      if (mine === this.generation) setStatus("closed");
      throw error;
    }
    if (mine !== this.generation) {
      next.close();
      return;
    }
    this.pty = next;
    this.pending.follow(next);
    next.on("pending", (bytes) => {
      if (this.pty === next && bytes === 0) this.drained();
    });
    next.on("state", (state) => {
      if (this.pty !== next) return;
      // A new socket (after a reconnect) replays what was missed before it goes live.
      if (state === "open" || state === "reconnecting") this.replaying = true;
      if (!this.ended) setStatus(state);
      // A new connection: the session's size came with its `hello`; the server hears ours again.
      if (state === "open") this.size.connected(next.session);
    });
    next.on("live", () => {
      if (this.pty === next) this.replaying = false;
      // A size that changed while this connection was still replaying is not sent to it (the edge
      // sends `resize` to clients that are live): ask for the session once replay has caught up.
      this.size.caughtUp(
        () => this.hooks.broker().get(next.id),
        () => this.pty === next,
      );
    });
    next.on("exit", ({ status, exitCode, signal, reason }) => {
      if (this.pty !== next) return;
      this.ended = true;
      setStatus("exited", exitText(status, exitCode, signal, reason));
      this.hooks.ended();
    });
    next.on("gap", ({ from, to }) => {
      if (this.pty === next) say(`history trimmed: bytes ${from}–${to} are no longer retained`, "info");
    });
    next.on("resize", (size) => {
      if (this.pty !== next) return;
      this.size.resized(size);
    });
    next.on("error", (error) => {
      if (this.pty === next) showError(error);
    });

    const session = next.session;
    if (session) this.size.heard(session);
    // Pipes (`pty: false`) end lines with a bare \n, which a terminal's line discipline would
    // have turned into \r\n: the page does that itself for them.
    term.options.convertEol = session?.pty === false;
    ui.title.textContent = session?.label ? `${next.id} · ${session.label}` : next.id;
    ui.title.title = ui.title.textContent;
    ui.readonly.hidden = !next.readOnly;
    ui.detach.hidden = this.hooks.mode() !== "owner";
    ui.record.hidden = false;
    term.options.disableStdin = next.readOnly;
    setAttached(true, next.readOnly);
    if (session && isEnded(session)) {
      this.ended = true;
      setStatus("exited", exitText(session.status, session.exitCode, session.signal, session.reason));
    } else {
      setStatus(next.state);
    }
    this.hooks.showing();
    this.size.layout();
    this.size.sendSize();
    this.hooks.attached(next.id);
    term.focus();
  }
}
