// The web page: sign in with an API key (kept in sessionStorage) or open a share link
// (`#session=<id>&token=<token>`), list, create, kill and purge sessions, and attach an xterm.js
// terminal to one. The SDK replays the history on attach and reconnects by itself, resuming by
// offset; the page only renders what it is told. The attached session's id stays in the URL
// fragment, so a reload attaches again (and replays again). A session with more than 256 KiB of
// history is not replayed on attach: its current screen is drawn instead (`from: "auto"`), so a
// phone joining a long session receives a few KiB; reconnects still resume by offset.
//
// Phone first: the terminal takes the screen, the session list is a drawer (a side column from
// 900 px on), and a row of extra keys (Esc, Tab, sticky Ctrl, arrows, |, ~) sits under the
// terminal on touch or narrow screens.
//
// Who sets the size (DESIGN §5): the terminal always shows the session's size, from `hello` and
// `resize` messages. A writer tells the server what fits its window, on every (re)connect and
// whenever that changes; the server applies it when this writer typed last (or before anyone
// typed). A viewer never sends a size. When the session's size does not fit the window, the
// terminal is drawn at the session's size and scaled down to fit: never reflowed for others.
import "@xterm/xterm/css/xterm.css";
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import {
  type EndReason,
  type Pty,
  PtyBroker,
  PtyBrokerError,
  type ScreenRepaint,
  type Session,
} from "../client/index.js";
import { type ExtraKey, keyBytes, withCtrl } from "./keys.js";

type Mode = "signin" | "owner" | "share";
interface Size {
  cols: number;
  rows: number;
}

const KEY_STORAGE = "ptybroker.apiKey";
const SHOW_ENDED_STORAGE = "ptybroker.showEnded";
/** Window resizes are passed on to the session at most this often. */
const RESIZE_DEBOUNCE_MS = 100;
/** From this width on the session list is a column beside the terminal, not a drawer over it. */
const WIDE = window.matchMedia("(min-width: 900px)");
/** xterm.js keeps this much room on the right for its scrollbar (the fit addon's figure). */
const SCROLLBAR_PX = 14;
/** "Purge ended" asks for a second click within this long. */
const CONFIRM_MS = 4000;

function element<T extends HTMLElement = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

const ui = {
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
};

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
let pty: Pty | null = null;
/** Bumped by every attach and detach: a connect that resolves after another began is dropped. */
let generation = 0;
let exited = false;
/** A session larger than the window: scaled to fit (the default) or at actual size, scrolled. */
let zoom: "fit" | "actual" = "fit";
/** The sessions last listed, newest last. */
let listed: Session[] = [];

// ---- messages and badges ----

function say(text: string, kind: "error" | "info" = "error"): void {
  ui.message.textContent = text;
  ui.message.dataset.kind = kind;
  ui.message.hidden = text === "";
}

function showError(error: unknown): void {
  if (error instanceof PtyBrokerError) say(`${error.code}: ${error.message}`);
  else say(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}

/** Runs a user action: clears the previous message, shows any failure. */
function act(action: () => Promise<void>): void {
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

function setStatus(state: string, text = STATE_TEXT[state] ?? state): void {
  ui.status.dataset.state = state;
  ui.status.textContent = text;
  ui.status.title = text;
}

/** How an ended session reads: its exit, and what ended it when that was not the process itself. */
function exitText(status: string, exitCode: number | null, signal: string | null, reason: EndReason | null): string {
  if (status !== "exited") return status; // lost, failed
  const how = exitCode !== null ? `code ${exitCode}` : (signal ?? "signal");
  return reason && reason !== "exit" ? `exited (${how}, ${reason})` : `exited (${how})`;
}

/** Why an ended session ended, in the list's tooltip. */
const REASON_TEXT: Record<EndReason, string> = {
  exit: "the process ended",
  deleted: "killed",
  timeout: "its time limit passed",
  idle: "idle too long",
  detached: "no client attached for too long",
  drain: "its runner shut down",
  runner_lost: "its runner was lost",
  failed: "the session failed",
};

function isEnded(session: Session): boolean {
  return session.status === "exited" || session.status === "lost" || session.status === "failed";
}

// ---- modes, the drawer and the URL ----

function setMode(next: Mode): void {
  mode = next;
  document.body.dataset.mode = next;
  ui.signinForm.hidden = next !== "signin";
  ui.sidebar.hidden = next !== "owner";
  ui.menu.hidden = next !== "owner";
  ui.signout.hidden = next !== "owner";
  ui.pane.hidden = next === "signin";
  if (next === "signin") ui.apikey.focus();
  layout();
}

/** Opens or closes the session list (a drawer on a phone, a column on a desktop). */
function setDrawer(open: boolean): void {
  document.body.dataset.drawer = open ? "open" : "closed";
  ui.menu.setAttribute("aria-expanded", String(open));
}

function drawerOpen(): boolean {
  return document.body.dataset.drawer === "open";
}

/** On a phone the list gives way to the terminal once one is attached. */
function closeDrawerOnPhone(): void {
  if (!WIDE.matches) setDrawer(false);
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
  const hash = params.toString();
  history.replaceState(null, "", hash ? `#${hash}` : location.pathname + location.search);
}

// ---- the terminal's size ----

/** What fits the terminal's area now at the page's font size, or null while it is not shown. */
function fitted(): Size | null {
  if (ui.pane.hidden || ui.terminal.clientWidth === 0 || ui.terminal.clientHeight === 0) return null;
  const proposed = fit.proposeDimensions();
  if (!proposed || !Number.isFinite(proposed.cols) || !Number.isFinite(proposed.rows)) return null;
  return { cols: Math.min(1000, proposed.cols), rows: Math.min(1000, proposed.rows) };
}

/** The attached session's size as last heard: `hello`, then `resize` messages. */
let sessionSize: Size | null = null;
/** `resize` messages heard on this attachment, so an older REST answer never undoes a newer one. */
let resizesHeard = 0;

/** The size the terminal shows: the attached session's, else what fits. */
function shownSize(): Size | null {
  if (pty && sessionSize) return sessionSize;
  return fitted();
}

/**
 * Gives the terminal the size it shows, then scales it down when that is larger than its area
 * (a session sized by a bigger window elsewhere): drawn at the session's size, never reflowed.
 */
function layout(): void {
  const size = shownSize();
  if (size && (size.cols !== term.cols || size.rows !== term.rows)) term.resize(size.cols, size.rows);
  const box = term.element;
  const screen = box?.querySelector<HTMLElement>(".xterm-screen");
  if (!box || !screen || ui.pane.hidden) return;
  const width = screen.offsetWidth + SCROLLBAR_PX;
  const height = screen.offsetHeight;
  box.style.width = `${width}px`;
  box.style.height = `${height}px`;
  const room = { width: ui.terminal.clientWidth, height: ui.terminal.clientHeight };
  const fitScale = width > 0 && height > 0 ? Math.min(1, room.width / width, room.height / height) : 1;
  const scale = zoom === "fit" ? fitScale : 1;
  ui.terminal.dataset.zoom = zoom;
  box.style.transform = scale < 1 ? `scale(${scale})` : "";
  // For whoever inspects the page (the tests do): the size drawn and the scale it is drawn at.
  ui.terminal.dataset.cols = String(term.cols);
  ui.terminal.dataset.rows = String(term.rows);
  ui.terminal.dataset.scale = scale.toFixed(3);
  const fits = fitted();
  ui.terminal.dataset.fits = fits ? `${fits.cols}x${fits.rows}` : "";
  const differs = pty !== null && size !== null && fits !== null && (size.cols !== fits.cols || size.rows !== fits.rows);
  ui.size.hidden = !differs;
  ui.terminal.dataset.differs = String(differs);
  if (differs && size) {
    const larger = fitScale < 1;
    const how = !larger ? "" : zoom === "actual" ? " 1:1" : " fit";
    ui.size.textContent = `${size.cols}×${size.rows}${how}`;
    ui.size.title =
      `the session is ${size.cols}×${size.rows}, this window fits ${fits?.cols}×${fits?.rows}` +
      (!larger ? "" : zoom === "fit" ? ": scaled to fit; tap for actual size" : ": actual size, scrolled; tap to scale to fit") +
      (pty?.readOnly ? "" : ". Typing here gives the session this window's size.");
    ui.size.setAttribute("aria-pressed", String(zoom === "actual"));
  }
}

ui.size.addEventListener("click", () => {
  zoom = zoom === "fit" ? "actual" : "fit";
  layout();
  term.focus();
});
/** The size last sent on the current connection, so a size is sent once per connection and change. */
let sentSize = "";

/** A writer tells the server what fits its window; the server decides whether it applies. */
function sendSize(): void {
  const current = pty;
  if (!current || current.readOnly || exited || current.state !== "open") return;
  const size = fitted();
  if (!size) return;
  const key = `${size.cols}x${size.rows}`;
  if (key === sentSize) return;
  sentSize = key;
  // Only over the open socket: REST resize always applies, which would override the policy.
  current.resize(size).catch(showError);
}

let resizeTimer: ReturnType<typeof setTimeout> | undefined;
function windowChanged(): void {
  layout();
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(sendSize, RESIZE_DEBOUNCE_MS);
}
new ResizeObserver(windowChanged).observe(ui.terminal);
// A phone's on-screen keyboard covers the bottom of the page where the browser does not resize
// it (iOS): the page takes the visible height, so the extra keys stay above the keyboard.
const visible = window.visualViewport;
if (visible && window.matchMedia("(pointer: coarse)").matches) {
  visible.addEventListener("resize", () => {
    if (visible.scale <= 1.01) document.body.style.height = `${visible.height}px`;
  });
}
term.onResize(() => requestAnimationFrame(layout));
void document.fonts.ready.then(windowChanged);

// ---- input: the keyboard and the extra keys ----

let ctrlHeld = false;
const ctrlKey = ui.keys.querySelector<HTMLButtonElement>('[data-key="ctrl"]');

function setCtrl(held: boolean): void {
  ctrlHeld = held;
  ctrlKey?.setAttribute("aria-pressed", String(held));
}

function send(data: string | Uint8Array): void {
  if (pty && !pty.readOnly) pty.sendInput(data).catch(showError);
}

term.onData((data) => {
  if (ctrlHeld) {
    setCtrl(false);
    send(withCtrl(data));
  } else {
    send(data);
  }
});
term.onBinary((data) => send(Uint8Array.from(data, (c) => c.charCodeAt(0))));

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
    setCtrl(!ctrlHeld);
  } else {
    const ctrl = ctrlHeld;
    setCtrl(false);
    send(keyBytes(key as ExtraKey, { applicationCursor: term.modes.applicationCursorKeysMode, ctrl }));
  }
  term.focus();
});

// ---- attaching ----

function setAttached(attached: boolean, readOnly = false): void {
  document.body.dataset.attached = String(attached);
  document.body.dataset.readonly = String(readOnly);
}

function detach(): void {
  generation++;
  pty?.close();
  pty = null;
  exited = false;
  sentSize = "";
  sessionSize = null;
  resizesHeard = 0;
  setCtrl(false);
  term.reset();
  term.options.disableStdin = false;
  ui.readonly.hidden = true;
  ui.detach.hidden = true;
  ui.record.hidden = true;
  ui.title.textContent = "";
  setAttached(false);
  setStatus("idle");
  layout();
  markAttached();
}

/** What the terminal is fed: output bytes (stderr too, for `pty: false`), and a screen drawn in place of the history. */
interface Feed {
  onData: (bytes: Uint8Array) => void;
  onStderr: (bytes: Uint8Array) => void;
  onScreen: (screen: ScreenRepaint) => void;
}

/**
 * The session's screen instead of its history: the terminal at the screen's size, emptied, and
 * the repaint written into it; output then continues from the screen's offset.
 */
function drawScreen({ cols, rows, data }: ScreenRepaint): void {
  sessionSize = { cols, rows };
  if (term.cols !== cols || term.rows !== rows) term.resize(cols, rows);
  term.reset();
  term.write(data);
  layout();
}

/** Attaches the terminal to what `open` connects (an existing session, or a new one). */
async function attach(open: (feed: Feed) => Promise<Pty>): Promise<void> {
  detach();
  const mine = ++generation;
  setStatus("connecting");
  let next: Pty;
  try {
    next = await open({
      onData: (bytes) => {
        if (mine === generation) term.write(bytes);
      },
      onStderr: (bytes) => {
        if (mine === generation) term.write(bytes);
      },
      onScreen: (screen) => {
        if (mine === generation) drawScreen(screen);
      },
    });
  } catch (error) {
    if (mine === generation) setStatus("closed");
    throw error;
  }
  if (mine !== generation) {
    next.close();
    return;
  }
  pty = next;
  next.on("state", (state) => {
    if (pty !== next) return;
    if (!exited) setStatus(state);
    if (state === "open") {
      // A new connection: the session's size came with its `hello`; the server hears ours again.
      if (next.session) sessionSize = { cols: next.session.cols, rows: next.session.rows };
      sentSize = "";
      layout();
      sendSize();
    }
  });
  next.on("live", () => {
    // A size that changed while this connection was still replaying is not sent to it (the edge
    // sends `resize` to clients that are live): ask for the session once replay has caught up.
    const heard = resizesHeard;
    requireBroker()
      .get(next.id)
      .then((now) => {
        if (pty !== next || resizesHeard !== heard) return;
        if (sessionSize?.cols === now.cols && sessionSize.rows === now.rows) return;
        sessionSize = { cols: now.cols, rows: now.rows };
        layout();
      })
      .catch(() => undefined); // a best effort: the next resize message says it too
  });
  next.on("exit", ({ status, exitCode, signal, reason }) => {
    if (pty !== next) return;
    exited = true;
    setStatus("exited", exitText(status, exitCode, signal, reason));
    if (mode === "owner") refresh().catch(showError);
  });
  next.on("gap", ({ from, to }) => {
    if (pty === next) say(`history trimmed: bytes ${from}–${to} are no longer retained`, "info");
  });
  next.on("resize", (size) => {
    if (pty !== next) return;
    resizesHeard++;
    sessionSize = { cols: size.cols, rows: size.rows };
    layout();
  });
  next.on("error", (error) => {
    if (pty === next) showError(error);
  });

  const session = next.session;
  if (session) sessionSize = { cols: session.cols, rows: session.rows };
  // Pipes (`pty: false`) end lines with a bare \n, which a terminal's line discipline would
  // have turned into \r\n: the page does that itself for them.
  term.options.convertEol = session?.pty === false;
  ui.title.textContent = session?.label ? `${next.id} · ${session.label}` : next.id;
  ui.title.title = ui.title.textContent;
  ui.readonly.hidden = !next.readOnly;
  ui.detach.hidden = mode !== "owner";
  ui.record.hidden = false;
  term.options.disableStdin = next.readOnly;
  setAttached(true, next.readOnly);
  if (session && isEnded(session)) {
    exited = true;
    setStatus("exited", exitText(session.status, session.exitCode, session.signal, session.reason));
  } else {
    setStatus(next.state);
  }
  closeDrawerOnPhone();
  layout();
  sendSize();
  rememberSession(next.id);
  markAttached();
  renderList();
  term.focus();
}

// ---- the session list ----

function cell(row: HTMLTableRowElement, className: string, text: string): HTMLTableCellElement {
  const td = row.insertCell();
  td.className = className;
  td.textContent = text;
  td.title = text;
  return td;
}

function button(text: string, className: string, onClick: () => Promise<void>): HTMLButtonElement {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.textContent = text;
  b.addEventListener("click", () => act(onClick));
  return b;
}

function markAttached(): void {
  for (const row of ui.sessions.tBodies[0]?.rows ?? []) row.classList.toggle("attached", row.dataset.id === pty?.id);
}

/** Local time for today's sessions, the local date for older ones. */
function shortTime(iso: string): string {
  const at = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, "0");
  if (at.toDateString() === new Date().toDateString()) {
    return `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
  }
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}`;
}

/**
 * The list, newest first. Ended sessions are left out unless "show ended" is ticked, all but the
 * attached one, whose end the terminal is showing.
 */
function renderList(): void {
  const body = ui.sessions.tBodies[0];
  if (!body) return;
  const ended = listed.filter(isEnded);
  ui.endedCount.textContent = String(ended.length);
  ui.purgeEnded.disabled = ended.length === 0;
  const shown = listed.filter((s) => ui.showEnded.checked || !isEnded(s) || s.id === pty?.id);
  ui.empty.hidden = listed.length > 0;
  body.replaceChildren();
  for (const s of [...shown].reverse()) {
    const row = body.insertRow();
    row.dataset.id = s.id;
    row.dataset.status = s.status;
    cell(row, "id", s.id);
    cell(row, "label", s.label ?? "");
    const status = cell(row, "status", s.status === "exited" ? exitText(s.status, s.exitCode, s.signal, s.reason) : s.status);
    if (s.reason) status.title = `${status.textContent ?? ""}: ${REASON_TEXT[s.reason] ?? s.reason}`;
    cell(row, "created", shortTime(s.createdAt)).title = s.createdAt;
    const actions = cell(row, "actions", "");
    actions.append(button("attach", "attach", () => attachTo(s.id)));
    if (isEnded(s)) actions.append(button("purge", "purge", () => purge([s.id])));
    else actions.append(button("kill", "kill", () => kill(s.id)));
  }
  markAttached();
}

function render(sessions: Session[]): void {
  listed = sessions;
  renderList();
}

/** Every session: `list()` follows the API's `nextCursor` through all pages. */
async function refresh(): Promise<void> {
  if (mode !== "owner" || !broker) return;
  render(await broker.list());
}

function requireBroker(): PtyBroker {
  if (!broker) throw new Error("not signed in");
  return broker;
}

async function attachTo(id: string): Promise<void> {
  const b = requireBroker();
  // A large history is not replayed: the current screen is drawn instead (from: "auto"), unless
  // the link asks otherwise (`&from=0` replays everything, `&from=screen` always draws the screen).
  const asked = fragment().get("from");
  const from = asked === "screen" ? "screen" : asked !== null && /^\d{1,15}$/.test(asked) ? Number(asked) : "auto";
  await attach(({ onData, onStderr, onScreen }) => b.connect(id, { from, onData, onStderr, onScreen }));
}

function rowButton(id: string, className: string): HTMLButtonElement | null {
  const row = ui.sessions.querySelector<HTMLTableRowElement>(`tr[data-id="${CSS.escape(id)}"]`);
  return row?.querySelector<HTMLButtonElement>(`button.${className}`) ?? null;
}

async function kill(id: string): Promise<void> {
  const b = requireBroker();
  rowButton(id, "kill")?.setAttribute("disabled", "");
  try {
    await b.kill(id);
  } finally {
    await refresh();
  }
}

/** Deletes ended sessions for good: record, index row and output log (`DELETE ?purge=true`). */
async function purge(ids: string[]): Promise<void> {
  const b = requireBroker();
  for (const id of ids) rowButton(id, "purge")?.setAttribute("disabled", "");
  if (pty && ids.includes(pty.id)) {
    detach();
    rememberSession(null);
  }
  try {
    // A few at a time: a long list of ended sessions should not open a hundred requests at once.
    const queue = [...ids];
    const worker = async (): Promise<void> => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        await b.kill(id, { purge: true }).catch((error: unknown) => {
          if (!(error instanceof PtyBrokerError && error.code === "NOT_FOUND")) throw error;
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(4, ids.length) }, worker));
  } finally {
    await refresh();
  }
}

let confirmTimer: ReturnType<typeof setTimeout> | undefined;
function resetPurgeButton(): void {
  clearTimeout(confirmTimer);
  delete ui.purgeEnded.dataset.confirm;
  ui.purgeEnded.textContent = "Purge ended";
}

/** "Purge ended" asks for a second click: the ended sessions' output goes with them. */
function purgeEnded(): Promise<void> {
  const ended = listed.filter(isEnded).map((s) => s.id);
  if (ended.length === 0) return Promise.resolve();
  if (ui.purgeEnded.dataset.confirm === undefined) {
    ui.purgeEnded.dataset.confirm = "";
    ui.purgeEnded.textContent = `Purge ${ended.length}? Click again`;
    confirmTimer = setTimeout(resetPurgeButton, CONFIRM_MS);
    return Promise.resolve();
  }
  resetPurgeButton();
  return purge(ended);
}

async function createSession(): Promise<void> {
  const b = requireBroker();
  const label = ui.label.value.trim();
  // The drawer covers the terminal on a phone: measure the terminal's area with it closed.
  closeDrawerOnPhone();
  const size = fitted() ?? { cols: 80, rows: 24 };
  try {
    await attach(({ onData }) => b.create({ ...size, ...(label ? { label } : {}), onData }));
    ui.label.value = "";
  } finally {
    await refresh(); // created even if attaching failed
  }
}

// ---- signing in and out ----

async function signIn(apiKey: string): Promise<void> {
  const candidate = new PtyBroker({ url: location.origin, apiKey });
  const sessions = await candidate.list(); // proves the key before it is kept
  sessionStorage.setItem(KEY_STORAGE, apiKey);
  broker = candidate;
  ui.apikey.value = "";
  setMode("owner");
  render(sessions);
  const id = fragment().get("session");
  if (id) await attachTo(id);
}

function signOut(): void {
  detach();
  sessionStorage.removeItem(KEY_STORAGE);
  broker = null;
  render([]);
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
  detach();
  rememberSession(null);
  setDrawer(true);
});
ui.menu.addEventListener("click", () => {
  setDrawer(!drawerOpen());
  if (drawerOpen()) act(refresh);
  else term.focus();
});
ui.newForm.addEventListener("submit", (event) => {
  event.preventDefault();
  act(createSession);
});
ui.refresh.addEventListener("click", () => act(refresh));
ui.showEnded.checked = localStorage.getItem(SHOW_ENDED_STORAGE) === "1";
ui.showEnded.addEventListener("change", () => {
  localStorage.setItem(SHOW_ENDED_STORAGE, ui.showEnded.checked ? "1" : "0");
  renderList();
});
ui.purgeEnded.addEventListener("click", () => act(purgeEnded));
// A phone turned sideways can become a desktop and back: the column opens, the drawer closes.
WIDE.addEventListener("change", () => setDrawer(WIDE.matches || pty === null));
// A fragment edited by hand (or a share link pasted into this tab) starts over from it.
window.addEventListener("hashchange", () => location.reload());

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
    await Promise.all([refresh(), id ? attachTo(id) : Promise.resolve()]);
  });
}

start();
