// The web page: sign in with an API key (kept in sessionStorage) or open a share link
// (`#session=<id>&token=<token>`), list, create, kill and purge sessions, and attach an xterm.js
// terminal to one. The SDK replays the history on attach and reconnects by itself, resuming by
// offset; the page only renders what it is told. The attached session's id stays in the URL
// fragment, so a reload attaches again (and replays again). A session with more than 256 KiB of
// history is not replayed on attach: its current screen is drawn instead (`from: "auto"`), so a
// phone joining a long session receives a few KiB; reconnects still resume by offset.
//
// Phone first: the terminal takes the screen, the session list is a drawer (a narrow side column
// from 900 px on), and a row of extra keys (Esc, Tab, sticky Ctrl, arrows, |, ~) sits under the
// terminal on touch or narrow screens.
//
// The page's parts, each owning its own state and told of the others through callbacks wired
// here: ui.ts (the elements and messages), size.ts (the terminal's size: who sets it, fit and
// zoom), connection.ts (the attached terminal and its Pty), drawer.ts (the session list), input.ts
// (the keyboard and extra keys), share.ts (the Share panel). This file holds the mode, the broker
// and the URL fragment, signs in and out, and starts the page.
import "@xterm/xterm/css/xterm.css";
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import { PtyBroker } from "../client/index.js";
import { Connection, setAttached } from "./connection.js";
import { closeDrawerOnPhone, drawerOpen, SessionList, setDrawer, WIDE } from "./drawer.js";
import { Keyboard } from "./input.js";
import { typesInput } from "./keys.js";
import { SharePanel } from "./share.js";
import { TerminalSize } from "./size.js";
import { act, element, type Mode, say, showError, showReadOnlyHint, ui } from "./ui.js";

const KEY_STORAGE = "ptybroker.apiKey";
/**
 * `#inputQueueBytes=<n>`: the most bytes typed and not yet delivered that the terminal keeps (the
 * SDK's default, 1 MiB, without it); kept in the fragment across attaches and reloads.
 */
const INPUT_QUEUE_BYTES = positive(new URLSearchParams(location.hash.slice(1)).get("inputQueueBytes"));

function positive(text: string | null): number | undefined {
  return text !== null && /^\d{1,10}$/.test(text) && Number(text) > 0 ? Number(text) : undefined;
}

const term = new Terminal({
  cursorBlink: false,
  fontFamily: '"DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, ui-monospace, monospace',
  fontSize: 14,
  // At 1.0 the row is exactly the font's height and `_` (drawn below the baseline) is cut off at
  // 1× pixel density; 1.15 leaves it room.
  lineHeight: 1.15,
  scrollback: 10_000,
});
const fit = new FitAddon();
term.loadAddon(fit);
term.open(ui.terminal);

let mode: Mode = "signin";
let broker: PtyBroker | null = null;

function requireBroker(): PtyBroker {
  if (!broker) throw new Error("not signed in");
  return broker;
}

const size: TerminalSize = new TerminalSize(term, fit, { pty: () => connection.attached, exited: () => connection.exited });
const keyboard = new Keyboard(term, (data) => connection.send(data));
const connection: Connection = new Connection(term, size, {
  broker: requireBroker,
  mode: () => mode,
  inputQueueBytes: () => INPUT_QUEUE_BYTES,
  ended: () => {
    if (mode === "owner") list.refresh().catch(showError);
  },
  showing: closeDrawerOnPhone,
  attached: (id) => {
    share.attached(mode === "owner");
    rememberSession(id);
    list.markAttached();
    list.renderList();
  },
  detached: () => {
    share.detached();
    keyboard.release();
    list.markAttached();
  },
});
const list = new SessionList({
  lister: () => (mode === "owner" ? broker : null),
  broker: requireBroker,
  attachedId: () => connection.attached?.id ?? null,
  attachTo,
  attach: (open) => connection.attach(open),
  leave: () => {
    connection.detach();
    rememberSession(null);
  },
  fitted: () => size.fitted(),
});
const share = new SharePanel({ pty: () => connection.attached });
size.listen();
keyboard.listen();
share.listen();

// A viewer's keys go nowhere (the terminal takes no input, and nothing is sent): a hint says so.
function heldBack(event: Event): void {
  if (!connection.attached?.readOnly) return;
  const target = event.target instanceof Node ? event.target : null;
  if (target !== document.body && !ui.terminal.contains(target)) return;
  if (event instanceof KeyboardEvent && !typesInput(event)) return;
  showReadOnlyHint();
}
document.addEventListener("keydown", heldBack, true);
document.addEventListener("paste", heldBack, true);

// ---- modes and the URL ----

function setMode(next: Mode): void {
  mode = next;
  document.body.dataset.mode = next;
  ui.signinForm.hidden = next !== "signin";
  ui.sidebar.hidden = next !== "owner";
  ui.menu.hidden = next !== "owner";
  ui.signout.hidden = next !== "owner";
  ui.pane.hidden = next === "signin";
  if (next === "signin") ui.apikey.focus();
  size.layout();
}

function fragment(): URLSearchParams {
  return new URLSearchParams(location.hash.slice(1));
}

/** Keeps the attached session in the fragment (with the share token, in share mode). */
function rememberSession(id: string | null): void {
  const params = new URLSearchParams();
  if (id) params.set("session", id);
  const token = fragment().get("token");
  if (mode === "share" && token) params.set("token", token);
  if (INPUT_QUEUE_BYTES !== undefined) params.set("inputQueueBytes", String(INPUT_QUEUE_BYTES));
  const hash = params.toString();
  history.replaceState(null, "", hash ? `#${hash}` : location.pathname + location.search);
}

async function attachTo(id: string): Promise<void> {
  const b = requireBroker();
  // A large history is not replayed: the current screen is drawn instead (from: "auto"), unless
  // the link asks otherwise (`&from=0` replays everything, `&from=screen` always draws the screen).
  const asked = fragment().get("from");
  const from = asked === "screen" ? "screen" : asked !== null && /^\d{1,15}$/.test(asked) ? Number(asked) : "auto";
  await connection.attach((feed) => b.connect(id, { from, ...feed }));
}

// ---- signing in and out ----

async function signIn(apiKey: string): Promise<void> {
  const candidate = new PtyBroker({ url: location.origin, apiKey });
  const sessions = await candidate.list(); // proves the key before it is kept
  sessionStorage.setItem(KEY_STORAGE, apiKey);
  broker = candidate;
  ui.apikey.value = "";
  setMode("owner");
  list.render(sessions);
  const id = fragment().get("session");
  if (id) await attachTo(id);
}

function signOut(): void {
  connection.detach();
  sessionStorage.removeItem(KEY_STORAGE);
  broker = null;
  list.render([]);
  setMode("signin");
  setDrawer(true);
  rememberSession(null);
}

ui.signinForm.addEventListener("submit", (event) => {
  event.preventDefault();
  act(() => signIn(ui.apikey.value.trim()));
});
ui.signout.addEventListener("click", signOut);
element("signout-drawer").addEventListener("click", signOut);
/** The open session's recording (asciicast v2), saved as `<id>.cast`. */
async function downloadRecording(): Promise<void> {
  const pty = connection.attached;
  if (!pty) return;
  const id = pty.id;
  const text = await requireBroker().recording(id);
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type: "application/x-asciicast" }));
  link.download = `${id}.cast`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
}

ui.record.addEventListener("click", () => act(downloadRecording));
ui.detach.addEventListener("click", () => {
  connection.detach();
  rememberSession(null);
  setDrawer(true);
});
ui.menu.addEventListener("click", () => {
  setDrawer(!drawerOpen());
  if (drawerOpen()) act(() => list.refresh());
  else term.focus();
});
list.listen();
// A phone turned sideways can become a desktop and back: the column opens, the drawer closes.
WIDE.addEventListener("change", () => setDrawer(WIDE.matches || connection.attached === null));
// A fragment edited by hand (or a share link pasted into this tab) starts over from it.
window.addEventListener("hashchange", () => location.reload());
// Back on a network, in view, or out of the back-forward cache: redial now rather than after the
// backoff, or check that an open socket still answers (docs/protocol.md §5, "What a client does on reconnect").
const nudge = () => connection.attached?.reconnectNow();
window.addEventListener("online", nudge);
window.addEventListener("pageshow", (event) => event.persisted && nudge());
document.addEventListener("visibilitychange", () => document.visibilityState === "visible" && nudge());

// ---- start ----

function start(): void {
  const params = fragment();
  const id = params.get("session");
  const token = params.get("token");
  setAttached(false);
  // The list is open beside the terminal on a desktop, and over it on a phone until one attaches.
  setDrawer(WIDE.matches || !id);
  if (id && token) {
    broker = new PtyBroker({ url: location.origin, token });
    setMode("share");
    act(() => attachTo(id));
    return;
  }
  const apiKey = sessionStorage.getItem(KEY_STORAGE);
  if (!apiKey) {
    setMode("signin");
    if (token) say("INVALID_REQUEST: a share link needs both session= and token=");
    return;
  }
  broker = new PtyBroker({ url: location.origin, apiKey });
  setMode("owner");
  act(async () => {
    await Promise.all([list.refresh(), id ? attachTo(id) : Promise.resolve()]);
  });
}

start();
