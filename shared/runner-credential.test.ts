// Per-runner credentials as pure logic: what verifies, and what does not. The end-to-end attack
// (a lying runner, a twin, an impostor) is test/runner-trust.test.ts.
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { mintRunnerCredential, verifyRunnerCredential } from "./runner-credential.js";

const SECRET = "runner-secret-for-tests";

describe("runner credentials", () => {
  it("round-trips a runner id and its tenants, or any tenant", async () => {
    const some = await mintRunnerCredential(SECRET, { runnerId: "r-1.eu", tenants: ["acme", "globex"] });
    expect(await verifyRunnerCredential(SECRET, some)).toEqual({ runnerId: "r-1.eu", tenants: ["acme", "globex"] });
    const any = await mintRunnerCredential(SECRET, { runnerId: "r-2", tenants: null });
    expect(await verifyRunnerCredential(SECRET, any)).toEqual({ runnerId: "r-2", tenants: null });
  });

  it("refuses another secret, another audience, a session token's shape and garbage", async () => {
    const good = await mintRunnerCredential(SECRET, { runnerId: "r-1", tenants: null });
    expect(await verifyRunnerCredential("another-secret", good)).toBeNull();
    const iat = Math.floor(Date.now() / 1000);
    expect(await verifyRunnerCredential(SECRET, await sign({ aud: "ptybroker-session", rid: "r", ten: null, iat }, SECRET))).toBeNull();
    expect(await verifyRunnerCredential(SECRET, await sign({ aud: "ptybroker-runner", ten: null, iat }, SECRET))).toBeNull();
    expect(await verifyRunnerCredential(SECRET, await sign({ aud: "ptybroker-runner", rid: "r", ten: "acme", iat }, SECRET))).toBeNull();
    expect(await verifyRunnerCredential(SECRET, await sign({ aud: "ptybroker-runner", rid: "r/../x", ten: null, iat }, SECRET))).toBeNull();
    expect(await verifyRunnerCredential(SECRET, "not.a.jwt")).toBeNull();
  });

  it("will not mint bad claims", async () => {
    await expect(mintRunnerCredential(SECRET, { runnerId: "", tenants: null })).rejects.toThrow(/runner id/);
    await expect(mintRunnerCredential(SECRET, { runnerId: "r", tenants: [] })).rejects.toThrow(/at least one/);
    await expect(mintRunnerCredential(SECRET, { runnerId: "r", tenants: ["a b"] })).rejects.toThrow(/bad tenant/);
  });
});
