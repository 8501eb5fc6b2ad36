// Request validation for `/v1/webhooks` and `/v1/audit` (docs/protocol.md, "Webhooks", "Audit log").
import { z } from "zod";
import { WEBHOOK_EVENTS } from "../../shared/webhooks.js";
import { MAX_WEBHOOK_URL } from "./webhook-url.js";

export const CreateWebhookBody = z.strictObject({
  url: z.string().min(1).max(MAX_WEBHOOK_URL, `at most ${MAX_WEBHOOK_URL} characters`),
  /** The events sent; absent = every lifecycle event. */
  events: z
    .array(z.enum(WEBHOOK_EVENTS))
    .min(1, "give at least one event, or leave events out for all of them")
    .max(WEBHOOK_EVENTS.length * 2)
    .optional(),
  /** The signing secret; absent = the edge makes one (shown in the create's answer). */
  secret: z
    .string()
    .min(16, "a secret is at least 16 characters")
    .max(256)
    .regex(/^[\x21-\x7e]+$/, "a secret is visible ASCII without spaces")
    .optional(),
});

/** A hook id as the edge makes them: `wh_` and 24 hex digits. */
export const WEBHOOK_ID = /^wh_[0-9a-f]{24}$/;

export const AuditQuery = z.object({
  /** A `nextCursor` (or an entry's id): the page starts after it. */
  after: z.string().regex(/^\d{1,15}$/, "after is an entry id or a nextCursor").transform(Number).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
