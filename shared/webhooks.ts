// Signed webhooks and the audit log (docs/protocol.md, "Webhooks" and "Audit log"): the shapes
// the edge answers and the SDK and CLI read. Shared by the Worker (its routes and the Tenant
// object's parts) and the client.
import { EVENT_TYPES, type TenantEventType } from "./session.js";

/** The events a hook may ask for: the tenant's lifecycle events (`GET /v1/events`). */
export const WEBHOOK_EVENTS = EVENT_TYPES;

/** A hook as listed: its secret is shown once, by the create. */
export interface WebhookInfo {
  id: string;
  url: string;
  /** The events it is sent; every lifecycle event when created without a filter. */
  events: TenantEventType[];
  createdAt: string;
}

/** The create's answer: the signing secret, this once. */
export interface CreatedWebhook extends WebhookInfo {
  secret: string;
}

/** One POST of one event to one hook. */
export interface WebhookAttempt {
  attempt: number;
  at: string;
  /** The receiver's HTTP status, or null when there was none (timeout, refused connection). */
  status: number | null;
  /** Why there was no 2xx, when there was none. */
  error: string | null;
  ms: number;
}

/** One event on its way to one hook, with its attempts (oldest first). */
export interface WebhookDelivery {
  /** `Ptybroker-Event-Id`: the event's id on `GET /v1/events`, the same on every attempt. */
  eventId: string;
  type: TenantEventType;
  createdAt: string;
  /** `pending` until a 2xx (`delivered`) or the 24 h window ends (`failed`). */
  state: "pending" | "delivered" | "failed";
  /** When the next attempt is due (pending only). */
  nextAttemptAt: string | null;
  /** Why a delivery failed without an attempt (too many pending for the tenant). */
  note?: string;
  attempts: WebhookAttempt[];
}

/** What a hook receives as its body. */
export interface WebhookEventBody {
  id: string;
  type: TenantEventType;
  at: string;
  session: unknown;
}

// ---- Audit log ----

export interface AuditActor {
  /** A key's id (`s…` for `API_KEYS`, `k…` minted), `tok:<jti>` for a session token, `admin`. */
  id: string;
  kind: "key" | "token" | "admin";
  /** A session token's role. */
  role?: "viewer" | "writer";
}

export const AUDIT_ACTIONS = [
  "session.create",
  "session.delete",
  "session.signal",
  "session.patch",
  "session.attach",
  "session.input",
  "token.mint",
  "key.create",
  "key.revoke",
  "webhook.create",
  "webhook.delete",
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export interface AuditEntry {
  id: string;
  at: string;
  actor: AuditActor;
  action: AuditAction;
  sessionId?: string;
  /** The client's address (`cf-connecting-ip`, else the first `x-forwarded-for` hop), or null. */
  ip: string | null;
  /** `ok`, or the error code the request was refused with. */
  outcome: string;
  /** Counts and names only (an input's byte count, a signal's name): never content. */
  detail?: Record<string, string | number | boolean | null>;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** Pass as `after` for the next page; null when this page is the last one so far. */
  nextCursor: string | null;
}
