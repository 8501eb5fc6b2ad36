// The runner's configuration as pure logic: the token file, and the credential's runner id.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { mintRunnerCredential } from "../shared/runner-credential.js";
import { loadConfig } from "./config.js";

const folder = mkdtempSync(join(tmpdir(), "ptybroker-config-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe("runner configuration", () => {
  it("reads RUNNER_TOKEN_FILE, so the token need not be in the runner's environment", () => {
    const file = join(folder, "token");
    writeFileSync(file, "from-a-file\n", { mode: 0o600 });
    expect(loadConfig({ RUNNER_TOKEN_FILE: file }).runnerToken).toBe("from-a-file");
    expect(() => loadConfig({ RUNNER_TOKEN_FILE: file, RUNNER_TOKEN: "x" })).toThrow(/not both/);
    expect(() => loadConfig({ RUNNER_TOKEN_FILE: join(folder, "missing") })).toThrow(/RUNNER_TOKEN_FILE/);
    expect(() => loadConfig({})).toThrow(/RUNNER_TOKEN \(or RUNNER_TOKEN_FILE\) is required/);
  });

  it("RUNNER_DRAIN_SEC: 300 by default, 0 ends sessions at once, never negative", () => {
    expect(loadConfig({ RUNNER_TOKEN: "t" }).drainSec).toBe(300);
    expect(loadConfig({ RUNNER_TOKEN: "t", RUNNER_DRAIN_SEC: "0" }).drainSec).toBe(0);
    expect(loadConfig({ RUNNER_TOKEN: "t", RUNNER_DRAIN_SEC: "30" }).drainSec).toBe(30);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", RUNNER_DRAIN_SEC: "-1" })).toThrow(/RUNNER_DRAIN_SEC/);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", RUNNER_DRAIN_SEC: "soon" })).toThrow(/RUNNER_DRAIN_SEC/);
  });

  it("takes the runner id from a runner credential unless RUNNER_ID is set", async () => {
    const credential = await mintRunnerCredential("secret", { runnerId: "eu-1", tenants: ["acme"] });
    expect(loadConfig({ RUNNER_TOKEN: credential }).runnerId).toBe("eu-1");
    expect(loadConfig({ RUNNER_TOKEN: credential, RUNNER_ID: "mine" }).runnerId).toBe("mine");
    expect(loadConfig({ RUNNER_TOKEN: "shared" }).runnerId).toMatch(/-\d+-[0-9a-f]{6}$/);
  });
});
