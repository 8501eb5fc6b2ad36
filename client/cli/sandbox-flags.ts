// The flags `ptybroker run` and `ptybroker exec` take for a session's sandbox (docs/protocol.md §3,
// "Create"): `--network none|egress`, `--memory MIB`, `--pids N` and `--cpus N`, mapped to the
// SDK's `network` and `limits`. Only their form is checked here: the server checks the bounds and
// names the maximum in its 400.
import type { SandboxOptions } from "../index.js";
import { UsageError } from "./common.js";

/** parseArgs options for the four flags. */
export const SANDBOX_FLAGS = {
  network: { type: "string" },
  memory: { type: "string" },
  pids: { type: "string" },
  cpus: { type: "string" },
} as const;

export interface SandboxFlagValues {
  network?: string | undefined;
  memory?: string | undefined;
  pids?: string | undefined;
  cpus?: string | undefined;
}

/** The SDK's `network` and `limits` for the flags given; nothing for flags not given. */
export function sandboxOptions(values: SandboxFlagValues): SandboxOptions {
  const options: SandboxOptions = {};
  if (values.network !== undefined) {
    if (values.network !== "none" && values.network !== "egress") {
      throw new UsageError(`--network takes none or egress, got ${JSON.stringify(values.network)}`);
    }
    options.network = values.network;
  }
  const limits: NonNullable<SandboxOptions["limits"]> = {};
  if (values.memory !== undefined) limits.memoryMiB = whole(values.memory, "--memory takes whole MiB");
  if (values.pids !== undefined) limits.pids = whole(values.pids, "--pids takes a whole number of processes");
  if (values.cpus !== undefined) {
    if (!/^(\d{1,4}(\.\d{1,6})?|\.\d{1,6})$/.test(values.cpus)) {
      throw new UsageError(`--cpus takes a number of CPUs (0.5, 2), got ${JSON.stringify(values.cpus)}`);
    }
    limits.cpus = Number(values.cpus);
  }
  if (Object.keys(limits).length > 0) options.limits = limits;
  return options;
}

function whole(value: string, usage: string): number {
  if (!/^\d{1,9}$/.test(value)) throw new UsageError(`${usage}, got ${JSON.stringify(value)}`);
  return Number(value);
}
