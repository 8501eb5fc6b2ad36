// The Share panel (owner mode): a link for someone else to watch (viewer) or also type (writer)
// into the attached session, in the form the page opens as a share link
// (`#session=<id>&token=<token>`, main.ts). The token is minted by the SDK (`pty.token(role)`,
// `POST /v1/sessions/:id/tokens`, docs/protocol.md), for the lifetime chosen; a token cannot be
// revoked one by one (docs/security.md), so the panel says when the link expires. This part owns
// the panel and the link it shows; it hears of the attached terminal through `ShareHooks`.
import "./share.css";
import type { Pty } from "../client/index.js";
import { showError, ui } from "./ui.js";

export type ShareRole = "viewer" | "writer";

export interface ShareHooks {
  /** The attached terminal, or null. */
  pty(): Pty | null;
}

/** The share link the page opens for session `id` with `token` (main.ts's start()). */
export function shareLink(id: string, token: string): string {
  const fragment = new URLSearchParams({ session: id, token });
  return `${location.origin}${location.pathname}#${fragment.toString()}`;
}

/** The token's expiry (its `exp` claim, docs/security.md), or null if it cannot be read. */
function expiresAt(token: string): Date | null {
  try {
    const payload = token.split(".")[1] ?? "";
    const json = atob(payload.replace(/-/g, "+").replace(/_/g, "/"));
    const { exp } = JSON.parse(json) as { exp?: unknown };
    return typeof exp === "number" ? new Date(exp * 1000) : null;
  } catch {
    return null;
  }
}

const DURATION_TEXT: Record<string, string> = { "3600": "1 hour", "86400": "1 day", "604800": "7 days" };

function expiryText(role: ShareRole, ttlSec: string, at: Date | null): string {
  const who = role === "viewer" ? "Anyone with this link can watch (not type)" : "Anyone with this link can watch and type";
  const when = at ? `${at.toLocaleString([], { dateStyle: "medium", timeStyle: "short" })}` : "a time unknown";
  return `${who} until ${when} (${DURATION_TEXT[ttlSec] ?? `${ttlSec} s`}); it cannot be revoked before then.`;
}

export class SharePanel {
  /** Bumped by every mint, close and detach: a token minted for a panel since changed is dropped. */
  private generation = 0;

  constructor(private readonly hooks: ShareHooks) {}

  listen(): void {
    ui.share.addEventListener("click", () => (ui.sharePanel.hidden ? this.open() : this.close()));
    ui.shareClose.addEventListener("click", () => this.close());
    ui.sharePanel.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.close();
    });
    ui.shareForm.addEventListener("submit", (event) => event.preventDefault());
    ui.shareRole.addEventListener("change", () => this.mint());
    ui.shareTtl.addEventListener("change", () => this.mint());
    ui.shareLink.addEventListener("focus", () => ui.shareLink.select());
    ui.shareCopy.addEventListener("click", () => {
      this.copy().catch(showError);
    });
  }

  /** A terminal was attached: the button shows in owner mode (a share link's page cannot mint). */
  attached(owner: boolean): void {
    this.close();
    ui.share.hidden = !owner;
  }

  detached(): void {
    this.close();
    ui.share.hidden = true;
  }

  /** Every opening starts from the least a link can do: a viewer, for an hour. */
  private open(): void {
    ui.shareRole.value = "viewer";
    ui.shareTtl.value = "3600";
    ui.sharePanel.hidden = false;
    ui.share.setAttribute("aria-expanded", "true");
    this.mint();
  }

  private close(): void {
    this.generation++;
    ui.sharePanel.hidden = true;
    ui.share.setAttribute("aria-expanded", "false");
    this.clear();
  }

  private clear(): void {
    ui.shareLink.value = "";
    ui.shareExpiry.textContent = "";
    ui.shareCopy.textContent = "Copy";
    ui.shareCopy.disabled = true;
    delete ui.sharePanel.dataset.role;
  }

  /** Mints a token for the role and lifetime chosen and shows its link, selected. */
  private mint(): void {
    const pty = this.hooks.pty();
    if (!pty) return;
    const mine = ++this.generation;
    const role = ui.shareRole.value === "writer" ? "writer" : "viewer";
    const ttlSec = ui.shareTtl.value;
    this.clear();
    pty
      .token(role, { ttlSec: Number(ttlSec) })
      .then((token) => {
        if (mine !== this.generation) return;
        ui.shareLink.value = shareLink(pty.id, token);
        ui.shareExpiry.textContent = expiryText(role, ttlSec, expiresAt(token));
        ui.sharePanel.dataset.role = role;
        ui.shareCopy.disabled = false;
        ui.shareLink.focus();
        ui.shareLink.select();
      })
      .catch((error: unknown) => {
        if (mine === this.generation) showError(error);
      });
  }

  /** The link to the clipboard where the browser allows it; otherwise it stays selected to copy by hand. */
  private async copy(): Promise<void> {
    ui.shareLink.focus();
    ui.shareLink.select();
    if (!navigator.clipboard) {
      ui.shareCopy.textContent = "Selected: copy it";
      return;
    }
    try {
      await navigator.clipboard.writeText(ui.shareLink.value);
      ui.shareCopy.textContent = "Copied";
    } catch {
      ui.shareCopy.textContent = "Selected: copy it";
    }
  }
}
