// `/v1/keys` (docs/protocol.md, "Tenants and keys"): a tenant manages its own keys (list, create,
// revoke) with a key that carries every scope; a narrower key gets 403 naming the scope it
// lacks, a session token 403.
import { Hono } from "hono";
import { type AuthVariables, authenticate, requireEveryScope } from "../auth/auth.js";
import type { Env } from "../env.js";
import { actorOf, audited } from "./audit.js";
import { createKey, listKeys, revokeKey } from "./key-actions.js";
import { CreateKeyBody } from "./key-schemas.js";
import { jsonBodies, validate } from "./validate.js";

export const keysRoutes = new Hono<{ Bindings: Env; Variables: AuthVariables }>();

keysRoutes.use("*", authenticate);
keysRoutes.use("*", jsonBodies);

keysRoutes.get("/", async (c) => c.json(await listKeys(c.env, requireEveryScope(c.get("principal")))));

keysRoutes.post("/", validate("json", CreateKeyBody), async (c) => {
  const principal = c.get("principal");
  const tenant = principal.tenant;
  const made = await audited(c, { tenant, actor: actorOf(principal), action: "key.create" }, async (detail) => {
    requireEveryScope(principal);
    const key = await createKey(c.env, tenant, c.req.valid("json"));
    detail.keyId = key.keyId;
    return key;
  });
  return c.json(made, 201);
});

keysRoutes.delete("/:keyId", async (c) => {
  const principal = c.get("principal");
  const tenant = principal.tenant;
  const keyId = c.req.param("keyId");
  const what = { tenant, actor: actorOf(principal), action: "key.revoke" as const, detail: { keyId: keyId.slice(0, 64) } };
  return c.json(
    await audited(c, what, () => {
      requireEveryScope(principal);
      return revokeKey(c.env, tenant, keyId);
    }),
  );
});
