// The page's elements (by id, from index.html) and what every part of it says with them: the
// message line, the connection's status badge, the read-only hint, and how a session's end reads.
// No state of its own but the hint's timer.
import { type EndReason, PtyBrokerError, type Session } from "../client/index.js";

/** Sign-in form, an owner's list and terminal (API key), or one shared session (share link). */
export type Mode = "signin" | "owner" | "share";

export function element<T extends HTMLElement = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

export const ui = {
  menu: element<HTMLButtonElement>("menu"),
  status: element("status"),
  size: element<HTMLButtonElement>("size"),
  readonly: element("readonly"),
  title: element("session-title"),
  message: element("message"),
  signout: element<HTMLButtonElement>("signout"),
  detach: element<HTMLButtonElement>("detach"),
  record: element<HTMLButtonElement>("record"),
  signinForm: element<HTMLFormElement>("signin-form"),
  apikey: element<HTMLInputElement>("apikey"),
  sidebar: element("sidebar"),
  newForm: element<HTMLFormElement>("new-form"),
  label: element<HTMLInputElement>("label"),
  refresh: element<HTMLButtonElement>("refresh"),
  showEnded: element<HTMLInputElement>("show-ended"),
  endedCount: element("ended-count"),
  purgeEnded: element<HTMLButtonElement>("purge-ended"),
  sessions: element<HTMLTableElement>("sessions"),
  empty: element("empty"),
  pane: element("pane"),
  terminal: element("terminal"),
  keys: element("keys"),
  hint: element("readonly-hint"),
  share: element<HTMLButtonElement>("share"),
  sharePanel: element("share-panel"),
  shareForm: element<HTMLFormElement>("share-form"),
  shareRole: element<HTMLSelectElement>("share-role"),
  shareTtl: element<HTMLSelectElement>("share-ttl"),
  shareLink: element<HTMLInputElement>("share-link"),
  shareCopy: element<HTMLButtonElement>("share-copy"),
  shareExpiry: element("share-expiry"),
  shareClose: element<HTMLButtonElement>("share-close"),
};

// ---- messages and badges ----

export function say(text: string, kind: "error" | "info" = "error"): void {
  ui.message.textContent = text;
  ui.message.dataset.kind = kind;
  ui.message.hidden = text === "";
}

/** An error in the message line; a refusal that says when to retry (429's Retry-After) says it too. */
export function showError(error: unknown): void {
  if (error instanceof PtyBrokerError) say(`${error.code}: ${error.message}${retryText(error.retryAfterSec)}`);
  else say(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}

/** " — try again in 12 s" for an answer's Retry-After (seconds), or "" without one. */
export function retryText(retryAfterSec: number | undefined): string {
  return retryAfterSec !== undefined && retryAfterSec > 0 ? ` — try again in ${Math.ceil(retryAfterSec)} s` : "";
}

/** How long the read-only hint stays up after the last key a viewer typed. */
const HINT_MS = 3000;
let hintTimer: ReturnType<typeof setTimeout> | undefined;

/**
 * A viewer's keys are not sent (the terminal takes no input): a hint over the terminal says so,
 * without taking the focus or blocking anything, and goes away by itself.
 */
export function showReadOnlyHint(): void {
  ui.hint.hidden = false;
  clearTimeout(hintTimer);
  hintTimer = setTimeout(() => {
    ui.hint.hidden = true;
  }, HINT_MS);
}

/** Runs a user action: clears the previous message, shows any failure. */
export function act(action: () => Promise<void>): void {
  say("");
  action().catch(showError);
}

const STATE_TEXT: Record<string, string> = {
  idle: "not attached",
  connecting: "connecting…",
  open: "connected",
  reconnecting: "reconnecting…",
  closed: "closed",
};

export function setStatus(state: string, text = STATE_TEXT[state] ?? state): void {
  ui.status.dataset.state = state;
  ui.status.textContent = text;
  ui.status.title = text;
}

/** How an ended session reads: its exit, and what ended it when that was not the process itself. */
export function exitText(status: string, exitCode: number | null, signal: string | null, reason: EndReason | null): string {
  if (status !== "exited") return status; // lost, failed
  const how = exitCode !== null ? `code ${exitCode}` : (signal ?? "signal");
  return reason && reason !== "exit" ? `exited (${how}, ${reason})` : `exited (${how})`;
}

export function isEnded(session: Session): boolean {
  return session.status === "exited" || session.status === "lost" || session.status === "failed";
}
