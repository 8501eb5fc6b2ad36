// Row 19's measures (rows/keys.ts): creates with two keys in turn, and a minted key to make them with.
import { Api } from "../test/rest-client.js";
import type { BenchStack } from "./stack.js";

/** `POST /v1/sessions` → 201, ms, for each key in turn; every session deleted after its create. */
export async function alternatingCreates(apis: Api[], count: number): Promise<number[][]> {
  const ms: number[][] = apis.map(() => []);
  for (let i = -5; i < count; i++) {
    for (const [k, api] of apis.entries()) {
      const started = performance.now();
      const res = await api.request<{ id: string }>("POST", "/v1/sessions", { command: "/bin/cat" });
      const took = performance.now() - started;
      if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
      await api.destroy(res.body.id);
      if (i >= 0) ms[k].push(took);
    }
  }
  return ms;
}

/** A client with a minted key of the bench's tenant, made through the admin API (the stack runs with ADMIN_KEY). */
export async function mintedKeyApi(stack: BenchStack, adminKey: string): Promise<Api> {
  const admin = new Api(stack.url, adminKey);
  const tenant = await admin.request("POST", "/admin/v1/tenants", { id: "bench" });
  if (tenant.status !== 201 && tenant.status !== 409) throw new Error(`admin tenant: ${tenant.status} ${JSON.stringify(tenant.body)}`);
  const key = await admin.request<{ key: string }>("POST", "/admin/v1/tenants/bench/keys", { name: "bench" });
  if (key.status !== 201) throw new Error(`admin key: ${key.status} ${JSON.stringify(key.body)}`);
  return new Api(stack.url, key.body.key);
}
