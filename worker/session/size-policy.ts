// Who sets a session's size (docs/protocol.md §5, "Who sets the size"): it follows the writer
// that typed most recently, as tmux's `window-size latest` does. A client's `resize` applies
// when it comes from the writer or owner client that typed last, or from any writer or owner
// while no connected client has typed; any other client's requested size is remembered and
// applies when that client types. Viewers never resize (the session object refuses them before
// this). REST `resize` does not come through here: it always applies.
//
// State across hibernation: each client's requested size lives in its socket's attachment
// (clients/subscribers.ts); who typed last is one storage key. A last typer that has gone
// (closed, cut, or lost with an edge restart) holds nothing: the next writer's resize applies.
import type { SocketSubscriber, TermSize } from "../clients/subscribers.js";

const LAST_TYPER_KEY = "lastTyper";

export class SizePolicy {
  private lastTyper: string | null;

  constructor(
    private readonly storage: DurableObjectStorage,
    /** Whether the client socket with this id is still connected. */
    private readonly connected: (id: string) => boolean,
  ) {
    this.lastTyper = storage.kv.get<string>(LAST_TYPER_KEY) ?? null;
  }

  /**
   * A writer's or owner's `resize`: remembered as that client's size; true when the session
   * takes it now (it typed last, or no connected client has typed).
   */
  requested(sub: SocketSubscriber, size: TermSize): boolean {
    sub.size = { cols: size.cols, rows: size.rows };
    sub.persist();
    const holder = this.holder();
    return holder === null || holder === sub.id;
  }

  /**
   * A writer or owner client typed (its input is about to be sent): it holds the size from now
   * on. Returns the size it asked for, to apply if it differs, or null if it never asked.
   */
  typed(sub: SocketSubscriber): TermSize | null {
    if (this.lastTyper !== sub.id) {
      this.lastTyper = sub.id;
      this.storage.kv.put(LAST_TYPER_KEY, sub.id);
    }
    return sub.size;
  }

  /** The client that typed last, if it is still connected. */
  private holder(): string | null {
    if (this.lastTyper !== null && !this.connected(this.lastTyper)) {
      this.lastTyper = null;
      this.storage.kv.delete(LAST_TYPER_KEY);
    }
    return this.lastTyper;
  }
}
