// The tenant's webhooks (`/v1/webhooks`, needs `webhooks:write`) and audit log (`/v1/audit`, a
// key with every scope): docs/protocol.md, "Webhooks" and "Audit log". `broker.webhooks` and
// `broker.audit` answer these; `verifyWebhook` (shared/webhook-signature.ts) checks what a
// receiver got.
import type { TenantEventType } from "../shared/session.js";
import type { AuditPage, CreatedWebhook, WebhookDelivery, WebhookInfo } from "../shared/webhooks.js";
import type { Http } from "./http.js";

export interface CreateWebhookOptions {
  /** The events sent; none = every lifecycle event. */
  events?: TenantEventType[];
  /** The signing secret (at least 16 visible characters); none = the edge makes one, answered once. */
  secret?: string;
}

export class WebhookCalls {
  constructor(private readonly http: Http) {}

  /** A new hook; its `secret` is answered this once. */
  create(url: string, options: CreateWebhookOptions = {}): Promise<CreatedWebhook> {
    return this.http.json("POST", "/v1/webhooks", { url, ...options });
  }

  async list(): Promise<WebhookInfo[]> {
    return (await this.http.json<{ webhooks: WebhookInfo[] }>("GET", "/v1/webhooks")).webhooks;
  }

  get(id: string): Promise<WebhookInfo> {
    return this.http.json("GET", `/v1/webhooks/${encodeURIComponent(id)}`);
  }

  /** Deletes it: nothing more is sent to it, pending deliveries included. */
  async delete(id: string): Promise<void> {
    await this.http.json("DELETE", `/v1/webhooks/${encodeURIComponent(id)}`);
  }

  /** Its deliveries, newest first, each with its attempts. */
  async deliveries(id: string): Promise<WebhookDelivery[]> {
    return (await this.http.json<{ deliveries: WebhookDelivery[] }>("GET", `/v1/webhooks/${encodeURIComponent(id)}/deliveries`)).deliveries;
  }
}

export interface AuditPageOptions {
  /** A `nextCursor` from the page before (or an entry's id): the page starts after it. */
  after?: string;
  /** 1 to 1000 (100 by default). */
  limit?: number;
}

export class AuditCalls {
  constructor(private readonly http: Http) {}

  /** One page of the audit log, oldest first. */
  page(options: AuditPageOptions = {}): Promise<AuditPage> {
    const query = new URLSearchParams();
    if (options.after !== undefined) query.set("after", options.after);
    if (options.limit !== undefined) query.set("limit", String(options.limit));
    const q = query.toString();
    return this.http.json("GET", `/v1/audit${q ? `?${q}` : ""}`);
  }
}
