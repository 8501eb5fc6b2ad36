// Input: the keyboard (xterm.js's data and binary events) and the row of extra keys under the
// terminal (keys.ts says what each key sends), with a sticky Ctrl. This part owns whether Ctrl is
// held; what is typed goes to the `send` it is given (the attached terminal's, connection.ts).
import type { Terminal } from "@xterm/xterm";
import { type ExtraKey, keyBytes, withCtrl } from "./keys.js";
import { ui } from "./ui.js";

export class Keyboard {
  private ctrlHeld = false;
  private readonly ctrlKey = ui.keys.querySelector<HTMLButtonElement>('[data-key="ctrl"]');

  constructor(
    private readonly term: Terminal,
    private readonly send: (data: string | Uint8Array) => void,
  ) {}

  listen(): void {
    const term = this.term;
    term.onData((data) => {
      if (this.ctrlHeld) {
        this.setCtrl(false);
        this.send(withCtrl(data));
      } else {
        this.send(data);
      }
    });
    term.onBinary((data) => this.send(Uint8Array.from(data, (c) => c.charCodeAt(0))));

    // A tap anywhere in the terminal's area types into it, also beside a terminal scaled down to fit.
    ui.terminal.addEventListener("click", () => {
      if (!term.options.disableStdin) term.focus();
    });
    // A tap on a key must not take the focus from the terminal (that would close a phone's keyboard).
    ui.keys.addEventListener("mousedown", (event) => event.preventDefault());
    ui.keys.addEventListener("click", (event) => {
      const key = (event.target as HTMLElement).closest<HTMLButtonElement>("button[data-key]")?.dataset.key;
      if (!key) return;
      if (key === "ctrl") {
        this.setCtrl(!this.ctrlHeld);
      } else {
        const ctrl = this.ctrlHeld;
        this.setCtrl(false);
        this.send(keyBytes(key as ExtraKey, { applicationCursor: term.modes.applicationCursorKeysMode, ctrl }));
      }
      term.focus();
    });
  }

  /** Lets go of a held Ctrl (the terminal was detached). */
  release(): void {
    this.setCtrl(false);
  }

  private setCtrl(held: boolean): void {
    this.ctrlHeld = held;
    this.ctrlKey?.setAttribute("aria-pressed", String(held));
  }
}
