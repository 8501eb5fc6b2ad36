// The extra keys a phone keyboard lacks (as Termux and Blink have them), and the sticky Ctrl:
// what each key sends, and what Ctrl makes of the next key typed.

export type ExtraKey = "esc" | "tab" | "left" | "up" | "down" | "right" | "pipe" | "tilde";

const ARROW_LETTER: Record<string, string> = { up: "A", down: "B", right: "C", left: "D" };

/**
 * The bytes a key sends. Arrows follow the terminal's cursor-key mode (`ESC O A` in application
 * mode, as vim and less ask for; `ESC [ A` otherwise) and with Ctrl held send `ESC [ 1 ; 5 A`.
 */
export function keyBytes(key: ExtraKey, options: { applicationCursor: boolean; ctrl: boolean }): string {
  const arrow = ARROW_LETTER[key];
  if (arrow) {
    if (options.ctrl) return `\x1b[1;5${arrow}`;
    return options.applicationCursor ? `\x1bO${arrow}` : `\x1b[${arrow}`;
  }
  switch (key) {
    case "esc":
      return "\x1b";
    case "tab":
      return "\t";
    case "pipe":
      return options.ctrl ? "\x1c" : "|"; // Ctrl+| is Ctrl+\ on a US keyboard
    case "tilde":
      return options.ctrl ? "\x1e" : "~"; // Ctrl+~ is Ctrl+^
    default:
      return "";
  }
}

/**
 * What Ctrl makes of typed text: a letter or one of `@[\]^_` becomes its control code
 * (Ctrl+C is 0x03), space is NUL and `?` is DEL; anything else is sent as it is.
 */
export function withCtrl(data: string): string {
  if (data.length !== 1) return data;
  const c = data.toUpperCase().charCodeAt(0);
  if (c >= 0x40 && c <= 0x5f) return String.fromCharCode(c & 0x1f);
  if (data === " ") return "\x00";
  if (data === "?") return "\x7f";
  return data;
}

const MODIFIERS = new Set(["Shift", "Control", "Alt", "Meta", "AltGraph", "CapsLock", "NumLock", "ScrollLock", "Fn", "OS"]);

/**
 * Whether a key pressed in the terminal would type into its session: anything but a modifier on
 * its own, and the copy and select-all shortcuts a viewer uses to read (Ctrl/⌘+C, Ctrl+Shift+C,
 * Ctrl/⌘+A, Ctrl+Insert).
 */
export function typesInput(key: { key: string; ctrlKey: boolean; metaKey: boolean }): boolean {
  if (MODIFIERS.has(key.key)) return false;
  if (key.ctrlKey || key.metaKey) return !["c", "C", "a", "A", "Insert"].includes(key.key);
  return true;
}
