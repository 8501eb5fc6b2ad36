// `/v1/webhooks` (docs/protocol.md, "Webhooks"): a tenant's signed webhooks, created, listed,
// shown and deleted with a key that carries `webhooks:write` (listing too: a hook's URL and its
// deliveries are the tenant's configuration, not session data). The URL rule (webhook-url.ts)
// refuses this host and private networks unless WEBHOOK_ALLOW_PRIVATE=1.
import { Hono } from "hono";
import { ApiError, type Failure, unwrap } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { CreatedWebhook, WebhookDelivery, WebhookInfo } from "../../shared/webhooks.js";
import { WEBHOOK_EVENTS } from "../../shared/webhooks.js";
import { type AuthVariables, authenticate, requireScope } from "../auth/auth.js";
import { type Env, tenantStub } from "../env.js";
import { actorOf, audited } from "./audit.js";
import { CreateWebhookBody, WEBHOOK_ID } from "./webhook-schemas.js";
import { webhookUrlProblem } from "./webhook-url.js";
import { jsonBodies, validate } from "./validate.js";

export const webhooksRoutes = new Hono<{ Bindings: Env; Variables: AuthVariables }>();

webhooksRoutes.use("*", authenticate);
webhooksRoutes.use("*", jsonBodies);

function hex(bytes: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function hookId(raw: string): string {
  if (!WEBHOOK_ID.test(raw)) throw new ApiError("NOT_FOUND", `webhook ${raw} not found`);
  return raw;
}

webhooksRoutes.post("/", validate("json", CreateWebhookBody), async (c) => {
  const principal = c.get("principal");
  const tenant = principal.tenant;
  const body = c.req.valid("json");
  // Refusals (a key without webhooks:write, a private URL, the cap) are recorded with their code.
  const made = await audited(c, { tenant, actor: actorOf(principal), action: "webhook.create" }, async (detail) => {
    requireScope(principal, "webhooks:write");
    const problem = webhookUrlProblem(body.url, c.env.WEBHOOK_ALLOW_PRIVATE === "1");
    if (problem) throw new ApiError("INVALID_REQUEST", problem);
    const secret = body.secret ?? `whsec_${hex(32)}`;
    const events = body.events ? WEBHOOK_EVENTS.filter((e) => body.events?.includes(e)) : [...WEBHOOK_EVENTS];
    const id = `wh_${hex(12)}`;
    detail.hookId = id;
    // RPC typing wraps results as Disposable; the value is the object's own WebhookInfo or Failure.
    const info = unwrap((await tenantStub(c.env, tenant).addHook(tenant, { id, url: body.url, events, secret })) as WebhookInfo | Failure);
    log.info("webhook.create", { tenant, hookId: id, outcome: "created" });
    return { ...info, secret } satisfies CreatedWebhook;
  });
  return c.json(made, 201);
});

webhooksRoutes.get("/", async (c) => {
  const tenant = requireScope(c.get("principal"), "webhooks:write");
  return c.json({ webhooks: (await tenantStub(c.env, tenant).listHooks()) as WebhookInfo[] });
});

webhooksRoutes.get("/:id", async (c) => {
  const tenant = requireScope(c.get("principal"), "webhooks:write");
  return c.json(unwrap((await tenantStub(c.env, tenant).getHook(hookId(c.req.param("id")))) as WebhookInfo | Failure));
});

webhooksRoutes.get("/:id/deliveries", async (c) => {
  const tenant = requireScope(c.get("principal"), "webhooks:write");
  const id = hookId(c.req.param("id"));
  return c.json(unwrap((await tenantStub(c.env, tenant).hookDeliveries(id)) as { deliveries: WebhookDelivery[] } | Failure));
});

webhooksRoutes.delete("/:id", async (c) => {
  const principal = c.get("principal");
  const tenant = principal.tenant;
  const raw = c.req.param("id");
  const done = await audited(c, { tenant, actor: actorOf(principal), action: "webhook.delete", detail: { hookId: raw.slice(0, 64) } }, async () => {
    requireScope(principal, "webhooks:write");
    return unwrap((await tenantStub(c.env, tenant).removeHook(hookId(raw))) as { id: string } | Failure);
  });
  log.info("webhook.delete", { tenant, hookId: done.id, outcome: "deleted" });
  return c.json({ id: done.id, deleted: true });
});
