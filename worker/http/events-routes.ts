// `GET /v1/events` (docs/protocol.md §3, "Events"): the tenant's session lifecycle as
// Server-Sent Events, served by the tenant's object (tenant/tenant-events.ts). API keys with the
// scope `events:read` only: a session token sees one session, not the tenant.
import { Hono } from "hono";
import { ApiError } from "../../shared/errors.js";
import { type AuthVariables, authenticate, requireScope } from "../auth/auth.js";
import { type Env, tenantStub } from "../env.js";
import { EventsQuery } from "./schemas.js";
import { validate } from "./validate.js";

export const eventRoutes = new Hono<{ Bindings: Env; Variables: AuthVariables }>();

eventRoutes.use("*", authenticate);

eventRoutes.get("/", validate("query", EventsQuery), async (c) => {
  const principal = c.get("principal");
  const tenant = requireScope(principal, "events:read");
  const lastEventId = c.req.header("last-event-id");
  if (lastEventId !== undefined && !/^\d{1,15}$/.test(lastEventId)) {
    throw new ApiError("INVALID_REQUEST", "Last-Event-ID is an event id");
  }
  const after = lastEventId ?? c.req.valid("query").after;
  // The object reads where to resume from this header; callers cannot reach it directly.
  const headers = new Headers();
  if (after !== undefined) headers.set("x-ptyb-after", after);
  // The stream closes when the key it was opened with is revoked.
  if (principal.keyId !== undefined) headers.set("x-ptyb-key", principal.keyId);
  const res = await tenantStub(c.env, tenant).fetch(new Request("https://tenant/events", { headers }));
  if (res.status === 429) throw new ApiError("QUOTA_EXCEEDED", "too many event streams are open for this tenant", 5);
  return res;
});
