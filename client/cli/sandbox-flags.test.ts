// The sandbox flags of `ptybroker run` and `ptybroker exec` → the SDK's `network` and `limits`:
// pure logic, no server.
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { UsageError } from "./common.js";
import { SANDBOX_FLAGS, sandboxOptions } from "./sandbox-flags.js";

/** The flags as the commands parse them. */
function mapped(args: string[]) {
  const { values } = parseArgs({ args, allowPositionals: true, options: SANDBOX_FLAGS });
  return sandboxOptions(values);
}

describe("sandboxOptions", () => {
  it("maps --network, --memory, --pids and --cpus to network and limits", () => {
    expect(mapped(["--network", "none", "--memory", "512", "--pids", "64", "--cpus", "0.5", "--", "ls"])).toEqual({
      network: "none",
      limits: { memoryMiB: 512, pids: 64, cpus: 0.5 },
    });
    expect(mapped(["--network=egress", "--cpus=2"])).toEqual({ network: "egress", limits: { cpus: 2 } });
  });

  it("sends only the flags given: no network, no limits, or some limits alone", () => {
    expect(mapped([])).toEqual({});
    expect(mapped(["--memory", "256"])).toEqual({ limits: { memoryMiB: 256 } });
    expect(mapped(["--network", "none"])).toEqual({ network: "none" });
    expect(mapped(["--cpus", ".25"])).toEqual({ limits: { cpus: 0.25 } });
  });

  it("leaves the bounds to the server: a value past the maximum goes as given", () => {
    expect(mapped(["--memory", "999999", "--pids", "0"])).toEqual({ limits: { memoryMiB: 999999, pids: 0 } });
  });

  it.each([
    [["--network", "host"], '--network takes none or egress, got "host"'],
    [["--network", ""], '--network takes none or egress, got ""'],
    [["--memory", "1G"], '--memory takes whole MiB, got "1G"'],
    [["--memory", "512.5"], '--memory takes whole MiB, got "512.5"'],
    [["--pids=-1"], '--pids takes a whole number of processes, got "-1"'],
    [["--cpus", "half"], '--cpus takes a number of CPUs (0.5, 2), got "half"'],
    [["--cpus", "1e3"], '--cpus takes a number of CPUs (0.5, 2), got "1e3"'],
  ])("refuses %j as a usage error", (args, message) => {
    expect(() => mapped(args)).toThrow(UsageError);
    expect(() => mapped(args)).toThrow(message);
  });
});
