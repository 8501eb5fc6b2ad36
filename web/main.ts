// The web page: sign in with an API key (kept in sessionStorage) or open a share link
// (`#session=<id>&token=<token>`), list, create and kill sessions, and attach an xterm.js
// terminal to one. The SDK replays the history on attach and reconnects by itself, resuming by
// offset; the page only renders what it is told. The attached session's id stays in the URL
// fragment, so a reload attaches again (and replays again).
import "@xterm/xterm/css/xterm.css";
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import { type EndReason, type Pty, PtyBroker, PtyBrokerError, type Session } from "../client/index.js";

type Mode = "signin" | "owner" | "share";

const KEY_STORAGE = "ptybroker.apiKey";
/** Window resizes are passed on to the session at most this often. */
const RESIZE_DEBOUNCE_MS = 100;

function element<T extends HTMLElement = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

const ui = {
  status: element("status"),
  readonly: element("readonly"),
  title: element("session-title"),
  message: element("message"),
  signout: element<HTMLButtonElement>("signout"),
  detach: element<HTMLButtonElement>("detach"),
  signinForm: element<HTMLFormElement>("signin-form"),
  apikey: element<HTMLInputElement>("apikey"),
  sidebar: element("sidebar"),
  newForm: element<HTMLFormElement>("new-form"),
  label: element<HTMLInputElement>("label"),
  refresh: element<HTMLButtonElement>("refresh"),
  sessions: element<HTMLTableElement>("sessions"),
  terminal: element("terminal"),
};

const term = new Terminal({
  cursorBlink: false,
  fontFamily: '"DejaVu Sans Mono", "Liberation Mono", ui-monospace, monospace',
  fontSize: 14,
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

// ---- modes and the URL ----

function setMode(next: Mode): void {
  mode = next;
  document.body.dataset.mode = next;
  ui.signinForm.hidden = next !== "signin";
  ui.sidebar.hidden = next !== "owner";
  ui.signout.hidden = next !== "owner";
  ui.terminal.hidden = next === "signin";
  if (next === "signin") ui.apikey.focus();
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

// ---- the terminal ----

function fitTerminal(): void {
  // A viewer may not resize the session: its terminal takes the session's size instead.
  if (ui.terminal.hidden || pty?.readOnly) return;
  fit.fit();
}

/** Gives a writable session the terminal's size, when it differs. */
function syncSize(): void {
  const current = pty;
  if (!current || current.readOnly || exited || current.state === "closed") return;
  const { cols, rows } = term;
  if (current.session?.cols === cols && current.session.rows === rows) return;
  current.resize({ cols, rows }).catch(showError);
}

let resizeTimer: ReturnType<typeof setTimeout> | undefined;
term.onResize(() => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(syncSize, RESIZE_DEBOUNCE_MS);
});
new ResizeObserver(() => fitTerminal()).observe(ui.terminal);

term.onData((data) => {
  if (pty && !pty.readOnly) pty.sendInput(data).catch(showError);
});
term.onBinary((data) => {
  if (pty && !pty.readOnly) pty.sendInput(Uint8Array.from(data, (c) => c.charCodeAt(0))).catch(showError);
});

function detach(): void {
  generation++;
  pty?.close();
  pty = null;
  exited = false;
  term.reset();
  term.options.disableStdin = false;
  ui.readonly.hidden = true;
  ui.detach.hidden = true;
  ui.title.textContent = "";
  setStatus("idle");
  markAttached();
}

/** Attaches the terminal to what `open` connects (an existing session, or a new one). */
async function attach(open: (onData: (bytes: Uint8Array) => void) => Promise<Pty>): Promise<void> {
  detach();
  const mine = ++generation;
  setStatus("connecting");
  let next: Pty;
  try {
    next = await open((bytes) => {
      if (mine === generation) term.write(bytes);
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
    if (pty === next && !exited) setStatus(state);
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
  next.on("resize", ({ cols, rows }) => {
    if (pty === next && next.readOnly) term.resize(cols, rows);
  });
  next.on("error", (error) => {
    if (pty === next) showError(error);
  });

  const session = next.session;
  ui.title.textContent = session?.label ? `${next.id} · ${session.label}` : next.id;
  ui.readonly.hidden = !next.readOnly;
  ui.detach.hidden = mode !== "owner";
  term.options.disableStdin = next.readOnly;
  if (session && isEnded(session)) {
    exited = true;
    setStatus("exited", exitText(session.status, session.exitCode, session.signal, session.reason));
  } else {
    setStatus(next.state);
  }
  if (next.readOnly && session) term.resize(session.cols, session.rows);
  else {
    fitTerminal();
    syncSize();
  }
  rememberSession(next.id);
  markAttached();
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

function render(sessions: Session[]): void {
  const body = ui.sessions.tBodies[0];
  if (!body) return;
  body.replaceChildren();
  for (const s of [...sessions].reverse()) {
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
    if (!isEnded(s)) actions.append(button("kill", "kill", () => kill(s.id)));
  }
  markAttached();
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
  await attach((onData) => b.connect(id, { onData }));
}

async function kill(id: string): Promise<void> {
  const b = requireBroker();
  const row = ui.sessions.querySelector<HTMLTableRowElement>(`tr[data-id="${CSS.escape(id)}"]`);
  row?.querySelector<HTMLButtonElement>("button.kill")?.setAttribute("disabled", "");
  try {
    await b.kill(id);
  } finally {
    await refresh();
  }
}

async function createSession(): Promise<void> {
  const b = requireBroker();
  const label = ui.label.value.trim();
  fitTerminal();
  try {
    await attach((onData) => b.create({ cols: term.cols, rows: term.rows, ...(label ? { label } : {}), onData }));
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
  rememberSession(null);
}

ui.signinForm.addEventListener("submit", (event) => {
  event.preventDefault();
  act(() => signIn(ui.apikey.value.trim()));
});
ui.signout.addEventListener("click", signOut);
ui.detach.addEventListener("click", () => {
  detach();
  rememberSession(null);
});
ui.newForm.addEventListener("submit", (event) => {
  event.preventDefault();
  act(createSession);
});
ui.refresh.addEventListener("click", () => act(refresh));
// A fragment edited by hand (or a share link pasted into this tab) starts over from it.
window.addEventListener("hashchange", () => location.reload());

// ---- start ----

function start(): void {
  const params = fragment();
  const id = params.get("session");
  const token = params.get("token");
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
