// The drawer: the session list (render, refresh, kill, purge, create) and whether it is open (a
// drawer over the terminal on a phone, a narrow column beside it from 900 px on, which the menu
// button folds away). This part owns the
// sessions last listed and the "Purge ended" confirmation; it hears of the broker and the
// attached terminal through `ListHooks` (main.ts wires them).
import { type Pty, type PtyBroker, PtyBrokerError, type EndReason, type Session } from "../client/index.js";
import type { Feed } from "./connection.js";
import type { Size } from "./size.js";
import { act, exitText, isEnded, setStatus, ui } from "./ui.js";

const SHOW_ENDED_STORAGE = "ptybroker.showEnded";
/** From this width on the session list is a column beside the terminal, not a drawer over it. */
export const WIDE = window.matchMedia("(min-width: 900px)");
/** "Purge ended" asks for a second click within this long. */
const CONFIRM_MS = 4000;

/** Why an ended session ended, in the list's tooltip. */
const REASON_TEXT: Record<EndReason, string> = {
  exit: "the process ended",
  deleted: "killed",
  timeout: "its time limit passed",
  idle: "idle too long",
  detached: "no client attached for too long",
  drain: "its runner shut down",
  oom: "out of memory: it passed its memory limit",
  runner_lost: "its runner was lost",
  failed: "the session failed",
};

/** Opens or closes the session list (a drawer on a phone, a column on a desktop). */
export function setDrawer(open: boolean): void {
  document.body.dataset.drawer = open ? "open" : "closed";
  ui.menu.setAttribute("aria-expanded", String(open));
}

export function drawerOpen(): boolean {
  return document.body.dataset.drawer === "open";
}

/** On a phone the list gives way to the terminal once one is attached. */
export function closeDrawerOnPhone(): void {
  if (!WIDE.matches) setDrawer(false);
}

/** What the list asks of the rest of the page. */
export interface ListHooks {
  /** The broker to list with: an owner's (API key), else null (signed out, or a share link). */
  lister(): PtyBroker | null;
  /** The broker, or a "not signed in" error. */
  broker(): PtyBroker;
  /** The attached session's id, or null. */
  attachedId(): string | null;
  attachTo(id: string): Promise<void>;
  /** Attaches the terminal to what `open` connects (connection.ts). */
  attach(open: (feed: Feed) => Promise<Pty>): Promise<void>;
  /** Detaches the terminal and forgets its session in the URL. */
  leave(): void;
  /** What fits the terminal's area now (size.ts). */
  fitted(): Size | null;
}

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

/** Local time for today's sessions, the local date for older ones. */
function shortTime(iso: string): string {
  const at = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, "0");
  if (at.toDateString() === new Date().toDateString()) {
    return `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
  }
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}`;
}

function rowButton(id: string, className: string): HTMLButtonElement | null {
  const row = ui.sessions.querySelector<HTMLTableRowElement>(`tr[data-id="${CSS.escape(id)}"]`);
  return row?.querySelector<HTMLButtonElement>(`button.${className}`) ?? null;
}

export class SessionList {
  /** The sessions last listed, newest last. */
  private listed: Session[] = [];
  private confirmTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly hooks: ListHooks) {}

  /** Listens to the list's own controls: new session, refresh, show ended, purge ended. */
  listen(): void {
    ui.newForm.addEventListener("submit", (event) => {
      event.preventDefault();
      act(() => this.createSession());
    });
    ui.refresh.addEventListener("click", () => act(() => this.refresh()));
    ui.showEnded.checked = localStorage.getItem(SHOW_ENDED_STORAGE) === "1";
    ui.showEnded.addEventListener("change", () => {
      localStorage.setItem(SHOW_ENDED_STORAGE, ui.showEnded.checked ? "1" : "0");
      this.renderList();
    });
    ui.purgeEnded.addEventListener("click", () => act(() => this.purgeEnded()));
  }

  markAttached(): void {
    const id = this.hooks.attachedId();
    for (const row of ui.sessions.tBodies[0]?.rows ?? []) row.classList.toggle("attached", row.dataset.id === id);
  }

  /**
   * The list, newest first. Ended sessions are left out unless "show ended" is ticked, all but the
   * attached one, whose end the terminal is showing.
   */
  renderList(): void {
    const body = ui.sessions.tBodies[0];
    if (!body) return;
    const listed = this.listed;
    const attachedId = this.hooks.attachedId();
    const ended = listed.filter(isEnded);
    ui.endedCount.textContent = String(ended.length);
    ui.purgeEnded.disabled = ended.length === 0;
    const shown = listed.filter((s) => ui.showEnded.checked || !isEnded(s) || s.id === attachedId);
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
      actions.append(button("attach", "attach", () => this.hooks.attachTo(s.id)));
      if (isEnded(s)) actions.append(button("purge", "purge", () => this.purge([s.id])));
      else actions.append(button("kill", "kill", () => this.kill(s.id)));
    }
    this.markAttached();
  }

  render(sessions: Session[]): void {
    this.listed = sessions;
    this.renderList();
  }

  /** Every session: `list()` follows the API's `nextCursor` through all pages. */
  async refresh(): Promise<void> {
    const broker = this.hooks.lister();
    if (!broker) return;
    this.render(await broker.list());
  }

  private async kill(id: string): Promise<void> {
    const b = this.hooks.broker();
    rowButton(id, "kill")?.setAttribute("disabled", "");
    try {
      await b.kill(id);
    } finally {
      await this.refresh();
    }
  }

  /** Deletes ended sessions for good: record, index row and output log (`DELETE ?purge=true`). */
  private async purge(ids: string[]): Promise<void> {
    const b = this.hooks.broker();
    for (const id of ids) rowButton(id, "purge")?.setAttribute("disabled", "");
    const attachedId = this.hooks.attachedId();
    if (attachedId !== null && ids.includes(attachedId)) this.hooks.leave();
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
      await this.refresh();
    }
  }

  private resetPurgeButton(): void {
    clearTimeout(this.confirmTimer);
    delete ui.purgeEnded.dataset.confirm;
    ui.purgeEnded.textContent = "Purge ended";
  }

  /** "Purge ended" asks for a second click: the ended sessions' output goes with them. */
  private purgeEnded(): Promise<void> {
    const ended = this.listed.filter(isEnded).map((s) => s.id);
    if (ended.length === 0) return Promise.resolve();
    if (ui.purgeEnded.dataset.confirm === undefined) {
      ui.purgeEnded.dataset.confirm = "";
      ui.purgeEnded.textContent = `Purge ${ended.length}? Click again`;
      this.confirmTimer = setTimeout(() => this.resetPurgeButton(), CONFIRM_MS);
      return Promise.resolve();
    }
    this.resetPurgeButton();
    return this.purge(ended);
  }

  private async createSession(): Promise<void> {
    const b = this.hooks.broker();
    const label = ui.label.value.trim();
    // The drawer covers the terminal on a phone: measure the terminal's area with it closed.
    closeDrawerOnPhone();
    const size = this.hooks.fitted() ?? { cols: 80, rows: 24 };
    try {
      await this.hooks.attach(({ onData, inputQueueBytes }) => b.create({ ...size, ...(label ? { label } : {}), onData, inputQueueBytes }));
      ui.label.value = "";
    } catch (error) {
      // Nothing was attached (a 429, a 4xx): the badge says "not attached", not a red "closed"
      // (the message line says why), and on a phone the list comes back, to try again from.
      if (this.hooks.attachedId() === null) {
        if (ui.status.dataset.state === "closed") setStatus("idle");
        setDrawer(true);
      }
      throw error;
    } finally {
      await this.refresh(); // created even if attaching failed
    }
  }
}
