// tenantOf (tenant-bound.ts): a session's log key is `tenant/session/incarnation`, and the tenant
// is what comes before the first slash, never the rest (a cut at the last slash would bound a
// tenant's sessions apart from one another).
import { describe, expect, it } from "vitest";
import { tenantOf } from "./tenant-bound.js";

describe("tenantOf", () => {
  it("takes the part before the first slash of a three-part key", () => {
    expect(tenantOf("acme/build-7/0f3a9c")).toBe("acme");
    expect(tenantOf("acme/build-7/1")).toBe(tenantOf("acme/other/2"));
    expect(tenantOf("globex/build-7/0f3a9c")).not.toBe(tenantOf("acme/build-7/0f3a9c"));
  });

  it("a key with no slash is its own tenant", () => {
    expect(tenantOf("acme")).toBe("acme");
  });
});
