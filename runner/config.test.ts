// The runner's configuration as pure logic: the token file, the credential's runner id, the sandbox's settings.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { mintRunnerCredential } from "../shared/runner-credential.js";
import { loadConfig } from "./config.js";
import { Isolation } from "./isolation/isolation.js";

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

  it("sandboxes sessions by default, with the documented defaults; refuses a bad value naming the variable", () => {
    expect(loadConfig({ RUNNER_TOKEN: "t" }).sandbox).toEqual({
      kind: "bwrap",
      network: "egress",
      denyCidrs: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "fc00::/7", "fe80::/10"],
      limits: { memoryMiB: 1024, pids: 512, cpus: 1 },
      diskMiB: 2048,
      tmpMiB: 256,
      ptys: 64,
    });
    const set = loadConfig({ RUNNER_TOKEN: "t", RUNNER_SANDBOX: "none", SESSION_NETWORK: "none", SESSION_DENY_CIDRS: " 198.51.100.0/24 , 2001:db8::/32 ", SESSION_CPUS: "0.5" });
    expect(set.sandbox).toMatchObject({ kind: "none", network: "none", denyCidrs: ["198.51.100.0/24", "2001:db8::/32"], limits: { cpus: 0.5 } });
    expect(() => loadConfig({ RUNNER_TOKEN: "t", RUNNER_SANDBOX: "docker" })).toThrow(/RUNNER_SANDBOX/);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", SESSION_NETWORK: "full" })).toThrow(/SESSION_NETWORK/);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", SESSION_DENY_CIDRS: "10.0.0.0" })).toThrow(/SESSION_DENY_CIDRS: 10.0.0.0 is not a CIDR/);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", SESSION_PIDS: "2" })).toThrow(/SESSION_PIDS/);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", TENANT_DISK_MIB: "lots" })).toThrow(/TENANT_DISK_MIB/);
    expect(loadConfig({ RUNNER_TOKEN: "t", SESSION_PTYS: "16" }).sandbox.ptys).toBe(16);
    for (const ptys of ["0", "4097", "1.5", "many"]) expect(() => loadConfig({ RUNNER_TOKEN: "t", SESSION_PTYS: ptys })).toThrow(/SESSION_PTYS/);
  });

  it("TENANT_LOG_BYTES: 1 GiB by default, at least 1 MiB", () => {
    expect(loadConfig({ RUNNER_TOKEN: "t" }).tenantLogBytes).toBe(1 << 30);
    expect(loadConfig({ RUNNER_TOKEN: "t", TENANT_LOG_BYTES: "16777216" }).tenantLogBytes).toBe(16 << 20);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", TENANT_LOG_BYTES: "65536" })).toThrow(/TENANT_LOG_BYTES/);
    expect(() => loadConfig({ RUNNER_TOKEN: "t", TENANT_LOG_BYTES: "1e9x" })).toThrow(/TENANT_LOG_BYTES/);
  });

  it("refuses to start sandboxed without root, saying how to run unsandboxed", async () => {
    const config = loadConfig({ RUNNER_TOKEN: "t", RUNNER_WORKSPACE: folder });
    await expect(Isolation.start(config, false)).rejects.toThrow(
      "RUNNER_SANDBOX=bwrap: the runner must be root to give each session its sandbox (set RUNNER_SANDBOX=none for local development only)",
    );
  });

  it("takes the runner id from a runner credential unless RUNNER_ID is set", async () => {
    const credential = await mintRunnerCredential("secret", { runnerId: "eu-1", tenants: ["acme"] });
    expect(loadConfig({ RUNNER_TOKEN: credential }).runnerId).toBe("eu-1");
    expect(loadConfig({ RUNNER_TOKEN: credential, RUNNER_ID: "mine" }).runnerId).toBe("mine");
    expect(loadConfig({ RUNNER_TOKEN: "shared" }).runnerId).toMatch(/-\d+-[0-9a-f]{6}$/);
  });
});
