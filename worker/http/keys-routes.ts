// `/v1/keys` (docs/protocol.md, "Tenants and keys"): a tenant manages its own keys (list, create,
// revoke) with a key that carries every scope; a narrower key gets 403 naming the scope it
// lacks, a session token 403.
import { Hono } from "hono";
import { KEY_SCOPES } from "../../shared/keys.js";
import { type AuthVariables, type Principal, authenticate, requireScope } from "../auth/auth.js";
import type { Env } from "../env.js";
import { createKey, listKeys, revokeKey } from "./key-actions.js";
import { CreateKeyBody } from "./key-schemas.js";
import { jsonBodies, validate } from "./validate.js";

export const keysRoutes = new Hono<{ Bindings: Env; Variables: AuthVariables }>();

keysRoutes.use("*", authenticate);
keysRoutes.use("*", jsonBodies);

/** The tenant, once the caller's key carries every scope. */
function everyScope(principal: Principal): string {
  for (const scope of KEY_SCOPES) requireScope(principal, scope);
  return principal.tenant;
}

keysRoutes.get("/", async (c) => c.json(await listKeys(c.env, everyScope(c.get("principal")))));

keysRoutes.post("/", validate("json", CreateKeyBody), async (c) => {
  const tenant = everyScope(c.get("principal"));
  return c.json(await createKey(c.env, tenant, c.req.valid("json")), 201);
});

keysRoutes.delete("/:keyId", async (c) => {
  const tenant = everyScope(c.get("principal"));
  return c.json(await revokeKey(c.env, tenant, c.req.param("keyId")));
});
